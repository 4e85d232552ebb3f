"""Topics and their partitions on this broker: create, delete, add partitions, alter configs.

Metadata changes go to the metadata store first, then to the logs, as Kafka's controller makes
them durable before brokers act on them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from odradek.broker.cluster.metadata_store import (
    MetadataStore,
    PartitionState,
    TopicExistsError,
    TopicInfo,
)
from odradek.broker.partitions.partition import AppendVerifier, Partition
from odradek.log.config import ConfigError, message_format_warning, validate_topic_configs
from odradek.log.log import write_partition_metadata
from odradek.log.manager import LogManager
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.log.config import LogConfig

log = logging.getLogger(__name__)

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME = 249
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_topic_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_NAME or not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal: use up to {MAX_NAME} of "
            "[a-zA-Z0-9._-], not '.' or '..'",
        )


class PartitionListener(Protocol):
    """Told of each replica this broker opens; the optional `on_partition_removed(part)`,
    `on_become_leader(part)` and `on_become_follower(part)` are found with getattr."""

    def on_partition_added(self, part: Partition) -> None: ...


class TopicManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        logs: LogManager,
        node_id: int,
        live_brokers: Callable[[], list[int]],
    ) -> None:
        self.config = config
        self.store = store
        self.logs = logs
        self.node_id = node_id
        self.live_brokers = live_brokers
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.by_id: dict[uuid.UUID, str] = {}
        self.verifier: AppendVerifier | None = None  # set by the broker: transactions
        self.listeners: list[PartitionListener] = []
        # CreateTopics waiting for the next store save (commit_topics)
        self._pending_commits: list[
            tuple[list[tuple[TopicInfo, list[int]]], asyncio.Future[list[TopicInfo | TopicError]]]
        ] = []

    # -- loading --------------------------------------------------------------------------------

    def load(self) -> None:
        self.logs.load_all(lambda topic: self.log_config(topic))
        known = set()
        for info in self.store.topics.values():
            self.by_id[info.topic_id] = info.name
            _warn_message_format(info.name, info.configs)  # as Kafka's LogManager at start-up
            for idx in range(len(info.partitions)):
                known.add((info.name, idx))
                self._open_partition(info, idx)
        for key in [k for k in self.logs.logs if k not in known]:
            log.info("removing partition %s-%d of a deleted topic", *key)
            self.logs.delete(*key)

    def _open_partition(self, info: TopicInfo, idx: int) -> Partition | None:
        state = info.partitions[idx]
        if self.node_id not in state.replicas:
            return None
        # an existing log (every one at start-up) needs no LogConfig worked out again
        lg = self.logs.logs.get((info.name, idx)) or self.logs.get_or_create(
            info.name, idx, info.topic_id, self.log_config(info.name)
        )
        part = Partition(
            info.name,
            idx,
            info.topic_id,
            lg,
            self.node_id,
            state.replicas,
            state.leader,
            state.leader_epoch,
            state.isr or list(state.replicas),
            self.verifier,
        )
        hw = self.logs.high_watermarks.get((info.name, idx))
        if not part.is_leader and hw is not None:
            part.high_watermark = min(hw, lg.log_end_offset)
        self.partitions[(info.name, idx)] = part
        for listener in self.listeners:
            listener.on_partition_added(part)
        return part

    # -- replication: replicas changed by other brokers, leadership changes ---------------------

    def open_partition(self, info: TopicInfo, idx: int) -> Partition | None:
        """This broker's replica of a partition, opened if needed (e.g. created elsewhere)."""
        part = self.partitions.get((info.name, idx))
        if part is not None and part.topic_id == info.topic_id:
            return part
        self.by_id[info.topic_id] = info.name
        return self._open_partition(info, idx)

    def remove_local(self, topic: str, idx: int) -> None:
        """Drop this broker's replica and its log (its topic was deleted by another broker)."""
        part = self.partitions.pop((topic, idx), None)
        if part is not None:
            part.wake()
            for listener in self.listeners:
                removed = getattr(listener, "on_partition_removed", None)
                if removed is not None:
                    removed(part)
            current = self.store.topics.get(topic)
            if current is None or current.topic_id != part.topic_id:
                self.by_id.pop(part.topic_id, None)
        self.logs.delete(topic, idx)

    def notify_leadership(self, part: Partition, leader: bool) -> None:
        """Tell listeners this broker now leads or follows `part` (optional listener methods
        `on_become_leader(part)` / `on_become_follower(part)`), after its state changed."""
        name = "on_become_leader" if leader else "on_become_follower"
        for listener in self.listeners:
            fn = getattr(listener, name, None)
            if fn is not None:
                try:
                    fn(part)
                except Exception:
                    log.exception("%s failed for %s-%d", name, part.topic, part.index)

    # -- queries --------------------------------------------------------------------------------

    def get(self, topic: str, idx: int) -> Partition | None:
        return self.partitions.get((topic, idx))

    def info(self, topic: str) -> TopicInfo | None:
        return self.store.topics.get(topic)

    def name_for_id(self, topic_id: uuid.UUID) -> str | None:
        name = self.by_id.get(topic_id)
        if name is None:  # a topic with no replica here: the cluster metadata still knows it
            for info in self.store.topics.values():
                if info.topic_id == topic_id:
                    return info.name
        return name

    def log_config(self, topic: str) -> LogConfig:
        info = self.store.topics.get(topic)
        overrides = validate_topic_configs(info.configs) if info else {}
        return self.config.log_config(overrides)

    # -- changes --------------------------------------------------------------------------------

    def plan(
        self,
        num_partitions: int,
        rf: int,
        start: int = 0,
        assignment: list[list[int]] | None = None,
    ) -> list[PartitionState]:
        """Replica placement for new partitions `start..start+num_partitions-1`, or the
        manual `assignment` (checked by the caller), the first replica leading."""
        if assignment is not None:
            return [PartitionState(list(r), r[0], 0, list(r)) for r in assignment]
        brokers = sorted(self.live_brokers())
        if rf > len(brokers):
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target "
                f"replication factor of {rf} cannot be reached because only "
                f"{len(brokers)} broker(s) are registered.",
            )
        out = []
        for p in range(start, start + num_partitions):
            replicas = [brokers[(p + r) % len(brokers)] for r in range(rf)]
            out.append(PartitionState(replicas, replicas[0], 0, list(replicas)))
        return out

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        rf: int,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        internal: bool = False,
        assignment: list[list[int]] | None = None,
    ) -> TopicInfo:
        check_topic_name(name)
        if name in self.store.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions == -1:
            num_partitions = int(self.config.get("num.partitions"))
        if rf == -1:
            rf = int(self.config.get("default.replication.factor"))
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if rf <= 0:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        clean = {k: v for k, v in (configs or {}).items() if v is not None}
        try:
            validate_topic_configs(clean)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        placed = self.plan(num_partitions, rf, 0, assignment)
        info = TopicInfo(
            name, uuid.uuid4(), placed, {k: str(v) for k, v in clean.items()}, internal
        )
        if validate_only:
            return info
        return self._commit_topic(info)

    async def create_topic_async(
        self,
        name: str,
        num_partitions: int,
        rf: int,
        configs: dict[str, str] | None = None,
        *,
        internal: bool = False,
        assignment: list[list[int]] | None = None,
    ) -> TopicInfo:
        """`create_topic` without holding the event loop for the whole topic.

        Opening a partition's log creates a directory and three files (~4-8 ms each on a
        loaded disk), so the 50 partitions of an internal topic held every other client for
        300 ms or more. Here this broker's logs are opened first, one per loop iteration, before
        the topic is written to the metadata store; the partitions then open on existing logs.
        Kafka creates internal topics asynchronously too (AutoTopicCreationManager) and answers
        COORDINATOR_NOT_AVAILABLE until they are ready.

        If another broker creates the topic meanwhile, TOPIC_ALREADY_EXISTS is raised as by
        `create_topic`; the empty logs prepared here are kept for the replicas this broker
        holds in that topic (their partition.metadata rewritten with its id), else removed.
        """
        planned = self.create_topic(
            name,
            num_partitions,
            rf,
            configs,
            validate_only=True,
            internal=internal,
            assignment=assignment,
        )
        prepared = await self.prepare_topic(planned)
        try:
            if name in self.store.topics:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            return self._commit_topic(planned)
        except TopicError:
            self.release_prepared(name, prepared)
            raise

    async def prepare_topic(self, planned: TopicInfo) -> list[int]:
        """Open this broker's logs of a planned topic (`create_topic(validate_only=True)`),
        one per loop iteration; the indexes prepared, for `commit_topics`."""
        name = planned.name
        return await self._prepare_logs(
            planned, range(len(planned.partitions)), lambda: name in self.store.topics
        )

    async def commit_topics(
        self, planned: list[tuple[TopicInfo, list[int]]]
    ) -> list[TopicInfo | TopicError]:
        """Write prepared topics to the store together and open this broker's partitions:
        one save for a whole CreateTopics request, shared with the requests whose topics are
        ready in the same loop iteration (group commit). Each topic's outcome, in order: its
        info, or TOPIC_ALREADY_EXISTS when another request or broker created it meanwhile
        (its prepared logs released). A failing save raises in every waiting request; the
        topics it did not write have their logs released."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[TopicInfo | TopicError]] = loop.create_future()
        self._pending_commits.append((planned, done))
        if len(self._pending_commits) == 1:
            loop.call_soon(self._flush_commits)
        return await done

    def _flush_commits(self) -> None:
        batch, self._pending_commits = self._pending_commits, []
        infos = [info for planned, _ in batch for info, _ in planned]
        try:
            created = {id(i) for i in self.store.create_topics(infos)}
        except BaseException as exc:
            # the local store wrote none of them; a store of one write per topic (ZooKeeper)
            # may have written the first ones: those open, the others' logs go
            for planned, done in batch:
                for info, prepared in planned:
                    if self.store.topics.get(info.name) is info:
                        self._opened(info)
                    else:
                        self.release_prepared(info.name, prepared)
                if not done.done():
                    done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for planned, done in batch:
            outcomes: list[TopicInfo | TopicError] = []
            for info, prepared in planned:
                if id(info) in created:
                    outcomes.append(self._opened(info))
                else:
                    self.release_prepared(info.name, prepared)
                    outcomes.append(
                        TopicError(
                            ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{info.name}' already exists."
                        )
                    )
            if not done.done():  # the request's connection may be gone; the topics stay
                done.set_result(outcomes)

    async def _prepare_logs(
        self, info: TopicInfo, indexes: range, abandoned: Callable[[], bool]
    ) -> list[int]:
        """Open this broker's logs for `indexes` of a planned topic, one per loop iteration,
        so that creating many partitions never holds other clients; stops early once
        `abandoned()` (the topic changed meanwhile). Returns the indexes prepared."""
        cfg = self.config.log_config(validate_topic_configs(info.configs))
        prepared: list[int] = []
        for idx in indexes:
            if abandoned():
                break
            if self.node_id not in info.partitions[idx].replicas or (
                (info.name, idx) in self.logs.logs
            ):
                continue
            self.logs.get_or_create(info.name, idx, info.topic_id, cfg)
            prepared.append(idx)
            await asyncio.sleep(0)  # let other clients in between two partitions
        return prepared

    def release_prepared(self, name: str, prepared: list[int]) -> None:
        """Logs prepared for a topic that another broker created first (or not at all)."""
        info = self.store.topics.get(name)
        for idx in prepared:
            part = self.partitions.get((name, idx))
            if part is None:
                self.logs.delete(name, idx)
            elif info is not None:  # the real topic's replica opened on it: still empty
                write_partition_metadata(part.log.dir, info.topic_id)

    def _commit_topic(self, info: TopicInfo) -> TopicInfo:
        """Write a planned topic to the store and open this broker's partitions."""
        try:
            self.store.create_topic(info)
        except TopicExistsError:  # another broker created it meanwhile
            raise TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{info.name}' already exists."
            ) from None
        return self._opened(info)

    def _opened(self, info: TopicInfo) -> TopicInfo:
        """Open this broker's partitions of a topic just written to the store."""
        self.by_id[info.topic_id] = info.name
        for idx in range(len(info.partitions)):
            self._open_partition(info, idx)
        _warn_message_format(info.name, info.configs)
        log.info(
            "created topic %s with %d partitions, replication factor %d",
            info.name,
            len(info.partitions),
            len(info.partitions[0].replicas),
        )
        return info

    def delete_topic(self, name: str) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        self.store.delete_topic(name)
        self.by_id.pop(info.topic_id, None)
        for idx in range(len(info.partitions)):
            part = self.partitions.pop((name, idx), None)
            if part is not None:
                part.wake()
                for listener in self.listeners:
                    removed = getattr(listener, "on_partition_removed", None)
                    if removed is not None:
                        removed(part)
            self.logs.delete(name, idx)
        log.info("deleted topic %s", name)

    def create_partitions(
        self,
        name: str,
        count: int,
        validate_only: bool = False,
        assignment: list[list[int]] | None = None,
    ) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        current = len(info.partitions)
        if count <= current:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than "
                f"or equal to the requested {count}.",
            )
        added = self.plan(count - current, len(info.partitions[0].replicas), current, assignment)
        if validate_only:
            return
        self._commit_partitions(info, added)

    async def create_partitions_async(
        self, name: str, count: int, assignment: list[list[int]] | None = None
    ) -> None:
        """`create_partitions` without holding the event loop: the new partitions' logs are
        opened one per loop iteration first (as `create_topic_async`), then the store is
        updated. If the topic changes meanwhile, the prepared logs go and INVALID_PARTITIONS
        (or UNKNOWN_TOPIC_OR_PARTITION) is raised as a fresh `create_partitions` would."""
        self.create_partitions(name, count, validate_only=True, assignment=assignment)
        info = self.store.topics[name]
        current = len(info.partitions)
        planned = TopicInfo(
            info.name,
            info.topic_id,
            info.partitions
            + self.plan(count - current, len(info.partitions[0].replicas), current, assignment),
            info.configs,
            info.internal,
        )

        def changed() -> bool:
            now = self.store.topics.get(name)
            return now is None or now.topic_id != info.topic_id or len(now.partitions) != current

        prepared = await self._prepare_logs(planned, range(current, count), changed)
        if changed():
            for idx in prepared:
                if (name, idx) not in self.partitions:
                    self.logs.delete(name, idx)
            # raises the current error
            self.create_partitions(name, count, validate_only=True, assignment=assignment)
            return await self.create_partitions_async(name, count, assignment)
        self._commit_partitions(info, planned.partitions[current:])

    def _commit_partitions(self, info: TopicInfo, added: list[PartitionState]) -> None:
        name, current = info.name, len(info.partitions)
        count = current + len(added)
        info.partitions.extend(added)
        self.store.update_topic(info)
        for idx in range(current, count):
            self._open_partition(info, idx)
        log.info("topic %s now has %d partitions", name, count)

    def set_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return
        info.configs = dict(configs)
        self.store.update_topic(info)
        _warn_message_format(name, info.configs)
        cfg = self.log_config(name)
        for idx in range(len(info.partitions)):
            part = self.partitions.get((name, idx))
            if part is not None:
                part.log.config = cfg
        log.info("topic %s configs set to %s", name, configs)


def _warn_message_format(topic: str, configs: dict[str, str]) -> None:
    """A message.format.version below v2 is stored and described but not used (Kafka 3.x)."""
    value = configs.get("message.format.version")
    warning = message_format_warning(value, topic) if value else None
    if warning:
        log.warning("%s", warning)
