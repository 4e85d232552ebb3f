"""Records inside a RecordBatch v2, as Kafka's DefaultRecord, plus control records (KIP-98).

Off the hot path only: tests, internal topics, compaction and recompression. The broker itself
stores and serves batches without looking at individual records.

A record, after the batch header (the whole sequence is compressed when the batch is):

    field              type                   notes
    length             varint                 bytes of the record after this field
    attributes         int8                   unused, 0
    timestamp_delta    varlong                timestamp - batch base_timestamp
    offset_delta       varint                 offset - batch base_offset
    key_length         varint                 -1 for a null key
    key                bytes[key_length]
    value_length       varint                 -1 for a null value
    value              bytes[value_length]
    header_count       varint
    headers            repeated header_count times:
      key_length       varint                 >= 0
      key              utf-8[key_length]
      value_length     varint                 -1 for a null value
      value            bytes[value_length]

varint / varlong are zigzag-encoded base-128 varints (protobuf's sint32 / sint64), at most
5 / 10 bytes. In a LogAppendTime batch every record's timestamp is the batch's max_timestamp.

Control records (transaction markers, KIP-98) sit alone in a control batch:

    key    offset 0  int16  version           0
           offset 2  int16  type              0 abort, 1 commit
    value  offset 0  int16  version           0
           offset 2  int32  coordinator_epoch
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from odradek.wire.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    parse_header,
    write_crc,
)
from odradek.wire.compression import DEFAULT_MAX_DECOMPRESSED, compress, decompress
from odradek.wire.varint import read_uvarint

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_TWO63 = 2**63
_TWO64 = 2**64

RecordInput = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]


@dataclass(slots=True)
class Record:
    """One record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


# -- varints -----------------------------------------------------------------------------------


def _wrap64(value: int) -> int:
    """Two's-complement int64 wrap-around, as Java's long arithmetic."""
    return ((value + _TWO63) % _TWO64) - _TWO63


def read_varint(data: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zigzag int32 at `pos`, not reading at or past `end`: (value, next position)."""
    raw, pos = read_uvarint(data, pos, end, 5, CorruptRecordError)
    raw &= _MASK32  # Java drops what overflows an int
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(data: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zigzag int64 at `pos`, not reading at or past `end`: (value, next position)."""
    raw, pos = read_uvarint(data, pos, end, 10, CorruptRecordError)
    raw &= _MASK64
    return (raw >> 1) ^ -(raw & 1), pos


def _write_unsigned(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append `value` (an int32) as a zigzag varint."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    _write_unsigned(out, ((value << 1) ^ (value >> 31)) & _MASK32)


def write_varlong(out: bytearray, value: int) -> None:
    """Append `value` (an int64) as a zigzag varlong."""
    if not -_TWO63 <= value < _TWO63:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    _write_unsigned(out, ((value << 1) ^ (value >> 63)) & _MASK64)


# -- decoding ----------------------------------------------------------------------------------


def _read_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos, end)
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise CorruptRecordError(f"invalid {what} length {length}")
    return data[pos : pos + length], pos + length


def _read_record(
    data: bytes, pos: int, header: BatchHeader, log_append: bool
) -> tuple[Record, int]:
    length, pos = read_varint(data, pos)
    if length < 1 or length > len(data) - pos:
        raise CorruptRecordError(f"invalid record length {length}")
    end = pos + length  # a record may not read past its declared length
    pos += 1  # attributes: unused
    timestamp_delta, pos = read_varlong(data, pos, end)
    offset_delta, pos = read_varint(data, pos, end)
    key, pos = _read_bytes(data, pos, end, "key")
    value, pos = _read_bytes(data, pos, end, "value")
    count, pos = read_varint(data, pos, end)
    if count < 0 or count > end - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name, pos = _read_bytes(data, pos, end, "header key")
        if name is None:
            raise CorruptRecordError("null header key")
        header_value, pos = _read_bytes(data, pos, end, "header value")
        headers.append((name.decode("utf-8", "surrogateescape"), header_value))
    if pos != end:
        raise CorruptRecordError(f"record declared {length} bytes but used {length - (end - pos)}")
    if log_append:
        timestamp = header.max_timestamp
    else:
        timestamp = _wrap64(header.base_timestamp + timestamp_delta)
    record = Record(header.base_offset + offset_delta, timestamp, key, value, headers)
    return record, end


def decode_records(
    buf: Buffer, pos: int = 0, *, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at `pos` and every record in it, decompressing as needed.

    Does not check the CRC (see batch.crc_ok). Raises CorruptRecordError for a truncated batch,
    bad varints, lengths that overrun, a record count that does not match the data, or a
    compressed records section that would inflate past `max_size` bytes.
    """
    header = parse_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptRecordError(f"truncated batch at {pos}: {len(buf) - pos} of {header.size}")
    section = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    data = decompress(header.compression, section, max_size)
    count = header.records_count
    # every record takes at least 7 bytes; rejecting early avoids a long loop on garbage
    if count < 0 or count * 7 > len(data):
        raise CorruptRecordError(f"record count {count} does not fit {len(data)} bytes")
    log_append = header.timestamp_type == LOG_APPEND_TIME
    records: list[Record] = []
    offset = 0
    for _ in range(count):
        record, offset = _read_record(data, offset, header, log_append)
        records.append(record)
    if offset != len(data):
        raise CorruptRecordError(
            f"{len(data) - offset} bytes left after the {count} records the batch declares"
        )
    return header, records


# -- framing check (produce hot path) ---------------------------------------------------------

# The smallest record: length, attributes, timestamp delta, offset delta, key length, value
# length and header count, one byte each (the length byte counts the other six).
_MIN_RECORD_BODY = 6


def check_framing_py(data: Buffer, pos: int, end: int, count: int, first: int = 0) -> None:
    """Walk `count` records in data[pos:end] as Kafka's DefaultRecord.readFrom, building nothing.

    Every record's length must cover exactly its fields; offset deltas must be 0, 1, 2, ...;
    key, value and header lengths must fit; nothing may follow the last record. Raises
    InvalidRecordError (Kafka's InvalidRecordException, INVALID_RECORD). `data` is bytes or a
    bytearray (indexing a memoryview is slower); nothing is copied.

    The pure-Python fallback of the C walk (odradek/wire/_framing.c, `check_framing` when built):
    both accept exactly the same sections and give the same messages for the usual faults
    (tests/wire/test_framing_impls.py). Varints of one or two bytes (|value| < 8192: nearly every
    length and delta) are decoded inline; longer ones go through read_varint. Where an inline
    read runs past the record it lands in the next one or past the buffer (IndexError): both
    still end in an InvalidRecordError, because a record must end exactly at its declared length,
    though the message may then name a later symptom than the C walk's.
    """
    if count < 0 or count * (_MIN_RECORD_BODY + 1) > end - pos:
        raise InvalidRecordError(f"record count {count} does not fit {end - pos} bytes")
    index = 0
    try:
        for index in range(first, first + count):
            # length (pos stays at the record's start)
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p = pos + 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                p = pos + 2
            else:
                length, p = read_varint(data, pos, end)
            rec_end = p + length
            if length < _MIN_RECORD_BODY or rec_end > end:
                _bad_length(pos, p, end, index, length)
            # attributes, then the timestamp delta: any varlong, skipped
            if data[p + 1] < 0x80:
                p += 2
            elif data[p + 2] < 0x80:
                p += 3
            else:
                _ts, p = read_varlong(data, p + 1, rec_end)
            # offset delta, which must be the record's index
            b = data[p]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:  # records 64 to 8191 of a batch
                u = (b & 0x7F) | (data[p + 1] << 7)
                delta = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                delta, p = read_varint(data, p, rec_end)
            if delta != index:
                raise InvalidRecordError(f"record {index} has offset delta {delta}")
            # key length and key
            b = data[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                n = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                n, p = read_varint(data, p, rec_end)
            if n > 0:
                p += n
                if p >= rec_end:  # the value length must follow
                    raise InvalidRecordError(f"record {index}: key or value overruns the record")
            elif n < -1:
                raise InvalidRecordError(f"record {index}: invalid key length {n}")
            # value length and value
            b = data[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                n = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                n, p = read_varint(data, p, rec_end)
            if n > 0:
                p += n
            elif n < -1:
                raise InvalidRecordError(f"record {index}: invalid value length {n}")
            if p >= rec_end:
                raise InvalidRecordError(f"record {index}: key or value overruns the record")
            # header count, then headers (rare: out of line)
            if data[p]:
                p = _check_headers(data, p, rec_end, index)
            else:
                p += 1
            if p != rec_end:
                raise InvalidRecordError(
                    f"record {index} declares {length} bytes but holds {length + p - rec_end}"
                )
            pos = rec_end
    except IndexError:
        raise InvalidRecordError("record data ends before the declared records") from None
    except InvalidRecordError:
        raise
    except CorruptRecordError as exc:  # a varint running past its record, or too long
        raise InvalidRecordError(f"record {index}: {exc}") from None
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes left after the {count} declared records")


def _bad_length(start: int, after: int, end: int, index: int, length: int) -> NoReturn:
    """The error for a record length below the minimum or past the batch (off the fast path)."""
    if start >= end:  # an inline read of the next batch's bytes: no record starts here
        raise InvalidRecordError("record data ends before the declared records")
    if after > end:  # a two-byte length whose second byte is past the batch
        raise InvalidRecordError(f"record {index}: truncated varint")
    raise InvalidRecordError(
        f"record {index} declares {length} bytes with {end - after} left in the batch"
    )


def _check_headers(data: Buffer, p: int, rec_end: int, index: int) -> int:
    count, p = read_varint(data, p, rec_end)
    # each header takes at least two bytes (key length 0, value length -1)
    if count < 0 or 2 * count > rec_end - p:
        raise InvalidRecordError(f"record {index}: invalid header count {count}")
    for _ in range(count):
        n, p = read_varint(data, p, rec_end)
        if n < 0 or n > rec_end - p:
            raise InvalidRecordError(f"record {index}: invalid header key length {n}")
        p += n
        n, p = read_varint(data, p, rec_end)
        if n < -1 or n > rec_end - p:
            raise InvalidRecordError(f"record {index}: invalid header value length {n}")
        if n > 0:
            p += n
    return p


def walk_window_py(data: Buffer, pos: int, end: int, first: int, count: int) -> tuple[int, int]:
    """Walk the records that lie whole in data[pos:end] (a window of a decompressed stream),
    numbered from `first`, at most `count` of them: (position after the last one, how many).

    The same checks as check_framing_py on each of them; a record cut by the end of the window
    is left for the next window. The pure-Python fallback of the C walk_window.
    """
    end = min(end, len(data))
    stop = pos
    n = 0
    while n < count and stop < end:
        if end - stop < 5 and all(b & 0x80 for b in data[stop:end]):
            break  # a length cut by the window
        length, p = read_varint(data, stop, end)
        if length >= _MIN_RECORD_BODY and length > end - p:
            break  # a record cut by the window
        if length < _MIN_RECORD_BODY:  # let the walk name the fault
            check_framing_py(data, pos, end, n + 1, first)
        stop = p + length
        n += 1
    if n:
        check_framing_py(data, pos, stop, n, first)
    return stop, n


# The C walks (odradek/wire/_framing.c), built by `pip install` when a compiler is there;
# ODRADEK_PURE_PYTHON=1 leaves them out (to measure or test the fallback).
_check_framing_c: Callable[[Buffer, int, int, int], None] | None = None
_walk_window_c: Callable[[Buffer, int, int, int, int], tuple[int, int]] | None = None
if os.environ.get("ODRADEK_PURE_PYTHON", "") in ("", "0"):
    try:
        from odradek.wire._framing import check_framing as _check_framing_c
        from odradek.wire._framing import walk_window as _walk_window_c
    except ImportError:  # pragma: no cover - depends on the build
        pass

walk_window = walk_window_py if _walk_window_c is None else _walk_window_c
"""walk_window(data, pos, end, first, count): the C walk when built, else walk_window_py."""

check_framing = check_framing_py if _check_framing_c is None else _check_framing_c
"""check_framing(data, pos, end, count): the C walk when built, else check_framing_py.

Both make the same checks and raise InvalidRecordError with the same messages
(tests/wire/test_framing_impls.py runs every case against both).
"""


def framing_implementations() -> dict[str, Callable[[Buffer, int, int, int], None]]:
    """The framing walks available here, by name: "python" always, "c" when it was built."""
    impls: dict[str, Callable[[Buffer, int, int, int], None]] = {"python": check_framing_py}
    if _check_framing_c is not None:
        impls["c"] = _check_framing_c
    return impls


# -- encoding ----------------------------------------------------------------------------------


def _write_bytes(out: bytearray, data: bytes | bytearray | memoryview | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def _encode_record(
    out: bytearray, rec: RecordInput, offset_delta: int, base_timestamp: int
) -> None:
    key, value, headers, timestamp = rec
    body = bytearray(b"\x00")  # attributes
    write_varlong(body, _wrap64(timestamp - base_timestamp))
    write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    write_varint(body, len(headers))
    for name, header_value in headers:
        _write_bytes(body, name.encode("utf-8", "surrogateescape"))
        _write_bytes(body, header_value)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """A complete v2 batch of (key, value, headers, timestamp) records, with its CRC.

    Records get offset deltas 0, 1, 2, ... unless `offset_deltas` gives them (compaction keeps
    the original offsets); `last_offset_delta` defaults to the last record's delta, and may be
    set for an emptied batch that must keep its offset span. The base timestamp is the first
    record's timestamp and the max timestamp the largest, as Kafka's MemoryRecordsBuilder.
    """
    if offset_deltas is not None and len(offset_deltas) != len(records):
        raise ValueError("offset_deltas must have one entry per record")
    deltas = range(len(records)) if offset_deltas is None else offset_deltas
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if records else 0
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    return build_batch_exact(
        records,
        deltas,
        base_offset=base_offset,
        attributes=attributes,
        codec=compression,
        last_offset_delta=last_offset_delta,
        base_timestamp=records[0][3] if records else -1,
        # Kafka's builder starts the max from NO_TIMESTAMP (-1)
        max_timestamp=max([-1, *(r[3] for r in records)]),
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def build_batch_exact(
    records: Sequence[RecordInput],
    offset_deltas: Sequence[int],
    *,
    base_offset: int,
    attributes: int,
    codec: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """A v2 batch with every header field as given (what compaction needs to rewrite a batch
    keeping its offsets, timestamps, producer fields and flags), records at `offset_deltas`
    with timestamps relative to `base_timestamp`, the section compressed with `codec` (0: as
    is, also for a compressed batch emptied by compaction, as Kafka's writeEmptyHeader)."""
    section = bytearray()
    for rec, delta in zip(records, offset_deltas, strict=True):
        _encode_record(section, rec, delta, base_timestamp)
    payload = compress(codec, section) if codec else section
    out = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,  # crc, written below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += payload
    write_crc(out, 0)
    return bytes(out)


# -- control records (KIP-98) ------------------------------------------------------------------


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: one COMMIT or ABORT control record, as EndTransactionMarker."""
    key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch(
        [(key, value, (), timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def end_txn_marker(records: Sequence[Record]) -> tuple[int, int] | None:
    """(type, coordinator epoch) of the transaction marker in a control batch's decoded records,
    as Kafka's ControlRecordType.parse + EndTransactionMarker.deserializeValue: the one parser of
    markers for the log, the coordinators' loaders and the cleaner. None when the batch holds no
    record (compaction can empty it), a key shorter than 4 bytes, or another control type
    (KRaft's leader change, snapshots); the epoch is -1 when the value is missing or short."""
    if not records:
        return None
    key = records[0].key
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    _version, ctype = _CONTROL_KEY.unpack_from(key)
    if ctype not in (ABORT, COMMIT):
        return None
    value = records[0].value
    coordinator_epoch = -1
    if value is not None and len(value) >= _END_TXN_VALUE.size:
        coordinator_epoch = _END_TXN_VALUE.unpack_from(value)[1]
    return ctype, coordinator_epoch


def control_type(buf: Buffer, pos: int = 0) -> int | None:
    """The control record type of a control batch (0 abort, 1 commit, as stored).

    None if the batch is not a control batch or holds no records (compaction can empty it).
    """
    header = parse_header(buf, pos)
    if not header.is_control:
        return None
    _h, records = decode_records(buf, pos)
    if not records:
        return None
    key = records[0].key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version: int
    ctype: int
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return ctype
