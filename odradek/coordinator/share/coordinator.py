"""The share coordinator of one broker: share groups, share-partitions, share sessions and the
`__share_group_state` topic they persist to (KIP-932).

Kafka splits this between the group coordinator (share group membership), the partition leader's
SharePartitionManager (in-flight records, share sessions) and the share coordinator (state
persisted through Read/WriteShareGroupState). Here one object per broker holds all three: the
broker that leads a partition keeps its share-partitions and writes their state to the
`__share_group_state` partition of the key `group:topicId:partition`: directly when it leads
that partition too (always on a single broker), else with WriteShareGroupState to the broker
that does (ReadShareGroupState reads it back). Share group membership is held by the broker the
client's FindCoordinator names (the `__consumer_offsets` leader of the group id) and is not
persisted: after a restart members rejoin (UNKNOWN_MEMBER_ID), as the consumer does on its own.

Every change (acknowledgements, releases, lock expiries, acquisitions with their delivery
counts, the start offset of a new share-partition) is written as a ShareSnapshot record before
the request is answered, so a restart loses no acknowledgement: on first use after a restart a
share-partition is read back from its state partition (the last snapshot, then the updates after
it). Records that were acquired when the broker stopped come back available with the delivery
counts they had (written on acquisition too, so `group.share.delivery.count.limit` holds
across crashes).

Settings (Kafka's names, broker-wide): `group.share.record.lock.duration.ms` (30000),
`group.share.delivery.count.limit` (5), `group.share.session.timeout.ms` (45000),
`group.share.heartbeat.interval.ms` (5000), `group.share.max.size` (200),
`share.coordinator.state.topic.num.partitions` (50),
`share.coordinator.state.topic.replication.factor` (that of `__consumer_offsets` when unset).
A group's own configs (odradek/coordinator/group_configs.py) override the first four:
share.record.lock.duration.ms, share.session.timeout.ms, share.heartbeat.interval.ms; and
share.auto.offset.reset says where a new share-partition starts: at the log end (latest, Kafka's
default), the log start (earliest) or the first record at or after now less a duration
(by_duration:<ISO 8601>, the log end when there is none).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import now_ms as wall_ms
from odradek.coordinator import group_configs
from odradek.coordinator.codec import partition_for
from odradek.coordinator.share import records as rec
from odradek.coordinator.share.group import ShareGroup
from odradek.coordinator.share.host import ShareHost, StatePartition
from odradek.coordinator.share.state import SharePartition, StateBatch
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.records import build_batch

log = logging.getLogger(__name__)

STATE_TOPIC = "__share_group_state"
READ_STATE, WRITE_STATE = ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE  # v0
NOT_COORDINATOR = 16
FENCED_STATE_EPOCH = 124
PEER_TIMEOUT_S = 10.0

SpKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3


def state_key_error(topic_id: uuid.UUID | None, partition: int) -> int:
    """Kafka's ShareCoordinatorShard checks on the key of a Read/Write/DeleteShareGroupState
    partition: a negative partition is INVALID_REQUEST, and the zero id (None as decoded) is no
    topic (UNKNOWN_TOPIC_OR_PARTITION); 0 when the key may reach the state records."""
    if partition < 0:
        return INVALID_REQUEST
    return UNKNOWN_TOPIC_OR_PARTITION if topic_id is None else 0


def mono_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class StoredState:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[StateBatch]


def stored_from_wire(p: Any) -> StoredState | None:
    """The state in a ReadShareGroupState answer partition; None for an error or no state."""
    if p.error_code or p.start_offset < 0:
        return None
    return StoredState(p.state_epoch, 0, p.start_offset, batches_from_wire(p.state_batches))


def batches_from_wire(batches: Iterable[Any]) -> list[StateBatch]:
    """The StateBatch structs of a ReadShareGroupState answer or WriteShareGroupState request."""
    return [
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in batches
    ]


def batches_to_wire(cls: Any, batches: Iterable[StateBatch]) -> list[Any]:
    """`batches` as the messages' StateBatch structs (`cls`: the message's StateBatch class)."""
    return [
        cls(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in batches
    ]


def write_state_request(key: SpKey, state: StoredState) -> Any:
    """WriteShareGroupState (v0) of one share-partition's state, its batches included."""
    W: Any = protocol.request_class(WRITE_STATE)
    P = W.WriteStateData.PartitionData
    return W(
        group_id=key[0],
        topics=[
            W.WriteStateData(
                topic_id=key[1],
                partitions=[
                    P(
                        partition=key[2],
                        state_epoch=state.state_epoch,
                        leader_epoch=state.leader_epoch,
                        start_offset=state.start_offset,
                        state_batches=batches_to_wire(P.StateBatch, state.batches),
                    )
                ],
            )
        ],
    )


@dataclass(slots=True)
class ShareSession:
    """A member's share session on this broker (Kafka's ShareSession). `owner` is the client
    connection that opened it: when that connection closes the session goes and the member's
    records are released (Kafka's ShareSessionCache disconnect listener). Leaving the group does
    not end it, so the acknowledgements a closing consumer sends beside its leave still apply."""

    next_epoch: int = 1
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    owner: object | None = None


class ShareCoordinator:
    def __init__(self, host: ShareHost) -> None:
        self.host = host
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[SpKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._snapshot_epochs: dict[SpKey, int] = {}
        self._state_epochs: dict[SpKey, int] = {}  # of the state led here, as last written
        self._unpersisted: set[SpKey] = set()  # warned once each
        self._dirty: set[SpKey] = set()  # to send to the share coordinator
        self._writers: dict[SpKey, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        self._released = asyncio.Event()  # records went back to available
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    # -- settings -------------------------------------------------------------------------------

    def setting(self, key: str, default: int) -> int:
        raw = self.host.setting(key)
        return default if raw is None else int(str(raw))

    @property
    def lock_ms(self) -> int:
        return self.setting("group.share.record.lock.duration.ms", 30000)

    @property
    def delivery_limit(self) -> int:
        return self.setting("group.share.delivery.count.limit", 5)

    @property
    def session_ms(self) -> int:
        return self.setting("group.share.session.timeout.ms", 45000)

    @property
    def heartbeat_ms(self) -> int:
        return self.setting("group.share.heartbeat.interval.ms", 5000)

    def group_lock_ms(self, group_id: str) -> int:
        return int(self.host.group_config(group_id, "share.record.lock.duration.ms"))

    def group_session_ms(self, group_id: str) -> int:
        return int(self.host.group_config(group_id, "share.session.timeout.ms"))

    def group_heartbeat_ms(self, group_id: str) -> int:
        return int(self.host.group_config(group_id, "share.heartbeat.interval.ms"))

    def group_delivery_limit(self, group_id: str) -> int:
        return int(self.host.group_config(group_id, "share.delivery.count.limit"))

    def group_max_record_locks(self, group_id: str) -> int:
        return int(self.host.group_config(group_id, "share.partition.max.record.locks"))

    def group_read_committed(self, group_id: str) -> bool:
        """share.isolation.level (Kafka 4.2): deliver committed transactional records only."""
        return self.host.group_config(group_id, "share.isolation.level") == "read_committed"

    def group_renew_enabled(self, group_id: str) -> bool:
        """share.renew.acknowledge.enable (KIP-1222)."""
        return self.host.group_config(group_id, "share.renew.acknowledge.enable") == "true"

    def initial_offset(self, group_id: str, part: StatePartition) -> int:
        """Where a new share-partition of the group starts (share.auto.offset.reset)."""
        raw = str(self.host.group_config(group_id, "share.auto.offset.reset"))
        try:
            strategy, ms = group_configs.reset_strategy(raw)
        except ValueError:
            strategy, ms = "latest", 0
        if strategy == "earliest":
            return part.log.log_start_offset
        if strategy == "by_duration":
            found = part.log.offset_for_timestamp(wall_ms() - ms)
            if found is not None and found[0] < part.high_watermark:
                return found[0]
        return part.high_watermark

    @property
    def max_size(self) -> int:
        return self.setting("group.share.max.size", 200)

    @property
    def max_record_locks(self) -> int:
        return self.setting("group.share.partition.max.record.locks", 2000)

    def state_partitions(self) -> int:
        return self.setting("share.coordinator.state.topic.num.partitions", 50)

    # -- lifecycle ------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        if self._task is None and not self._stopped:
            self._task = asyncio.get_running_loop().create_task(
                self._expiry_loop(), name="share-coordinator"
            )

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._drop_writers_and_peers()

    def abandon(self) -> None:
        """An unclean stop (kill -9 of an in-process broker): drop the tasks, wait for none."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._drop_writers_and_peers()

    def _drop_writers_and_peers(self) -> None:
        for writer in self._writers.values():
            writer.cancel()
        self._writers.clear()
        self.host.close()

    def poke(self) -> None:
        self._changed.set()

    async def _expiry_loop(self) -> None:
        while True:
            now = mono_ms()
            deadlines = [
                d for sp in self.partitions.values() if (d := sp.next_deadline()) is not None
            ]
            deadlines += [m.deadline_ms for g in self.groups.values() for m in g.members.values()]
            timeout = max(0.0, (min(deadlines) - now) / 1000) if deadlines else None
            self._changed.clear()
            if timeout is None or timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)
            try:
                self.expire(mono_ms())
            except Exception:
                log.exception("share coordinator: expiring locks and members failed")

    def expire(self, now: int) -> None:
        released = False
        for key, sp in self.partitions.items():
            if sp.expire(now):
                released = True
                self.persist(key)
        for group in self.groups.values():
            for member_id in group.expired(now):
                log.info(
                    "share group %s: member %s removed after its session timed out",
                    group.group_id,
                    member_id,
                )
                group.leave(member_id)
                released |= self.release_member(group.group_id, member_id)
        if released:
            self.wake()

    def wake(self) -> None:
        self._released.set()
        self._released = asyncio.Event()

    @property
    def released(self) -> asyncio.Event:
        return self._released

    def release_member(self, group_id: str, member_id: str) -> bool:
        """End the member's share session and release the records it holds here."""
        released = False
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                released = True
                self.persist(key)
        self.sessions.pop((group_id, member_id), None)
        return released

    def connection_closed(self, connection: object) -> None:
        """A client connection closed: the share sessions it opened end, and their members'
        records are released (a session opened again on another connection stays)."""
        owned = [key for key, s in self.sessions.items() if s.owner is connection]
        released = False
        for group_id, member_id in owned:
            released |= self.release_member(group_id, member_id)
        if released:
            self.wake()

    # -- groups ---------------------------------------------------------------------------------

    def group(self, group_id: str, create: bool = False) -> ShareGroup | None:
        g = self.groups.get(group_id)
        if g is None and create:
            g = self.groups[group_id] = ShareGroup(group_id)
        return g

    def topic_metadata(self) -> dict[str, tuple[uuid.UUID, int]]:
        return dict(self.host.topic_ids())

    # -- the state topic ------------------------------------------------------------------------

    def state_topic_ready(self) -> bool:
        """True when `__share_group_state` exists; else its creation starts."""
        host = self.host
        if host.partition_leaders(STATE_TOPIC) is not None:
            return True
        rf = self.setting(
            "share.coordinator.state.topic.replication.factor",
            host.offsets_replication_factor(),
        )
        configs = {
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "min.insync.replicas": str(min(2, rf)),
            "segment.bytes": "104857600",
        }
        return host.ensure_topic(STATE_TOPIC, self.state_partitions(), rf, configs)

    def _state_index(self, key: SpKey) -> int | None:
        leaders = self.host.partition_leaders(STATE_TOPIC)
        if not leaders:
            return None
        return partition_for(rec.coordinator_key(*key), len(leaders))

    def _state_leader(self, key: SpKey) -> int | None:
        """The broker that leads the key's `__share_group_state` partition (None: none)."""
        index = self._state_index(key)
        leaders = self.host.partition_leaders(STATE_TOPIC)
        if index is None or leaders is None:
            return None
        leader = leaders[index]
        return leader if leader >= 0 and self.host.is_live(leader) else None

    def _state_partition(self, key: SpKey) -> StatePartition | None:
        """The key's `__share_group_state` partition when this broker leads it."""
        index = self._state_index(key)
        if index is None:
            return None
        part = self.host.partition(STATE_TOPIC, index)
        if part is None or not part.is_leader:
            return None
        return part

    def leads_state_of(self, key: SpKey) -> bool:
        return self._state_partition(key) is not None

    # -- the share coordinator's side: reading and writing the records -------------------------

    def read_stored(self, key: SpKey) -> StoredState | None:
        """The key's state from the local `__share_group_state` partition: the last snapshot
        with the updates after it applied (None: never written, deleted, or not led here)."""
        part = self._state_partition(key)
        if part is None:
            return None
        found = self._scan(part, lambda k: k == key).get(key)
        self._state_epochs.setdefault(key, -1)  # read: a first write need not read again
        return found

    def stored_group_states(self, group_id: str, keys: Iterable[SpKey]) -> dict[SpKey, StoredState]:
        """The stored states of `group_id` in the local state partitions these keys map to,
        each partition read once (the admin APIs' view of a group)."""
        parts = {}
        for key in keys:
            part = self._state_partition(key)
            if part is not None:
                parts[id(part)] = part
        out: dict[SpKey, StoredState] = {}
        for part in parts.values():
            out.update(self._scan(part, lambda k: k[0] == group_id))
        return out

    def _scan(self, part: StatePartition, wanted: Any) -> dict[SpKey, StoredState]:
        """One pass over a state partition: the state of every key `wanted(key)` accepts. A
        tombstone (DeleteShareGroupState) forgets what came before it."""
        snapshots: dict[SpKey, rec.ShareValue] = {}
        updates: dict[SpKey, list[rec.ShareValue]] = {}
        for _header, records in part.log.records(None, part.high_watermark):
            for r in records:
                if r.key is None:
                    continue
                try:
                    k = rec.decode_key(bytes(r.key))
                    if k is None or not wanted((k.group_id, k.topic_id, k.partition)):
                        continue
                    key = (k.group_id, k.topic_id, k.partition)
                    if r.value is None:
                        snapshots.pop(key, None)
                        updates.pop(key, None)
                        self._state_epochs[key] = -1
                        continue
                    value = rec.decode_value(bytes(r.value), k.is_update)
                except ValueError as exc:
                    log.warning("%s: unreadable record at %d: %s", STATE_TOPIC, r.offset, exc)
                    continue
                if k.is_update:
                    updates.setdefault(key, []).append(value)
                else:
                    snapshots[key], updates[key] = value, []
        return {key: self._applied(key, s, updates.get(key, [])) for key, s in snapshots.items()}

    def _applied(
        self, key: SpKey, snapshot: rec.ShareValue, updates: list[rec.ShareValue]
    ) -> StoredState:
        self._snapshot_epochs[key] = snapshot.snapshot_epoch
        self._state_epochs[key] = snapshot.state_epoch
        start = snapshot.start_offset
        states: dict[int, StateBatch] = {}
        for b in snapshot.batches:
            for off in range(b.first_offset, b.last_offset + 1):
                states[off] = b
        for u in updates:
            if u.start_offset >= 0:
                start = u.start_offset
            for b in u.batches:
                for off in range(b.first_offset, b.last_offset + 1):
                    states[off] = b
        batches = [
            StateBatch(off, off, b.delivery_state, b.delivery_count)
            for off, b in sorted(states.items())
            if off >= start
        ]
        return StoredState(snapshot.state_epoch, snapshot.leader_epoch, start, batches)

    def write_stored(self, key: SpKey, state: StoredState) -> int:
        """Append the key's state as a ShareSnapshot record here; 0 or an error code
        (NOT_COORDINATOR when this broker does not lead the key's partition)."""
        part = self._state_partition(key)
        if part is None:
            return NOT_COORDINATOR
        if key not in self._state_epochs:
            self.read_stored(key)
        if state.state_epoch < self._state_epochs.get(key, -1):
            # a share-partition leader holding state from before AlterShareGroupOffsets
            return FENCED_STATE_EPOCH
        self._state_epochs[key] = state.state_epoch
        epoch = (self._snapshot_epochs.get(key, -1) + 1) & 0xFFFF
        self._snapshot_epochs[key] = epoch
        now = wall_ms()
        value = rec.ShareValue(
            epoch,
            state.state_epoch,
            state.leader_epoch,
            state.start_offset,
            tuple(state.batches),
            create_timestamp=now,
            write_timestamp=now,
        )
        k = rec.encode_key(rec.ShareKey(*key))
        result = part.append_internal(build_batch([(k, rec.encode_value(value), [], now)]))
        if result.error:
            log.warning("share state of %s not written: error %d", key, result.error)
        return int(result.error)

    def delete_stored(self, key: SpKey) -> int:
        """Forget the key's state (DeleteShareGroupState): a tombstone for its snapshot key."""
        part = self._state_partition(key)
        if part is None:
            return NOT_COORDINATOR
        k = rec.encode_key(rec.ShareKey(*key))
        result = part.append_internal(build_batch([(k, None, [], wall_ms())]))
        if result.error:
            log.warning("share state of %s not deleted: error %d", key, result.error)
            return int(result.error)
        self._state_epochs[key] = -1
        self._snapshot_epochs.pop(key, None)
        return 0

    # -- the share-partition leader's side (Kafka's persister) ---------------------------------

    def _stored(self, sp: SharePartition) -> StoredState:
        return StoredState(sp.state_epoch, sp.leader_epoch, sp.start_offset, sp.state_batches())

    def persist(self, key: SpKey) -> None:
        """Write the share-partition's state: here when this broker leads the key's
        `__share_group_state` partition, else to the broker that does (WriteShareGroupState,
        in the background: `flushed` waits for it)."""
        sp = self.partitions.get(key)
        if sp is None:
            return
        if self._state_partition(key) is not None:
            if self.write_stored(key, self._stored(sp)) == FENCED_STATE_EPOCH:
                self.fenced(key)
            return
        if self._state_leader(key) is None:
            if key not in self._unpersisted:
                self._unpersisted.add(key)
                log.warning(
                    "share group %s: the state of %s-%d is not written: no broker leads its %s "
                    "partition",
                    key[0],
                    self.host.topic_name(key[1]),
                    key[2],
                    STATE_TOPIC,
                )
            return
        self._dirty.add(key)
        writer = self._writers.get(key)
        if writer is None or writer.done():
            self._writers[key] = asyncio.get_running_loop().create_task(
                self._write_remote(key), name=f"share-state-{key[0]}"
            )

    async def flushed(self, keys: Iterable[SpKey]) -> None:
        """Wait until the state of these share-partitions written so far has been sent."""
        for key in set(keys):
            writer = self._writers.get(key)
            if writer is not None and not writer.done():
                with contextlib.suppress(Exception):
                    await asyncio.shield(writer)

    async def _write_remote(self, key: SpKey) -> None:
        while key in self._dirty:
            self._dirty.discard(key)
            sp = self.partitions.get(key)
            node = self._state_leader(key)
            if sp is None or node is None:
                return
            req = write_state_request(key, self._stored(sp))
            resp = await self._peer_request(node, WRITE_STATE, req)
            errors = [p.error_code for r in (resp.results if resp else []) for p in r.partitions]
            if FENCED_STATE_EPOCH in errors:
                self.fenced(key)
            elif resp is None or any(errors):
                log.warning("share state of %s not written to broker %d: %s", key, node, errors)

    def fenced(self, key: SpKey) -> None:
        """The stored state is newer than this share-partition (its offsets were altered or
        deleted meanwhile): drop it, the next use reads the stored state back."""
        if self.partitions.pop(key, None) is not None:
            log.info(
                "share group %s: the state of %s-%d was changed by an admin request; reloading",
                key[0],
                self.host.topic_name(key[1]),
                key[2],
            )

    async def _read_remote(self, key: SpKey) -> StoredState | None:
        node = self._state_leader(key)
        if node is None:
            return None
        R: Any = protocol.request_class(READ_STATE)
        req = R(
            group_id=key[0],
            topics=[
                R.ReadStateData(
                    topic_id=key[1],
                    partitions=[R.ReadStateData.PartitionData(partition=key[2], leader_epoch=0)],
                )
            ],
        )
        resp = await self._peer_request(node, READ_STATE, req)
        for result in resp.results if resp is not None else []:
            for p in result.partitions:
                return stored_from_wire(p)
        return None

    async def _peer_request(
        self, node: int, api_key: int, req: Any, version: int = 0
    ) -> Any | None:
        return await self.host.peer_request(node, api_key, version, req, PEER_TIMEOUT_S)

    async def load(self, key: SpKey) -> SharePartition | None:
        """The stored state of a share-partition, read here or from the share coordinator."""
        if self._state_partition(key) is not None:
            state = self.read_stored(key)
        else:
            state = await self._read_remote(key)
        if state is None:
            return None
        sp = SharePartition.restore(
            state.start_offset, state.batches, self.lock_ms, self.delivery_limit
        )
        sp.state_epoch = state.state_epoch
        return sp

    # -- leadership (a TopicManager listener) ----------------------------------------------------

    def on_partition_added(self, part: StatePartition) -> None:
        pass

    def on_become_leader(self, part: StatePartition) -> None:
        self._forget(part)  # read back from __share_group_state on first use

    def on_become_follower(self, part: StatePartition) -> None:
        self._forget(part)

    def on_partition_removed(self, part: StatePartition) -> None:
        self._forget(part)

    def _forget(self, part: StatePartition) -> None:
        for key in [k for k in self.partitions if k[1] == part.topic_id and k[2] == part.index]:
            del self.partitions[key]

    # -- share-partitions -----------------------------------------------------------------------

    async def share_partition(self, key: SpKey, part: StatePartition) -> SharePartition:
        sp = self.partitions.get(key)
        if sp is None:
            loaded = await self.load(key)
            sp = self.partitions.get(key)  # another request may have loaded it meanwhile
            if sp is None:
                if loaded is None:
                    start = self.initial_offset(key[0], part)
                    sp = SharePartition(start, self.group_lock_ms(key[0]), self.delivery_limit)
                    sp.leader_epoch = part.leader_epoch
                    self.partitions[key] = sp
                    self.persist(key)
                else:
                    sp = self.partitions[key] = loaded
        sp.lock_ms = self.group_lock_ms(key[0])
        sp.delivery_limit = self.group_delivery_limit(key[0])
        sp.max_in_flight = self.group_max_record_locks(key[0])
        sp.skip_below(part.log.log_start_offset)
        return sp

    async def known_partition(self, key: SpKey) -> SharePartition | None:
        sp = self.partitions.get(key)
        if sp is None:
            loaded = await self.load(key)
            sp = self.partitions.get(key)
            if sp is None and loaded is not None:
                sp = self.partitions[key] = loaded
        return sp
