"""Produce-time batch validation, as Kafka's LogValidator, working on bytes.

Each batch's header is read in place. Checks: magic 2, CRC32C, size against
`max.message.bytes`, record count against the last offset delta, no control batches from
clients, CreateTime timestamps within `message.timestamp.{before,after}.max.ms`, and the
framing of every record (Kafka's DefaultRecord.readFrom): lengths that fit exactly, offset
deltas 0..n-1, the declared count and no trailing bytes. An uncompressed records section is
walked where it lies; a compressed one is decompressed, bounded by
`compression.max_decompressed_size(max.message.bytes)`, and walked. No record object is built.

Errors, as Kafka: a bad CRC, an unreadable or over-large compressed stream -> CORRUPT_MESSAGE;
bad record framing -> INVALID_RECORD (InvalidRecordException).

When the topic's `compression.type` differs from the batch's codec, the decompressed section
is compressed again with the topic's codec under a copy of the original header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.log.config import LogConfig
from odradek.wire.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedMagicError,
    crc_ok,
    iter_batches,
    write_crc,
)
from odradek.wire.compression import compress, decompress, max_decompressed_size
from odradek.wire.errors import ErrorCode
from odradek.wire.records import check_framing

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class ValidationError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class ValidatedBatches:
    buf: bytes | bytearray
    batches: list[tuple[int, BatchHeader]]
    log_append_time: bool

    @property
    def record_count(self) -> int:
        return sum(h.records_count for _p, h in self.batches)


ZSTD = 4


def validate(
    records: bytes | None, config: LogConfig, now: int, produce_version: int | None = None
) -> ValidatedBatches:
    """Check a Produce partition's records; raise ValidationError with Kafka's error code.

    From Produce v3 Kafka takes exactly one magic-2 batch per partition (INVALID_RECORD
    otherwise) and zstd only from v7 (UNSUPPORTED_COMPRESSION_TYPE).
    """
    one_batch = (
        f"Produce requests with version {produce_version} are only allowed to contain "
        "exactly one record batch"
    )
    if not records:
        raise ValidationError(ErrorCode.INVALID_RECORD, one_batch)
    # the request's bytes are written as they are (the log patches offsets in a copy of each
    # 16-byte prefix); only LogAppendTime and recompression need a mutable copy
    buf: bytes | bytearray = records
    try:
        batches = list(iter_batches(buf))
    except UnsupportedMagicError as exc:
        raise ValidationError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} are only allowed "
            f"to contain record batches with magic version 2 ({exc})",
        ) from None
    except CorruptRecordError as exc:
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if not batches:
        raise ValidationError(ErrorCode.INVALID_RECORD, one_batch)
    if produce_version is not None:
        if len(batches) != 1:
            raise ValidationError(ErrorCode.INVALID_RECORD, one_batch)
        if produce_version < 7 and batches[0][1].compression == ZSTD:
            raise ValidationError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                "Produce requests with version < 7 may not use zstd",
            )
    log_append = config.message_timestamp_type == "LogAppendTime"
    target = CODECS.get(config.compression_type)
    bound = max_decompressed_size(config.max_message_bytes)
    # decompressed sections, kept for recompression: (position, header, section)
    sections: list[tuple[int, BatchHeader, bytes]] = []
    for pos, h in batches:
        if h.size > config.max_message_bytes:
            raise ValidationError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {h.size} bytes over max.message.bytes {config.max_message_bytes}",
            )
        if not crc_ok(buf, pos, h):
            raise ValidationError(ErrorCode.CORRUPT_MESSAGE, f"CRC mismatch at {pos}")
        if h.is_control:
            raise ValidationError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
        if h.records_count != h.last_offset_delta + 1 or h.records_count <= 0:
            raise ValidationError(
                ErrorCode.INVALID_RECORD,
                f"record count {h.records_count} does not match last offset "
                f"delta {h.last_offset_delta}",
            )
        if not log_append and h.timestamp_type == 0:
            _check_timestamp(h, config, now)
        section = _check_records(buf, pos, h, bound)
        if section is not None and target is not None and h.compression != target:
            sections.append((pos, h, section))
    if log_append:
        buf = bytearray(buf)
    if target is not None and any(h.compression != target for _p, h in batches):
        buf, batches = _recompress(buf, batches, sections, target)
    return ValidatedBatches(buf, batches, log_append)


def _check_records(buf: bytes | bytearray, pos: int, h: BatchHeader, bound: int) -> bytes | None:
    """Walk the batch's records; returns the decompressed section of a compressed batch."""
    start = pos + HEADER_SIZE
    end = pos + h.size
    try:
        if not h.compression:
            check_framing(buf, start, end, h.records_count)
            return None
        try:
            section = decompress(h.compression, memoryview(buf)[start:end], bound)
        except CorruptRecordError as exc:
            raise ValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        check_framing(section, 0, len(section), h.records_count)
        return section
    except InvalidRecordError as exc:
        raise ValidationError(ErrorCode.INVALID_RECORD, f"batch at {pos}: {exc}") from None


def _check_timestamp(h: BatchHeader, config: LogConfig, now: int) -> None:
    # the batch's max timestamp bounds every record's; its base timestamp is the smallest
    # in practice (clients write the first record's)
    if now - h.base_timestamp > config.message_timestamp_before_max_ms or (
        h.max_timestamp - now > config.message_timestamp_after_max_ms
    ):
        raise ValidationError(
            ErrorCode.INVALID_TIMESTAMP, f"timestamp {h.max_timestamp} out of the allowed range"
        )


def _recompress(
    buf: bytes | bytearray,
    batches: list[tuple[int, BatchHeader]],
    sections: list[tuple[int, BatchHeader, bytes]],
    codec: int,
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """Every batch with the topic's codec; header fields (producer id, epoch, sequence,
    timestamps, offset deltas, flags) kept, as the records' bytes are unchanged."""
    decompressed = {pos: section for pos, _h, section in sections}
    out = bytearray()
    for pos, h in batches:
        start = len(out)
        if h.compression == codec:
            out += memoryview(buf)[pos : pos + h.size]
            continue
        section = decompressed.get(pos)
        if section is None:  # uncompressed: the records lie in place
            section = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + h.size])
        payload = compress(codec, section) if codec else section
        out += memoryview(buf)[pos : pos + HEADER_SIZE]
        out += payload
        _INT32.pack_into(
            out, start + BATCH_LENGTH_OFFSET, HEADER_SIZE - LOG_OVERHEAD + len(payload)
        )
        _INT16.pack_into(out, start + ATTRIBUTES_OFFSET, (h.attributes & ~COMPRESSION_MASK) | codec)
        write_crc(out, start)
    return out, list(iter_batches(out))
