"""`__consumer_offsets` records of KIP-848 consumer groups, in Kafka's formats (group-coordinator's
`ConsumerGroup*Key.json` / `*Value.json`, as Kafka 3.9 writes them).

A key starts with its record type as the int16 key version; every value here is version 0 and
flexible (compact strings and arrays, tagged fields):

    3  ConsumerGroupMetadata           (GroupId)            -> Epoch
    4  ConsumerGroupPartitionMetadata  (GroupId)            -> Topics [TopicId, TopicName,
                                                               NumPartitions, PartitionMetadata]
    5  ConsumerGroupMemberMetadata     (GroupId, MemberId)  -> InstanceId, RackId, ClientId,
                                       ClientHost, SubscribedTopicNames, SubscribedTopicRegex,
                                       RebalanceTimeoutMs, ServerAssignor, and tagged field 0
                                       ClassicMemberMetadata (SessionTimeoutMs, SupportedProtocols
                                       [Name, Metadata]) for a classic member of the group
    6  ConsumerGroupTargetAssignmentMetadata (GroupId)      -> AssignmentEpoch
    7  ConsumerGroupTargetAssignmentMember (GroupId, MemberId) -> TopicPartitions [TopicId, []int32]
    8  ConsumerGroupCurrentMemberAssignment (GroupId, MemberId) -> MemberEpoch,
                                       PreviousMemberEpoch, State, AssignedPartitions,
                                       PartitionsPendingRevocation

A member leaving writes tombstones for its keys 5, 7 and 8 (Kafka's order: current assignment,
target assignment, member metadata); a deleted group also tombstones 6, 4 and 3.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.coordinator.codec import Reader, Writer

if TYPE_CHECKING:
    from odradek.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember

Record = tuple[bytes, bytes | None]
Assignment = dict[uuid.UUID, set[int]]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
CONSUMER_KEYS = frozenset(range(3, 9))


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    w = Writer()
    w.i16(kind)
    w.string(group_id)
    if member_id is not None:
        w.string(member_id)
    return w.finish()


def _value() -> Writer:
    w = Writer(flexible=True)
    w.i16(0)
    return w


def _partitions(w: Writer, a: Mapping[uuid.UUID, set[int]]) -> None:
    items = sorted(((t, p) for t, p in a.items() if p), key=lambda x: str(x[0]))
    w.array_len(len(items))
    for tid, parts in items:
        w.out += tid.bytes
        w.array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
        w.tags()


def group_metadata(group_id: str, epoch: int) -> Record:
    w = _value()
    w.i32(epoch)
    w.tags()
    return _key(GROUP_METADATA, group_id), w.finish()


def partition_metadata(group_id: str, topics: Mapping[str, tuple[uuid.UUID, int]]) -> Record:
    w = _value()
    w.array_len(len(topics))
    for name in sorted(topics):
        tid, count = topics[name]
        w.out += tid.bytes
        w.string(name)
        w.i32(count)
        w.array_len(0)  # PartitionMetadata (racks): odradek assigns without racks
        w.tags()
    w.tags()
    return _key(PARTITION_METADATA, group_id), w.finish()


def member_metadata(group_id: str, m: ConsumerMember) -> Record:
    w = _value()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.array_len(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        w.string(name)
    w.string(m.subscribed_topic_regex)
    w.i32(m.rebalance_timeout_ms)
    w.string(m.server_assignor)
    if m.classic is None:
        w.tags()
    else:
        tagged = _classic_metadata(m.classic)
        w.uvarint(1)  # one tagged field: tag 0, its size, then the struct
        w.uvarint(0)
        w.uvarint(len(tagged))
        w.out += tagged
    return _key(MEMBER_METADATA, group_id, m.member_id), w.finish()


def _classic_metadata(c: ClassicMemberMetadata) -> bytes:
    w = Writer(flexible=True)
    w.i32(c.session_timeout_ms)
    w.array_len(len(c.supported_protocols))
    for name, metadata in c.supported_protocols:
        w.string(name)
        w.bytes_(metadata)
        w.tags()
    w.tags()
    return w.finish()


def _read_classic_metadata(data: bytes) -> ClassicMemberMetadata:
    r = Reader(data, flexible=True)
    session_timeout_ms = r.i32()
    protocols: list[tuple[str, bytes]] = []
    for _ in range(r.array_len()):
        name = r.req_string()
        protocols.append((name, r.bytes_()))
        r.tags()
    r.tags()
    return ClassicMemberMetadata(session_timeout_ms, protocols)


def current_assignment(group_id: str, m: ConsumerMember) -> Record:
    w = _value()
    w.i32(m.member_epoch)
    w.i32(m.previous_member_epoch)
    w.i8(m.state.value)
    _partitions(w, m.assigned)
    _partitions(w, m.pending_revocation)
    w.tags()
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), w.finish()


def target_assignment(group_id: str, target: Mapping[str, Assignment], epoch: int) -> list[Record]:
    """The whole target (Kafka writes only the members whose target changed, then the epoch)."""
    out: list[Record] = []
    for member_id in sorted(target):
        w = _value()
        _partitions(w, target[member_id])
        w.tags()
        out.append((_key(TARGET_MEMBER, group_id, member_id), w.finish()))
    w = _value()
    w.i32(epoch)
    w.tags()
    out.append((_key(TARGET_METADATA, group_id), w.finish()))
    return out


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [
        (_key(CURRENT_ASSIGNMENT, group_id, member_id), None),
        (_key(TARGET_MEMBER, group_id, member_id), None),
        (_key(MEMBER_METADATA, group_id, member_id), None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    out: list[Record] = []
    for member_id in group.members:
        out.extend(member_tombstones(group.group_id, member_id))
    out += [
        (_key(TARGET_METADATA, group.group_id), None),
        (_key(PARTITION_METADATA, group.group_id), None),
        (_key(GROUP_METADATA, group.group_id), None),
    ]
    return out


# -- reading (replay) -----------------------------------------------------------------------------


@dataclass(slots=True)
class ConsumerKey:
    kind: int
    group_id: str
    member_id: str | None = None


def decode_key(data: bytes) -> ConsumerKey | None:
    r = Reader(data)
    kind = r.i16()
    if kind not in CONSUMER_KEYS:
        return None
    group_id = r.req_string()
    member_id = (
        r.req_string() if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT) else None
    )
    return ConsumerKey(kind, group_id, member_id)


def _read_partitions(r: Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array_len()):
        tid = uuid.UUID(bytes=bytes(r.take(16)))
        out[tid] = {r.i32() for _ in range(r.array_len())}
        r.tags()
    return out


@dataclass(slots=True)
class ClassicMemberMetadata:
    """What a member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup,
    KIP-848's online migration) joined with: its session timeout and its protocols with their
    subscription metadata; None for a member speaking ConsumerGroupHeartbeat."""

    session_timeout_ms: int
    supported_protocols: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def decode_value(kind: int, data: bytes) -> object:
    r = Reader(data, flexible=True)
    r.i16()  # value version 0
    if kind in (GROUP_METADATA, TARGET_METADATA):
        return r.i32()
    if kind == PARTITION_METADATA:
        topics: dict[str, tuple[uuid.UUID, int]] = {}
        for _ in range(r.array_len()):
            tid = uuid.UUID(bytes=bytes(r.take(16)))
            name = r.req_string()
            count = r.i32()
            for _ in range(r.array_len()):
                r.i32()
                for _ in range(r.array_len()):
                    r.string()
                r.tags()
            r.tags()
            topics[name] = (tid, count)
        return topics
    if kind == MEMBER_METADATA:
        instance_id = r.string(nullable=True)
        rack_id = r.string(nullable=True)
        client_id = r.req_string()
        client_host = r.req_string()
        names = [r.req_string() for _ in range(r.array_len())]
        regex = r.string(nullable=True)
        timeout = r.i32()
        assignor = r.string(nullable=True)
        tagged = r.tags()
        classic = _read_classic_metadata(tagged[0]) if 0 in tagged else None
        return MemberMetadataValue(
            instance_id, rack_id, client_id, client_host, names, regex, timeout, assignor, classic
        )
    if kind == TARGET_MEMBER:
        return _read_partitions(r)
    epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    assigned = _read_partitions(r)
    pending = _read_partitions(r)
    return CurrentAssignmentValue(epoch, previous, state, assigned, pending)
