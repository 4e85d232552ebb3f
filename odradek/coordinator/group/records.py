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
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not parse as the version it claims."""


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


class _Writer:
    def __init__(self, flexible: bool = False) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def i16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        while v > 0x7F:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        raw = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(raw) + 1)
        else:
            self.i16(len(raw))
        self.out += raw

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.out += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer()
    w.i16(OFFSET_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.out)


def group_key(group: str) -> bytes:
    w = _Writer()
    w.i16(GROUP_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def offset_value(v: OffsetValue, version: int | None = None) -> bytes:
    if version is None:
        version = (
            OFFSET_VALUE_VERSION_WITH_EXPIRY if v.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
        )
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    w = _Writer(flexible=version >= 4)
    w.i16(version)
    w.i64(v.offset)
    if version >= 3:
        w.i32(v.leader_epoch)
    w.string(v.metadata)
    w.i64(v.commit_timestamp)
    if version == 1:
        w.i64(v.expire_timestamp)
    w.tags()
    return bytes(w.out)


def group_value(v: GroupValue, version: int = GROUP_VALUE_VERSION) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = _Writer(flexible=version >= 4)
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
    return bytes(w.out)


# -- reading -----------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"need {n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise RecordFormatError("varint too long")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string")
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(str(exc)) from None

    def req_string(self) -> str:
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordFormatError("null array")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of an offsets-topic record; None for record types odradek does not use."""
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.req_string(), r.req_string(), r.i32())
    if version == 2:
        return GroupKey(r.req_string())
    return None


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.req_string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetValue(offset, metadata, commit_ts, epoch, expire_ts)


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
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
        r.skip_tags()
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
    r.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


# -- which partition ---------------------------------------------------------------------------


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    raw = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition of a group: Utils.abs(groupId.hashCode) % partitions."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
