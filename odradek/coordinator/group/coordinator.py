"""The group coordinator service, as Kafka's GroupCoordinator + GroupMetadataManager.

It owns the `__consumer_offsets` partitions this broker leads. A group belongs to partition
`abs(java_hashcode(group_id)) % partitions`; requests for other groups get NOT_COORDINATOR, and
for groups whose partition is still being replayed COORDINATOR_LOAD_IN_PROGRESS (Heartbeat then
answers NONE and SyncGroup REBALANCE_IN_PROGRESS, as Kafka does for older clients). Loading a
partition applies its records in order: offset commits and tombstones, group metadata (a group
with members comes back Stable, its members keep their sessions), transactional offsets settled
by their markers.

The broker gives it the pieces it needs as callables, so this package never imports the broker:
`get_partition(index)` returns the local partition (duck-typed: `.log`, `.is_leader`,
`.high_watermark`, `.append_internal(batch) -> result with .error`), `partition_count()` the
size of the offsets topic (None before it exists). Records are appended as one uncompressed
RecordBatch per operation; an operation is answered only after its append.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.coordinator.codec import append_error as append_error  # the handlers' too
from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group import migration
from odradek.coordinator.group import records as rec
from odradek.coordinator.group.assignors import assignor_name
from odradek.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupManager,
    HeartbeatRequest,
    HeartbeatResult,
    TopicsView,
)
from odradek.coordinator.group.join import JoinGroupOp, JoinParams
from odradek.coordinator.group.loader import replay
from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    JoinResult,
    OffsetAndMetadata,
    Protocols,
    SyncResult,
)
from odradek.coordinator.group.offsets import (
    FetchedOffset,
    OffsetConfig,
    OffsetManager,
    PendingCommit,
)
from odradek.coordinator.group.state import GroupConfig, GroupStateMachine, LeaveMember, Record
from odradek.coordinator.group.streams_group import (
    StreamsGroup,
    StreamsGroupConfig,
    StreamsGroupManager,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
)
from odradek.coordinator.group.sync import SyncGroupOp, SyncParams
from odradek.coordinator.group.timers import AsyncioScheduler, Scheduler
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"
GROUP_TYPE_STREAMS = "streams"

# APIs that accept the empty group id (Kafka's isValidGroupId)
# ConsumerGroupHeartbeat validates the id itself (an empty one is INVALID_REQUEST, as Kafka's)
_EMPTY_ID_OK = frozenset(
    {
        "offset_commit",
        "offset_fetch",
        "describe",
        "delete",
        "consumer_heartbeat",
        "streams_heartbeat",
    }
)


@dataclass(slots=True, frozen=True)
class GroupCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 1
    segment_bytes: int = 104857600
    retention_check_interval_ms: int = 600000
    group: GroupConfig = field(default_factory=GroupConfig)
    offsets: OffsetConfig = field(default_factory=OffsetConfig)
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    streams: StreamsGroupConfig = field(default_factory=StreamsGroupConfig)

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> GroupCoordinatorConfig:
        """From a broker config's `get(key)` with Kafka's keys."""
        return cls(
            num_partitions=int(get("offsets.topic.num.partitions")),
            replication_factor=int(get("offsets.topic.replication.factor")),
            segment_bytes=int(get("offsets.topic.segment.bytes")),
            retention_check_interval_ms=int(get("offsets.retention.check.interval.ms")),
            group=GroupConfig(
                min_session_timeout_ms=int(get("group.min.session.timeout.ms")),
                max_session_timeout_ms=int(get("group.max.session.timeout.ms")),
                max_size=int(get("group.max.size")),
                initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms")),
            ),
            offsets=OffsetConfig(retention_ms=int(get("offsets.retention.minutes")) * 60000),
            consumer=_consumer_config(get),
            streams=StreamsGroupConfig(
                heartbeat_interval_ms=int(get("group.streams.heartbeat.interval.ms")),
                session_timeout_ms=int(get("group.streams.session.timeout.ms")),
                num_standby_replicas=int(get("group.streams.num.standby.replicas")),
            ),
        )

    def topic_configs(self) -> dict[str, str]:
        """Configs of `__consumer_offsets`, as Kafka's offsetsTopicConfigs."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "compression.type": "producer",
        }


@dataclass(slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    error: ErrorCode
    group_id: str
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberSummary] = field(default_factory=list)
    message: str | None = None  # with GROUP_ID_NOT_FOUND (DescribeGroups v6)


class GroupCoordinator:
    """The asyncio service: started after the logs load, stopped before they close."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        *,
        get_partition: Callable[[int], Any],
        partition_count: Callable[[], int | None],
        scheduler: Scheduler | None = None,
        replicated: Callable[[str], Awaitable[ErrorCode]] | None = None,
        topics: TopicsView | None = None,
    ) -> None:
        self.config = config
        self.get_partition = get_partition
        self.partition_count = partition_count
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        self.machine = GroupStateMachine(config.group, self.scheduler, self._append)
        self._replicated = replicated
        self._replication_waits: set[asyncio.Task[None]] = set()
        if replicated is not None:
            self.machine.replicated = self._wait_replicated
        self.joins = JoinGroupOp(self.machine)
        self.syncs = SyncGroupOp(self.machine)
        self.offsets = OffsetManager(self.machine, config.offsets)
        # KIP-848 consumer groups; their offsets live in the classic machine's (empty) group
        self.consumer = ConsumerGroupManager(
            config.consumer, self.scheduler, topics or dict, self._append
        )
        self.consumer.on_fence = self._downgrade_on_fence
        # KIP-1071 streams groups; their offsets live in the classic machine's (empty) group too
        self.streams = StreamsGroupManager(
            config.streams, self.scheduler, topics or dict, self._append
        )
        self.loaded: set[int] = set()
        self.loading: set[int] = set()
        self.active = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._load_queue: asyncio.Queue[int] | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.active = True
        self._load_queue = asyncio.Queue()
        count = self.partition_count() or 0
        for index in range(count):
            part = self.get_partition(index)
            if part is not None and part.is_leader:
                self._schedule_load(index)
        self._tasks.append(asyncio.create_task(self._loader(), name="group-coordinator-load"))
        self._tasks.append(
            asyncio.create_task(self._expire_loop(), name="group-coordinator-expiry")
        )
        log.info("group coordinator started: loading %d offsets partitions", len(self.loading))

    def _wait_replicated(self, group_id: str, done: Callable[[ErrorCode], None]) -> None:
        """The machine's Replicator: `done` runs on the loop once the broker's ISR wait ends
        (never if the coordinator stops first: its groups are dropped then)."""
        assert self._replicated is not None
        wait = self._replicated(group_id)

        async def run() -> None:
            try:
                error = await wait
            except Exception:
                log.exception("replication wait of group %s failed", group_id)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
            done(error)

        task = asyncio.get_running_loop().create_task(run(), name=f"group-store-{group_id}")
        self._replication_waits.add(task)
        task.add_done_callback(self._replication_waits.discard)

    def _cancel_replication_waits(self) -> None:
        for task in list(self._replication_waits):
            task.cancel()
        self._replication_waits.clear()

    async def stop(self) -> None:
        self.active = False
        self._cancel_replication_waits()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        for group in list(self.machine.groups.values()):
            self.machine.drop(group)
        for group_id in list(self.consumer.groups):
            self.consumer.drop(group_id)
        for group_id in list(self.streams.groups):
            self.streams.drop(group_id)
        cancel_all = getattr(self.scheduler, "cancel_all", None)
        if cancel_all is not None:
            cancel_all()
        self.loaded.clear()
        self.loading.clear()

    def abandon(self) -> None:
        """Unclean stop (a simulated kill -9): drop everything in memory, write nothing."""
        self.active = False
        self._cancel_replication_waits()
        for task in self._tasks:
            task.cancel()
        cancel_all = getattr(self.scheduler, "cancel_all", None)
        if cancel_all is not None:
            cancel_all()
        self.machine.groups.clear()
        self.consumer.groups.clear()
        self.streams.groups.clear()
        self.loaded.clear()
        self.loading.clear()

    @property
    def group_count(self) -> int:
        """Classic, consumer- and streams-protocol groups (one id counted once)."""
        if not self.consumer.groups and not self.streams.groups:
            return len(self.machine.groups)
        return len(
            self.machine.groups.keys() | self.consumer.groups.keys() | self.streams.groups.keys()
        )

    @property
    def rebalances(self) -> int:
        """Rebalances since start: classic generations with members begun, and consumer-protocol
        group epochs bumped."""
        return self.machine.rebalances + self.consumer.rebalances + self.streams.rebalances

    # -- partitions: election, resignation, loading -------------------------------------------

    def partition_for(self, group_id: str) -> int | None:
        count = self.partition_count()
        return None if not count else rec.partition_for(group_id, count)

    def on_partition_added(self, part: Any) -> None:
        """TopicManager listener: a new (or newly led) offsets partition is ours to load."""
        if getattr(part, "topic", None) == OFFSETS_TOPIC and self.active and part.is_leader:
            self.on_election(part.index)

    def on_become_leader(self, part: Any) -> None:
        """TopicManager listener (replication): this broker now leads an offsets partition."""
        if getattr(part, "topic", None) == OFFSETS_TOPIC:
            self.on_election(part.index)

    def on_become_follower(self, part: Any) -> None:
        if getattr(part, "topic", None) == OFFSETS_TOPIC:
            self.on_resignation(part.index)

    def on_partition_removed(self, part: Any) -> None:
        self.on_become_follower(part)

    def on_election(self, index: int) -> None:
        """Lead an offsets partition: replay it (answering LOAD_IN_PROGRESS meanwhile)."""
        if not self.active or index in self.loaded or index in self.loading:
            return
        part = self.get_partition(index)
        if part is not None and part.log.log_end_offset == part.log.log_start_offset:
            self.loaded.add(index)  # nothing to replay
            log.debug("group coordinator for %s-%d (empty)", OFFSETS_TOPIC, index)
            return
        self._schedule_load(index)

    def on_resignation(self, index: int) -> None:
        """Another broker leads this partition now: forget its groups."""
        self.loaded.discard(index)
        self.loading.discard(index)
        for group in [
            g for g in self.machine.groups.values() if self.partition_for(g.group_id) == index
        ]:
            self.machine.drop(group)
        for group_id in [g for g in self.consumer.groups if self.partition_for(g) == index]:
            self.consumer.drop(group_id)
        for group_id in [g for g in self.streams.groups if self.partition_for(g) == index]:
            self.streams.drop(group_id)
        log.info("resigned as group coordinator for %s-%d", OFFSETS_TOPIC, index)

    def _schedule_load(self, index: int) -> None:
        self.loading.add(index)
        if self._load_queue is not None:
            self._load_queue.put_nowait(index)

    async def _loader(self) -> None:
        assert self._load_queue is not None
        while True:
            index = await self._load_queue.get()
            if index not in self.loading:
                continue
            try:
                self.load_partition(index)
            except Exception:
                log.exception("failed to load %s-%d", OFFSETS_TOPIC, index)
                self.loading.discard(index)
            await asyncio.sleep(0)

    def load_partition(self, index: int) -> None:
        """Replay one offsets partition up to its log end (no await inside), as Kafka's
        GroupMetadataManager: a new leader's high watermark may still trail commits that the
        previous leader acknowledged once this replica had them."""
        part = self.get_partition(index)
        if part is None or not part.is_leader:
            self.loading.discard(index)
            return
        records, groups = replay(
            self.machine,
            self.offsets,
            part.log,
            part.log.log_end_offset,
            f"{OFFSETS_TOPIC}-{index}",
            self.consumer,
            self.streams,
        )
        self.loading.discard(index)
        self.loaded.add(index)
        # an empty partition (most of the 50 after a restart) is no news to an operator
        log.log(
            logging.INFO if records else logging.DEBUG,
            "loaded %s-%d: %d records, %d groups",
            OFFSETS_TOPIC,
            index,
            records,
            groups,
        )

    # -- status and appends -------------------------------------------------------------------

    def status(self, group_id: str | None, api: str) -> ErrorCode | None:
        """Kafka's validateGroupStatus: valid id, active, loaded, ours."""
        if group_id is None or (group_id == "" and api not in _EMPTY_ID_OK):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        index = self.partition_for(group_id)
        if index is None:
            return ErrorCode.NOT_COORDINATOR
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        part = self.get_partition(index)
        if index not in self.loaded or part is None or not part.is_leader:
            return ErrorCode.NOT_COORDINATOR
        return None

    def offsets_partition(self, group_id: str) -> Any:
        """The local `__consumer_offsets` partition holding `group_id` (None if unknown)."""
        index = self.partition_for(group_id)
        return None if index is None else self.get_partition(index)

    def _append(
        self,
        group_id: str,
        records: list[Record],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> ErrorCode:
        index = self.partition_for(group_id)
        part = None if index is None else self.get_partition(index)
        if part is None or index not in self.loaded:
            return ErrorCode.NOT_COORDINATOR
        now = self.scheduler.now_ms()
        batch = build_batch(
            [(k, v, (), now) for k, v in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
        )
        limit = part.log.config.max_message_bytes
        if len(batch) > limit:
            # as Kafka's log append (RecordTooLargeException): a record the offsets topic
            # cannot hold is refused, not written (a batch over the limit in the log would be
            # refused again by every fetcher and replica)
            log.error(
                "group %s: a %d-byte batch for %s-%d is over its max.message.bytes %d; not written",
                group_id,
                len(batch),
                OFFSETS_TOPIC,
                index,
                limit,
            )
            return append_error(ErrorCode.MESSAGE_TOO_LARGE)
        result = part.append_internal(batch)
        error = ErrorCode(result.error)
        if error != ErrorCode.NONE:
            log.warning(
                "append to %s-%d for group %s failed: %s",
                OFFSETS_TOPIC,
                index,
                group_id,
                error.name,
            )
            return append_error(error)
        return ErrorCode.NONE

    # -- the classic protocol -----------------------------------------------------------------

    async def join(self, req: JoinParams) -> JoinResult:
        """JoinGroup as one typed request; answered when the join phase completes."""
        error = self.status(req.group_id, "join")
        if error is None and self._in_consumer_group(req.group_id):
            return self._classic_join_to_consumer_group(req)
        if error is None:
            error = self._classic_allowed(req.group_id)
        if error is not None:
            return JoinResult.failed(req.member_id, error)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self.joins.join(req, _resolver(fut))
        return await fut

    def _in_consumer_group(self, group_id: str) -> bool:
        """A consumer group with members answers the classic requests itself (its classic
        members, KIP-848 online migration)."""
        group = self.consumer.get(group_id)
        return group is not None and bool(group.members)

    def _classic_join_to_consumer_group(self, req: JoinParams) -> JoinResult:
        if req.protocol_type != migration.CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return JoinResult.failed(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if req.require_known and not req.member_id:
            return JoinResult.failed(
                f"{req.client_id}-{uuid.uuid4()}", ErrorCode.MEMBER_ID_REQUIRED
            )
        group = self.consumer.get(req.group_id)
        replaced = None  # a consumer-protocol static member this classic one replaces
        if group is not None and req.instance_id is not None and not req.member_id:
            replaced = group.static_members.get(req.instance_id)
            if replaced is not None and not migration.downgrade_allowed(
                group, self.config.consumer, self.config.group.max_size, replaced=replaced
            ):
                replaced = None
        assignment_epoch = group.assignment_epoch if group is not None else 0
        answer = migration.classic_join(
            self.consumer,
            req.group_id,
            req.member_id,
            req.instance_id,
            [(name, bytes(meta)) for name, meta in req.protocols],
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.client_id,
            req.client_host,
        )
        log.info(
            "[GroupId %s] classic member %s joined the consumer group: %s %s",
            req.group_id,
            answer.member_id,
            answer.error.name,
            answer.message or "",
        )
        if answer.error != ErrorCode.NONE:
            return JoinResult.failed(req.member_id, answer.error)
        if replaced is not None and group is not None:
            # the last consumer-protocol member was replaced: the group is classic again,
            # Stable when the target assignment was current; when the join moved the group
            # epoch (another subscription), it rebalances as Kafka 4.4 does
            stale = assignment_epoch < group.group_epoch
            self._downgrade(group, None, "stale assignment" if stale else None)
        return JoinResult(
            ErrorCode.NONE,
            answer.member_id,
            answer.generation_id,
            migration.CONSUMER_PROTOCOL_TYPE,
            answer.protocol_name,
        )

    def _upgrade(self, classic: ClassicGroup) -> str | None:
        """A ConsumerGroupHeartbeat joins a classic group with members: it becomes a consumer
        group keeping them as classic members (Kafka's convertToConsumerGroup); the refusal
        message when it may not."""
        refusal = migration.upgrade_refusal(classic, self.config.consumer)
        if refusal is not None:
            return refusal
        converted = migration.consumer_group_from_classic(
            classic, self.consumer.topics(), self.config.consumer.assignors[0]
        )
        error = self._append(classic.group_id, migration.conversion_records(converted))
        if error != ErrorCode.NONE:
            return f"The group's conversion could not be written: {error.name}."
        log.info(
            "[GroupId %s] converted classic group with %d members to a consumer group",
            classic.group_id,
            len(converted.members),
        )
        self.machine.hand_over(classic)
        migration.adopt(self.consumer, converted)
        return None

    def _classic_allowed(self, group_id: str) -> ErrorCode | None:
        """A classic JoinGroup for a consumer-protocol group: an empty one becomes classic when
        group.consumer.migration.policy allows a downgrade; otherwise the id is taken."""
        if self.streams.is_streams_group(group_id):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        group = self.consumer.get(group_id)
        if group is None:
            return None
        if not group.members and self.config.consumer.downgrade_allowed:
            log.info("converting empty consumer group %s to a classic group", group_id)
            self.consumer.take_over_from_classic(group_id)
            return None
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        reason: str | None = None,
    ) -> JoinResult:
        """`join` with the request's fields spelled out (tests' shorthand; the handler builds
        JoinParams itself)."""
        return await self.join(
            JoinParams(
                group_id,
                member_id,
                group_instance_id,
                require_known_member_id,
                support_skip_assignment,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                reason,
            )
        )

    async def sync(self, req: SyncParams) -> SyncResult:
        """SyncGroup as one typed request; a follower's is answered once the leader's is stored."""
        error = self.status(req.group_id, "sync")
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance state was lost: have the member rejoin without a new lookup
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if error is not None:
            return SyncResult(error)
        if self._in_consumer_group(req.group_id):
            sync_error, assignment = migration.classic_sync(
                self.consumer,
                req.group_id,
                req.member_id,
                req.instance_id,
                req.generation_id,
                req.protocol_type,
                req.protocol_name,
            )
            log.debug(
                "[GroupId %s] classic member %s synced: %s",
                req.group_id,
                req.member_id,
                sync_error.name,
            )
            if sync_error != ErrorCode.NONE:
                return SyncResult(sync_error)
            return SyncResult(ErrorCode.NONE, req.protocol_type, req.protocol_name, assignment)
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self.syncs.sync(req, _resolver(fut))
        return await fut

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        """`sync` with the request's fields spelled out (tests' shorthand; the handler builds
        SyncParams itself)."""
        return await self.sync(
            SyncParams(
                group_id,
                generation_id,
                member_id,
                protocol_type,
                protocol_name,
                group_instance_id,
                assignments,
            )
        )

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self.status(group_id, "heartbeat")
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is loading: answer blindly, as Kafka does
        if error is not None:
            return error
        if self._in_consumer_group(group_id):
            return migration.classic_heartbeat(
                self.consumer, group_id, member_id, group_instance_id, generation_id
            )
        return self.machine.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(
        self, group_id: str, members: list[LeaveMember]
    ) -> tuple[ErrorCode, list[tuple[LeaveMember, ErrorCode]]]:
        error = self.status(group_id, "leave")
        if error is not None:
            return error, []
        if self._in_consumer_group(group_id):
            return ErrorCode.NONE, [
                (
                    m,
                    migration.classic_leave(
                        self.consumer, group_id, m.member_id, m.group_instance_id
                    ),
                )
                for m in members
            ]
        return self.machine.leave(group_id, members)

    # -- the consumer protocol (KIP-848) ------------------------------------------------------

    def consumer_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (68)."""
        error = self.status(req.group_id, "consumer_heartbeat")
        if error is not None:
            return HeartbeatResult.failed(error)
        classic = self.machine.get(req.group_id)
        classic_busy = classic is not None and not (
            classic.is_(GroupState.EMPTY) or classic.is_(GroupState.DEAD)
        )
        if (
            classic is not None
            and not classic_busy
            and not self.consumer.is_consumer_group(req.group_id)
            and not self.config.consumer.upgrade_allowed
        ):
            classic_busy = True  # an empty classic group may not be taken over
        classic_busy |= self.streams.is_streams_group(req.group_id)
        if (
            classic_busy
            and classic is not None
            and req.member_epoch == 0
            and not self.streams.is_streams_group(req.group_id)
            and not self.consumer.is_consumer_group(req.group_id)
        ):
            refusal = self._upgrade(classic)
            if refusal is not None:
                return HeartbeatResult.failed(ErrorCode.GROUP_ID_NOT_FOUND, refusal)
            classic_busy = False
        return self.consumer.heartbeat(req, classic_busy)

    def _downgrade_on_fence(self, group: ConsumerGroup, member_id: str) -> bool:
        """A member is about to be fenced (it left, or its session, rebalance, join or sync
        timeout ran out): when it is the last consumer-protocol member, the group becomes
        classic without it and rebalances (Kafka's consumerGroupFenceMember)."""
        if not migration.downgrade_allowed(
            group, self.config.consumer, self.config.group.max_size, leaving=member_id
        ):
            return False
        return self._downgrade(group, member_id, "a consumer-protocol member left")

    def _downgrade(self, group: ConsumerGroup, leaving: str | None, rebalance: str | None) -> bool:
        """The consumer group becomes a classic group of its classic members (all but
        `leaving`) at generation = group epoch, each with its target assignment (Kafka's
        convertToClassicGroup, policy downgrade or bidirectional); it rebalances when
        `rebalance` says why. False (nothing changed) when the records cannot be written."""
        group_id = group.group_id
        members = migration.classic_members(group, leaving, self.consumer.topics())
        common = set.intersection(*(set(m.protocol_names) for m in members))
        if not common:
            return False
        classic = self.machine.get_or_create(group_id)
        if not classic.is_(GroupState.EMPTY) or classic.members:
            return False  # not the offsets-only group a consumer group keeps
        classic.generation_id = group.group_epoch
        classic.protocol_name = members[0].vote(common)
        for member in members:
            classic.add(member, None)
        records = crec.group_tombstones(group)
        records.append(
            self.machine.group_record(classic, {m.member_id: m.assignment for m in members})
        )
        if self._append(group_id, records) != ErrorCode.NONE:
            for member in members:
                classic.remove(member.member_id)
            return False
        log.info(
            "[GroupId %s] converted consumer group with %d classic members to a classic group",
            group_id,
            len(members),
        )
        self.consumer.drop(group_id)
        for member in members:
            self.machine.schedule_heartbeat(classic, member)
        if rebalance is not None:
            self.machine.maybe_prepare_rebalance(classic, f"downgraded to classic: {rebalance}")
        else:
            self.machine.returned(classic)
        return True

    # -- the streams protocol (KIP-1071) ------------------------------------------------------

    def streams_heartbeat(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        """StreamsGroupHeartbeat (88); the id of a classic group with members or of a consumer
        group is not a streams group's."""
        error = self.status(req.group_id, "streams_heartbeat")
        if error is not None:
            return StreamsHeartbeatResult.failed(error)
        classic = self.machine.get(req.group_id)
        if self.consumer.is_consumer_group(req.group_id) or (
            classic is not None
            and not (classic.is_(GroupState.EMPTY) or classic.is_(GroupState.DEAD))
        ):
            return StreamsHeartbeatResult.failed(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group."
            )
        return self.streams.heartbeat(req)

    def streams_describe(self, group_id: str) -> tuple[ErrorCode, StreamsGroup | None]:
        """StreamsGroupDescribe (89): the group, or GROUP_ID_NOT_FOUND."""
        error = self.status(group_id, "describe")
        if error is not None:
            return error, None
        group = self.streams.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        return ErrorCode.NONE, group

    # -- offsets ------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        api_version: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit applied as soon as it is appended: only where nothing replicates it
        (tests, tools); the broker's handler uses `prepare_offset_commit`."""
        errors, pending = self.prepare_offset_commit(
            group_id, member_id, group_instance_id, generation_id, offsets, api_version
        )
        if pending is not None:
            self.complete_offset_commit(pending, ErrorCode.NONE)
        return errors

    def prepare_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        api_version: int,
    ) -> tuple[dict[tuple[str, int], ErrorCode], PendingCommit | None]:
        """OffsetCommit, Kafka's storeOffsets: validated and appended; what was appended is
        pending until `complete_offset_commit` with the ISR wait's outcome (NONE: visible to
        OffsetFetch; an error: dropped). Call that in every case, also when the wait is
        cancelled, or require_stable fetches answer UNSTABLE_OFFSET_COMMIT for good."""
        error = self.status(group_id, "offset_commit")
        if error is not None:
            return dict.fromkeys(offsets, error), None
        if self.consumer.is_consumer_group(group_id):
            error = self.consumer.validate_offset_commit(
                group_id, member_id, generation_id, api_version
            )
            if error is not None:
                return dict.fromkeys(offsets, error), None
            # validated against the member epoch: stored as a commit outside group management
            member_id, group_instance_id, generation_id = "", None, -1
        elif self.streams.is_streams_group(group_id):
            error = self.streams.validate_offset_commit(group_id, member_id, generation_id)
            if error is not None:
                return dict.fromkeys(offsets, error), None
            member_id, group_instance_id, generation_id = "", None, -1
        return self.offsets.prepare_commit(
            group_id, member_id, group_instance_id, generation_id, offsets, api_version
        )

    def complete_offset_commit(self, pending: PendingCommit, error: ErrorCode) -> None:
        self.offsets.complete_commit(pending, error)

    def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: offsets in a transactional batch, pending until the marker.

        For the transaction coordinator's handler; the marker is applied with `on_txn_marker`.
        """
        error = self.status(group_id, "offset_commit")
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.machine.get_or_create(group_id)
        if self.consumer.is_consumer_group(group_id):
            # a KIP-848 member's transactional commit carries its member epoch
            error = self.consumer.validate_offset_commit(
                group_id, member_id, generation_id, 0, transactional=True
            )
            if error is not None:
                return dict.fromkeys(offsets, error)
        elif self.streams.is_streams_group(group_id):
            error = self.streams.validate_offset_commit(
                group_id, member_id, generation_id, transactional=True
            )
            if error is not None:
                return dict.fromkeys(offsets, error)
        elif generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = self.machine.validate_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if error is not None:
                return dict.fromkeys(offsets, error)
        records = [self.offsets.offset_record(group_id, tp, om) for tp, om in offsets.items()]
        error = self._append(
            group_id,
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=True,
        )
        if error == ErrorCode.NONE:
            self.offsets.stage_txn_offsets(group_id, producer_id, dict(offsets))
        return dict.fromkeys(offsets, error)

    def on_txn_marker(self, partition_index: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker was written to an offsets partition: settle its offsets."""
        for group in list(self.machine.groups.values()):
            if (
                producer_id in group.pending_txn_offsets
                and self.partition_for(group.group_id) == partition_index
            ):
                self.offsets.complete_txn(group.group_id, producer_id, commit)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        error = self.status(group_id, "offset_fetch")
        if error is not None:
            return error, []
        return ErrorCode.NONE, self.offsets.fetch(group_id, partitions, require_stable)

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        error = self.status(group_id, "offset_delete")
        if error is not None:
            return error, {}
        subscribed = self.consumer.subscribed_topics(group_id)
        if subscribed:  # a consumer group's members still consume these topics
            refused = {tp for tp in partitions if tp[0] in subscribed}
            error, results = self.offsets.delete_offsets(
                group_id, [tp for tp in partitions if tp not in refused]
            )
            results.update(dict.fromkeys(refused, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
            return error, results
        return self.offsets.delete_offsets(group_id, partitions)

    async def _expire_loop(self) -> None:
        interval = max(self.config.retention_check_interval_ms, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    def expire_offsets(self) -> int:
        groups = [
            g
            for g in self.machine.groups.values()
            if self.partition_for(g.group_id) in self.loaded
            and not self._consumer_members(g.group_id)  # offsets of a live KIP-848 group stay
        ]
        return self.offsets.cleanup(groups, self.scheduler.now_ms())

    def _consumer_members(self, group_id: str) -> int:
        group = self.consumer.get(group_id)
        sgroup = self.streams.get(group_id)
        return (0 if group is None else len(group.members)) + (
            0 if sgroup is None else len(sgroup.members)
        )

    # -- admin --------------------------------------------------------------------------------

    def list_groups(
        self, states: list[str], types: list[str]
    ) -> tuple[ErrorCode, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]), Kafka's ListGroups."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        out = []
        if not wanted_types or GROUP_TYPE_CONSUMER in wanted_types:
            for cgroup in self.consumer.groups.values():
                if self.partition_for(cgroup.group_id) not in self.loaded:
                    continue
                state = cgroup.state.value
                if wanted_states and state.lower() not in wanted_states:
                    continue
                out.append((cgroup.group_id, "consumer", state, GROUP_TYPE_CONSUMER))
        if not wanted_types or GROUP_TYPE_STREAMS in wanted_types:
            for sgroup in self.streams.groups.values():
                if self.partition_for(sgroup.group_id) not in self.loaded:
                    continue
                state = sgroup.state.value
                if wanted_states and state.lower() not in wanted_states:
                    continue
                out.append((sgroup.group_id, "streams", state, GROUP_TYPE_STREAMS))
        if wanted_types and GROUP_TYPE_CLASSIC not in wanted_types:
            return error, sorted(out)
        for group in self.machine.groups.values():
            if group.is_(GroupState.DEAD) or self.partition_for(group.group_id) not in self.loaded:
                continue
            if self.consumer.is_consumer_group(group.group_id) or self.streams.is_streams_group(
                group.group_id
            ):
                continue  # the offsets of a consumer- or streams-protocol group
            if wanted_states and group.state.value.lower() not in wanted_states:
                continue
            out.append(
                (group.group_id, group.protocol_type or "", group.state.value, GROUP_TYPE_CLASSIC)
            )
        return error, sorted(out)

    def describe_group(self, group_id: str) -> GroupSummary:
        error = self.status(group_id, "describe")
        if error is not None:
            return GroupSummary(error, group_id)
        group = self.machine.get(group_id)
        if self.consumer.is_consumer_group(group_id) or self.streams.is_streams_group(group_id):
            # Kafka 4.x describes only classic groups here, a mixed one (classic members in a
            # consumer group) included: ConsumerGroupDescribe is for the others
            return GroupSummary(
                ErrorCode.GROUP_ID_NOT_FOUND,
                group_id,
                GroupState.DEAD.value,
                message=f"Group {group_id} is not a classic group.",
            )
        if group is None:
            return GroupSummary(ErrorCode.GROUP_ID_NOT_FOUND, group_id, GroupState.DEAD.value)
        stable = group.is_(GroupState.STABLE)
        members = [
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupSummary(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def consumer_describe(self, group_id: str) -> tuple[ErrorCode, ConsumerGroup | None]:
        """ConsumerGroupDescribe (69): the group, or GROUP_ID_NOT_FOUND."""
        error = self.status(group_id, "describe")
        if error is not None:
            return error, None
        group = self.consumer.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        return ErrorCode.NONE, group

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out = {}
        for group_id in group_ids:
            error = self.status(group_id, "delete")
            sgroup = self.streams.get(group_id) if error is None else None
            if sgroup is not None:
                if sgroup.members:
                    out[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.streams.delete(group_id)  # tombstones, then forgotten
                if self.machine.get(group_id) is None:
                    out[group_id] = ErrorCode.NONE
                    continue
            cgroup = self.consumer.get(group_id) if error is None else None
            if cgroup is not None:
                if cgroup.members:
                    out[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.consumer.take_over_from_classic(group_id)  # tombstones, then forgotten
                if self.machine.get(group_id) is None:
                    out[group_id] = ErrorCode.NONE
                    continue
            out[group_id] = error if error is not None else self.offsets.delete_group(group_id)
        return out


_T = TypeVar("_T")


def _resolver(fut: asyncio.Future[_T]) -> Callable[[_T], None]:
    """A callback that answers `fut` once (a later call, e.g. after a timeout, is dropped)."""

    def resolve(result: _T) -> None:
        if not fut.done():
            fut.set_result(result)

    return resolve


def _consumer_config(get: Callable[[str], Any]) -> ConsumerGroupConfig:
    raw = get("group.consumer.assignors")
    names = raw.split(",") if isinstance(raw, str) else list(raw or [])
    return ConsumerGroupConfig(
        heartbeat_interval_ms=int(get("group.consumer.heartbeat.interval.ms")),
        session_timeout_ms=int(get("group.consumer.session.timeout.ms")),
        assignors=tuple(assignor_name(n) for n in names if n.strip()) or ("uniform", "range"),
        max_size=int(get("group.consumer.max.size")),
        migration_policy=str(get("group.consumer.migration.policy")).lower(),
    )
