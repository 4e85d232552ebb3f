"""RecordBatch v2 header view, as Kafka's DefaultRecordBatch (magic 2, KIP-98).

A record batch is the unit a producer sends, the log stores and a consumer fetches. The broker
reads and patches only its fixed 61-byte header on the hot path; the records after it (possibly
compressed) are left alone. Layout, big-endian:

    offset  size  field
    0       8     base_offset              int64   assigned by the leader (outside the CRC)
    8       4     batch_length             int32   bytes after this field, i.e. size - 12
    12      4     partition_leader_epoch   int32   set by the leader (outside the CRC)
    16      1     magic                    int8    always 2 here
    17      4     crc                      uint32  CRC-32C of bytes [21, size)
    21      2     attributes               int16   see below
    23      4     last_offset_delta        int32   last record's offset - base_offset
    27      8     base_timestamp           int64   first record's timestamp
    35      8     max_timestamp            int64   largest record timestamp (or LogAppendTime)
    43      8     producer_id              int64   -1 without idempotence (KIP-98)
    51      2     producer_epoch           int16   -1 without idempotence
    53      4     base_sequence            int32   -1 without idempotence
    57      4     records_count            int32
    61      ...   records                          compressed as a whole per attributes

Attributes (int16):

    bits 0-2  compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
    bit  3    timestamp type: 0 CreateTime, 1 LogAppendTime
    bit  4    transactional (KIP-98)
    bit  5    control batch: holds transaction markers (KIP-98)
    bit  6    has delete horizon: base_timestamp is the compaction delete horizon (KIP-534)

Sans-IO: every function works on a bytes-like buffer and a position in it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

# the extension module directly: the package __init__ reads its own version via importlib.metadata
from crc32c._crc32c import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12
MAGIC = 2

# Field offsets within a batch, from the layout above.
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
RECORDS_COUNT_OFFSET = 57

MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with no records

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_SEQUENCE = -1
_INT32_MAX = 2**31 - 1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
# the header up to last_offset_delta: where a batch ends and which offsets it spans
SPAN_SIZE = 27
_SPAN = struct.Struct(">qiibIhi")
_SIZES = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview


class CorruptRecordError(ValueError):
    """Malformed or truncated record batch data (Kafka's CorruptRecordException)."""


class InvalidRecordError(CorruptRecordError):
    """Records whose framing inside a batch is wrong (Kafka's InvalidRecordException).

    Kafka answers INVALID_RECORD for it, and CORRUPT_MESSAGE for a bad CRC or a compressed
    stream that cannot be read; readers that only care whether a batch can be decoded catch
    CorruptRecordError, which covers both.
    """


class UnsupportedMagicError(CorruptRecordError):
    """A batch in an older message format (magic 0 or 1), which this broker does not accept."""

    def __init__(self, magic: int) -> None:
        super().__init__(f"unsupported record batch magic {magic} (only magic 2 is supported)")
        self.magic = magic


@dataclass(slots=True)
class BatchHeader:
    """The decoded 61-byte header of one RecordBatch v2."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def size(self) -> int:
        """Total bytes of the batch, including base_offset and batch_length."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps past int32 max to 0, as Kafka's sequences do."""
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: int32 sequences wrap to 0, not negative."""
    if sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def peek_sizes(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(base_offset, batch_length) from the first 12 bytes at `pos`, without other checks."""
    if pos < 0 or len(buf) - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated batch at {pos}: fewer than {LOG_OVERHEAD} bytes")
    base_offset, batch_length = _SIZES.unpack_from(buf, pos)
    return base_offset, batch_length


def peek_span(buf: Buffer, pos: int = 0) -> tuple[int, int, int]:
    """(base_offset, batch_length, last_offset_delta) from the first SPAN_SIZE bytes at `pos`,
    without other checks: what a log segment needs to step from batch to batch."""
    if pos < 0 or len(buf) - pos < SPAN_SIZE:
        raise CorruptRecordError(f"truncated batch at {pos}: fewer than {SPAN_SIZE} bytes")
    base_offset, batch_length, _epoch, _magic, _crc, _attrs, delta = _SPAN.unpack_from(buf, pos)
    return base_offset, batch_length, delta


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header at `pos`; only the 61 header bytes need be present."""
    available = len(buf) - pos
    if pos < 0 or available <= MAGIC_OFFSET:
        raise CorruptRecordError(f"truncated batch at {pos}: {max(available, 0)} bytes")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC:
        # magic is a signed int8 on the wire
        raise UnsupportedMagicError(magic - 256 if magic > 127 else magic)
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch at {pos}: {available} bytes, header needs {HEADER_SIZE}"
        )
    header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at {pos} has length {header.batch_length}, below the minimum {MIN_BATCH_LENGTH}"
        )
    return header


def compute_crc(buf: Buffer, pos: int, batch_length: int) -> int:
    """CRC-32C of the batch from attributes to its end, as stored in the crc field."""
    view = memoryview(buf)
    return crc32c(view[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + batch_length])


def crc_ok(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    """Whether the stored CRC matches the batch bytes; False if the batch is cut short."""
    if pos < 0 or len(buf) - pos < header.size:
        return False
    return compute_crc(buf, pos, header.batch_length) == header.crc


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Walk concatenated batches, yielding (position, header); a cut-off batch raises."""
    end = len(buf)
    pos = 0
    while pos < end:
        header = parse_header(buf, pos)
        if header.size > end - pos:
            raise CorruptRecordError(
                f"truncated batch at {pos}: {end - pos} bytes of {header.size}"
            )
        yield pos, header
        pos += header.size


def set_base_offset(buf: WritableBuffer, pos: int, offset: int) -> None:
    """Write the leader-assigned base offset; it lies outside the CRC."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Write the leader's epoch; it lies outside the CRC."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with `timestamp` as its max timestamp; recomputes the CRC.

    As Kafka's DefaultRecordBatch.setMaxTimestamp on the in-place validation path: only the
    timestamp-type bit and max_timestamp change. base_timestamp and the record deltas are left
    alone, because readers give every record of a LogAppendTime batch its max_timestamp.
    The whole batch must be present in `buf`.
    """
    (batch_length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)
    if batch_length < MIN_BATCH_LENGTH or len(buf) - pos < batch_length + LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated batch at {pos}")
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, batch_length))


def write_crc(buf: WritableBuffer, pos: int = 0) -> None:
    """Recompute and store the CRC of the complete batch at `pos`."""
    (batch_length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, batch_length))
