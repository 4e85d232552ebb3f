"""The record codec shared by the internal topics (`__consumer_offsets`, `__transaction_state`).

Kafka generates the keys and values of its internal topics from JSON message definitions
(GroupMetadataManager / TransactionLog, the `*Key.json` / `*Value.json` files), so every
coordinator writes the same primitives: an int16 schema version first, then big-endian integers,
strings and arrays. The non-flexible versions use int16 length + UTF-8 strings (-1: null),
int32 length bytes and int32 array counts (-1: null); the flexible versions use compact
encodings (unsigned varint length + 1, 0: null) and end each struct with tagged fields:

    tagged fields   uvarint count, then per field: uvarint tag, uvarint size, size bytes

A coordinator's key/value layouts live in its own `records.py`; this module holds the parts they
share: `Writer` / `Reader`, Java's `String.hashCode`, the partition of a key
(`Utils.abs(key.hashCode) % partitions`) and the mapping of an internal-topic append error to
the error a client should see.
"""

from __future__ import annotations

import struct

from odradek.wire.errors import ErrorCode

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_UVARINT_BYTES = 5  # an unsigned varint of 32 bits


class RecordFormatError(ValueError):
    """A key or value that does not parse as the version it claims."""


# -- writing -----------------------------------------------------------------------------------


class Writer:
    """Builds one key or value; `flexible` selects the compact encodings and tagged fields."""

    __slots__ = ("flexible", "out")

    def __init__(self, flexible: bool = False) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def i8(self, v: int) -> None:
        self.out += _I8.pack(v)

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
            if len(raw) > 0x7FFF:
                raise RecordFormatError("string longer than 32767 bytes")
            self.i16(len(raw))
        self.out += raw

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.out += b

    def array_len(self, n: int | None) -> None:
        """An array's count; None writes a null array."""
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.i32(-1 if n is None else n)

    def tags(self) -> None:
        """An empty tagged-field section (flexible versions only)."""
        if self.flexible:
            self.uvarint(0)

    def finish(self) -> bytes:
        return bytes(self.out)


# -- reading -----------------------------------------------------------------------------------


class Reader:
    """Reads one key or value; every shortfall or malformed field is a `RecordFormatError`."""

    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes | memoryview, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.flexible = flexible

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"need {n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        value: int = _I8.unpack(self.take(1))[0]
        return value

    def i16(self) -> int:
        value: int = _I16.unpack(self.take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self.take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self.take(8))[0]
        return value

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(_MAX_UVARINT_BYTES):
            b = self.take(1)[0]
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
            return bytes(self.take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(str(exc)) from None

    def req_string(self) -> str:
        """A non-nullable string."""
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        return bytes(self.take(n))

    def array_len(self, nullable: bool = False) -> int:
        """An array's count; -1 for a null array when `nullable`, else null is an error."""
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            if not nullable:
                raise RecordFormatError("null array")
            return -1
        return n

    def tags(self) -> dict[int, bytes]:
        """A tagged-field section as {tag: raw value}; empty when not flexible."""
        out: dict[int, bytes] = {}
        if not self.flexible:
            return out
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self.take(self.uvarint()))
        return out


# -- which partition ---------------------------------------------------------------------------


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    raw = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """The internal-topic partition of a group or transactional id:
    `Utils.abs(key.hashCode) % partitions` (Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hashcode(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# -- append errors -----------------------------------------------------------------------------

# How a failed append to an internal topic reaches the client; Kafka's GroupMetadataManager
# (storeGroup / storeOffsets) and TransactionStateManager.appendTransactionToLog map alike, and
# differ only in what a record too large becomes.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
_TOO_LARGE = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE}
)


def append_error(
    error: ErrorCode, too_large: ErrorCode = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
) -> ErrorCode:
    """An internal-topic append (or its replication) error as the client should see it. A record
    too large becomes `too_large` (the group coordinator's INVALID_COMMIT_OFFSET_SIZE by
    default; the transaction coordinator passes UNKNOWN_SERVER_ERROR, as Kafka's does);
    anything unmapped is UNKNOWN_SERVER_ERROR."""
    if error in _TOO_LARGE:
        return too_large
    return _APPEND_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)
