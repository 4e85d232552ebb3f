"""Keys and values of the `__consumer_offsets` topic, in Kafka's own formats.

Kafka's GroupMetadataManager (and the group coordinator of Kafka 3.x/4.x) stores two kinds of
records in the compacted offsets topic; tools such as Burrow read them. Every key and value starts
with an int16 schema version. Strings are int16 length + UTF-8 (-1 for null), bytes are int32
length + data; the flexible versions (value v4) use compact encodings (unsigned varint length + 1)
and end every struct with tagged fields.

Offset commit (key version 0 or 1; odradek writes 1, as Kafka does):

    key    int16 version   string group   string topic   int32 partition
    value  int16 version, then
           v0  int64 offset  string metadata  int64 commit_timestamp
           v1  int64 offset  string metadata  int64 commit_timestamp  int64 expire_timestamp
           v2  int64 offset  string metadata  int64 commit_timestamp
           v3  int64 offset  int32 leader_epoch  string metadata  int64 commit_timestamp
           v4  as v3, flexible
    odradek writes v1 when the commit carries a retention time (OffsetCommit v2-4), else v3.

Group metadata (key version 2):

    key    int16 version   string group
    value  int16 version   string protocol_type   int32 generation   string? protocol
           string? leader  [v2+ int64 current_state_timestamp]  members:
             int32 count, then per member:
               string member_id  [v3+ string? group_instance_id]  string client_id
               string client_host  [v1+ int32 rebalance_timeout]  int32 session_timeout
               bytes subscription  bytes assignment
           v4 flexible. odradek writes v3, as Kafka since 2.3.

A null value is a tombstone: the offset was deleted or expired, or the group was deleted.
Keys with other versions (KIP-848 consumer groups, share groups) are returned as `None`.
The primitives (`Reader` / `Writer`, the partition of a group) are `coordinator/codec.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.coordinator.codec import Reader, Writer

# re-exported: callers name the offsets topic's error and partitioning through this module
from odradek.coordinator.codec import RecordFormatError as RecordFormatError
from odradek.coordinator.codec import java_string_hashcode as java_string_hashcode
from odradek.coordinator.codec import partition_for as partition_for

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


@dataclass(slots=True, frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(slots=True, frozen=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class OffsetValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only in value v1: OffsetCommit v2-4 retention time


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# -- writing -----------------------------------------------------------------------------------


def offset_key(group: str, topic: str, partition: int) -> bytes:
    w = Writer()
    w.i16(OFFSET_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return w.finish()


def group_key(group: str) -> bytes:
    w = Writer()
    w.i16(GROUP_KEY_VERSION)
    w.string(group)
    return w.finish()


def offset_value(v: OffsetValue, version: int | None = None) -> bytes:
    if version is None:
        version = (
            OFFSET_VALUE_VERSION_WITH_EXPIRY if v.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
        )
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    w = Writer(flexible=version >= 4)
    w.i16(version)
    w.i64(v.offset)
    if version >= 3:
        w.i32(v.leader_epoch)
    w.string(v.metadata)
    w.i64(v.commit_timestamp)
    if version == 1:
        w.i64(v.expire_timestamp)
    w.tags()
    return w.finish()


def group_value(v: GroupValue, version: int = GROUP_VALUE_VERSION) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = Writer(flexible=version >= 4)
    w.i16(version)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.i64(v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return w.finish()


# -- reading -----------------------------------------------------------------------------------


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of an offsets-topic record; None for record types odradek does not use."""
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.req_string(), r.req_string(), r.i32())
    if version == 2:
        return GroupKey(r.req_string())
    return None


def decode_offset_value(data: bytes) -> OffsetValue:
    r = Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.req_string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.tags()
    return OffsetValue(offset, metadata, commit_ts, epoch, expire_ts)


def decode_group_value(data: bytes) -> GroupValue:
    r = Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.req_string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.req_string()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.req_string()
        client_host = r.req_string()
        session = rebalance = 0
        if version >= 1:
            rebalance = r.i32()
        session = r.i32()
        if version == 0:
            rebalance = session
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tags()
        members.append(
            MemberValue(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance,
                session,
                subscription,
                assignment,
            )
        )
    r.tags()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)
