"""Keys and values of the `__transaction_state` topic, in Kafka's own formats.

Kafka's TransactionLog writes one record per transition of a transactional id; the compacted
topic keeps the latest. Every key and value starts with an int16 version. Non-flexible strings
are int16 length + UTF-8 and arrays int32 count (-1: null); the flexible value v1 uses compact
encodings (unsigned varint length + 1, 0: null) and ends each struct with tagged fields.

Key (TransactionLogKey, version 0):

    int16  version            0
    string transactional_id

Value (TransactionLogValue, version 0; odradek writes 0 as Kafka does without KIP-890 part 2,
and reads 1 too):

    int16  version
    int64  producer_id
    int16  producer_epoch
    int32  transaction_timeout_ms
    int8   transaction_status        TxnState id: 0 Empty ... 7 PrepareEpochFence
    array  transaction_partitions    null when Empty; per topic:
             string topic
             array  int32 partition_ids
    int64  transaction_last_update_timestamp_ms
    int64  transaction_start_timestamp_ms
    v1 top-level tagged fields: 0 previous_producer_id int64, 1 next_producer_id int64,
                                2 client_transaction_version int16, 3 next_producer_epoch int16

A null value is a tombstone: the transactional id expired (transactional.id.expiration.ms).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">qhib")  # producer_id, epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")  # last update, start


class TxnRecordError(ValueError):
    """A key or value that does not parse as the version it claims."""


@dataclass(slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]] | None  # None when Empty
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_txn_version: int = 0
    next_producer_epoch: int = -1
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


# -- writing -----------------------------------------------------------------------------------


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise TxnRecordError("string longer than 32767 bytes")
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(v: TxnLogValue) -> bytes:
    """Value version 0."""
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _VALUE_HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    if v.partitions is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(v.partitions))
        for topic, ids in v.partitions.items():
            out += _string(topic)
            out += _I32.pack(len(ids))
            for i in ids:
                out += _I32.pack(i)
    out += _VALUE_TAIL.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


# -- reading -----------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordError("truncated record")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise TxnRecordError("varint too long")

    def string(self, compact: bool) -> str:
        n = self.uvarint() - 1 if compact else self.unpack(_I16)[0]
        if n < 0:
            raise TxnRecordError("null string")
        return bytes(self.take(n)).decode("utf-8")

    def array_len(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.unpack(_I32)[0]

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self.take(self.uvarint()))
        return out


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None for key versions this coordinator does not own."""
    r = _Reader(data)
    (version,) = r.unpack(_I16)
    if version != KEY_VERSION:
        return None
    return r.string(False)


def decode_value(data: bytes) -> TxnLogValue:
    r = _Reader(data)
    (version,) = r.unpack(_I16)
    if version not in (0, 1):
        raise TxnRecordError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    pid, epoch, timeout, status = r.unpack(_VALUE_HEAD)
    count = r.array_len(flexible)
    partitions: dict[str, list[int]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = r.string(flexible)
            n = r.array_len(flexible)
            partitions.setdefault(topic, []).extend(r.unpack(_I32)[0] for _ in range(max(n, 0)))
            if flexible:
                r.tags()
    last_update, start = r.unpack(_VALUE_TAIL)
    value = TxnLogValue(pid, epoch, timeout, status, partitions, last_update, start)
    if flexible:
        for tag, raw in r.tags().items():
            if tag == 0 and len(raw) == 8:
                value.previous_producer_id = _I64.unpack(raw)[0]
            elif tag == 1 and len(raw) == 8:
                value.next_producer_id = _I64.unpack(raw)[0]
            elif tag == 2 and len(raw) == 2:
                value.client_txn_version = _I16.unpack(raw)[0]
            elif tag == 3 and len(raw) == 2:
                value.next_producer_epoch = _I16.unpack(raw)[0]
            else:
                value.unknown_tags[tag] = raw
    return value
