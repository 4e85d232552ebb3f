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
The primitives (`Reader` / `Writer`, the partition of an id) are `coordinator/codec.py`'s.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.coordinator.codec import Reader, RecordFormatError, Writer

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")

# a key or value that does not parse as the version it claims (the codec's error, by its old name)
TxnRecordError = RecordFormatError


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


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.i16(KEY_VERSION)
    w.string(transactional_id)
    return w.finish()


def encode_value(v: TxnLogValue) -> bytes:
    """Value version 0."""
    w = Writer()
    w.i16(VALUE_VERSION)
    w.i64(v.producer_id)
    w.i16(v.producer_epoch)
    w.i32(v.timeout_ms)
    w.i8(v.status)
    if v.partitions is None:
        w.array_len(None)
    else:
        w.array_len(len(v.partitions))
        for topic, ids in v.partitions.items():
            w.string(topic)
            w.array_len(len(ids))
            for i in ids:
                w.i32(i)
    w.i64(v.last_update_ms)
    w.i64(v.start_ms)
    return w.finish()


# -- reading -----------------------------------------------------------------------------------


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None for key versions this coordinator does not own."""
    r = Reader(data)
    if r.i16() != KEY_VERSION:
        return None
    return r.req_string()


def decode_value(data: bytes) -> TxnLogValue:
    r = Reader(data)
    version = r.i16()
    if version not in (0, 1):
        raise TxnRecordError(f"unknown transaction log value version {version}")
    r.flexible = version >= 1
    pid, epoch, timeout, status = r.i64(), r.i16(), r.i32(), r.i8()
    count = r.array_len(nullable=True)
    partitions: dict[str, list[int]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = r.req_string()
            n = r.array_len(nullable=True)
            partitions.setdefault(topic, []).extend(r.i32() for _ in range(max(n, 0)))
            r.tags()
    last_update, start = r.i64(), r.i64()
    value = TxnLogValue(pid, epoch, timeout, status, partitions, last_update, start)
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
