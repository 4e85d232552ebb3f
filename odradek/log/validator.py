"""Produce-time batch validation, as Kafka's LogValidator, working on bytes.

Each batch's header is read in place; records are decoded only when the topic's
`compression.type` asks the broker to recompress. Checks: magic 2, CRC32C, size against
`max.message.bytes`, record count against the last offset delta, no control batches from
clients, and CreateTime timestamps within `message.timestamp.{before,after}.max.ms`.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.log.config import LogConfig
from odradek.wire.batch import (
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagicError,
    crc_ok,
    iter_batches,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch, decode_records

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
    if log_append:
        buf = bytearray(buf)
    target = CODECS.get(config.compression_type)
    if target is not None and any(h.compression != target for _p, h in batches):
        buf, batches = _recompress(buf, batches, target)
    return ValidatedBatches(buf, batches, log_append)


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
    buf: bytearray, batches: list[tuple[int, BatchHeader]], codec: int
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """Rebuild every batch with the topic's codec, keeping producer id, epoch and sequence."""
    out = bytearray()
    for pos, h in batches:
        try:
            _h, records = decode_records(buf, pos)
        except CorruptRecordError as exc:
            raise ValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        out += build_batch(
            [(r.key, r.value, r.headers, r.timestamp) for r in records],
            compression=codec,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            transactional=h.is_transactional,
            timestamp_type=h.timestamp_type,
        )
    return out, list(iter_batches(out))
