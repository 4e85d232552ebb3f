"""Produce-time batch validation, as Kafka's LogValidator, working on bytes.

Each batch's header is read in place. Checks: magic 2, CRC32C, size against
`max.message.bytes`, record count against the last offset delta, no control batches from
clients, CreateTime timestamps within `message.timestamp.{before,after}.max.ms`, and the
framing of every record (Kafka's DefaultRecord.readFrom): lengths that fit exactly, offset
deltas 0..n-1, the declared count and no trailing bytes. An uncompressed records section is
walked where it lies; a compressed one is walked as it inflates (wire/stream_walk.py, as Kafka's
skipKeyValueIterator), in bounded memory whatever its ratio: `begin` walks the first
INLINE_BUDGET bytes and returns a PendingValidation when there is more (the Produce handler then
closes it and validates the batch in a worker thread). No record object is built.

Errors, as Kafka: a bad CRC, an unreadable or over-large compressed stream -> CORRUPT_MESSAGE;
bad record framing -> INVALID_RECORD (InvalidRecordException).

When the topic's `compression.type` differs from the batch's codec, the records are compressed
again with the topic's codec as they are walked, under a copy of the original header; a result
over max.message.bytes is MESSAGE_TOO_LARGE (Kafka's RecordTooLargeException after conversion).

Produce v0-2 may carry message sets of magic 0 or 1 (odradek/wire/legacy_records.py). As Kafka
3.x's LogValidator does when the log's format is v2 (convertAndAssignOffsetsNonCompressed /
validateMessagesAndAssignOffsetsCompressed), they are checked and up-converted to one v2 batch
(`_validate_legacy`): each message's size against `max.message.bytes` (MESSAGE_TOO_LARGE), CRC32
(CORRUPT_MESSAGE, inner messages of a wrapper too), one magic throughout and a compressed wrapper
alone in its set, no nested compression, no zstd (INVALID_RECORD), a magic-1 wrapper's offset
not below its last inner offset, keys on a compacted topic (INVALID_RECORD), CreateTime
timestamps within range and no producer-set LogAppendTime (INVALID_TIMESTAMP). Stricter than
Kafka, which renumbers them silently, inner offsets that go backwards are INVALID_RECORD, and so
is a magic-0 message with the timestamp-type bit or laid out with a timestamp (its key and
value lengths do not fill it). The batch keeps keys, values and timestamps (magic 0: -1, no
timestamp), takes the topic's codec or else the wrapper's, producer id -1, CreateTime (the log
stamps LogAppendTime topics as for any batch). Nothing is appended when any check fails.
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
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedMagicError,
    crc_ok,
    iter_batches,
    write_crc,
)
from odradek.wire.compression import compress, max_decompressed_size
from odradek.wire.errors import ErrorCode
from odradek.wire.legacy_records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Message,
    iter_inner,
    read_message,
)
from odradek.wire.records import check_framing, write_varint, write_varlong
from odradek.wire.stream_walk import StreamWalk
from odradek.wire.streams import OutputTooLarge, StreamEncoder, open_inflater

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_TWO63 = 2**63
_TWO64 = 2**64

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class ValidationError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class ValidatedBatches:
    buf: Buffer  # a Produce request's records are a memoryview of its frame
    batches: list[tuple[int, BatchHeader]]
    log_append_time: bool
    converted: int = 0  # records up-converted from a magic 0/1 message set

    @property
    def record_count(self) -> int:
        return sum(h.records_count for _p, h in self.batches)


ZSTD = 4


def validate(
    records: Buffer | None, config: LogConfig, now: int, produce_version: int | None = None
) -> ValidatedBatches:
    """Check a Produce partition's records; raise ValidationError with Kafka's error code.

    From Produce v3 Kafka takes exactly one magic-2 batch per partition (INVALID_RECORD
    otherwise) and zstd only from v7 (UNSUPPORTED_COMPRESSION_TYPE).
    """
    started = begin(records, config, now, produce_version, inline_budget=None)
    return started if isinstance(started, ValidatedBatches) else started.finish()


# Decompressed bytes walked on the caller's thread before `begin` hands a batch over: batches
# of up to this much (nearly all: librdkafka's batch.size is 1 MB uncompressed) finish inline.
INLINE_BUDGET = 2 << 20


def begin(
    records: Buffer | None,
    config: LogConfig,
    now: int,
    produce_version: int | None = None,
    inline_budget: int | None = INLINE_BUDGET,
) -> ValidatedBatches | PendingValidation:
    """`validate`, walking at most about `inline_budget` decompressed bytes (None: all); what
    is left is a PendingValidation whose `finish` (a worker thread's job) walks the rest."""
    one_batch = (
        f"Produce requests with version {produce_version} are only allowed to contain "
        "exactly one record batch"
    )
    if not records:
        raise ValidationError(ErrorCode.INVALID_RECORD, one_batch)
    # the request's bytes are written as they are (the log patches offsets in a copy of each
    # 16-byte prefix); only LogAppendTime and recompression need a mutable copy
    buf: Buffer = records
    try:
        batches = list(iter_batches(buf))
    except UnsupportedMagicError as exc:
        if produce_version is not None and produce_version < 3:
            return _validate_legacy(bytes(records), config, now)
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
    pending = PendingValidation(buf, batches, config)
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
        if not pending.log_append and h.timestamp_type == 0:
            _check_timestamp(h, config, now)
        pending.add(pos, h)
    if pending.walk(inline_budget):
        return pending.result()
    return pending


class PendingValidation:
    """The record walks of one partition's batches (Kafka's LogValidator iterating each
    compressed batch), resumable: `walk(budget)` on the event loop, `finish` in a thread."""

    def __init__(self, buf: Buffer, batches: list[tuple[int, BatchHeader]], config: LogConfig):
        self.buf = buf
        self.batches = batches
        self.config = config
        self.log_append = config.message_timestamp_type == "LogAppendTime"
        self.target = CODECS.get(config.compression_type)
        # compressed batches still to walk: (position, walk, the topic codec's encoder)
        self.walks: list[tuple[int, StreamWalk, StreamEncoder | None]] = []

    def add(self, pos: int, h: BatchHeader) -> None:
        start = pos + HEADER_SIZE
        end = pos + h.size
        try:
            if not h.compression:
                check_framing(self.buf, start, end, h.records_count)
                return
            encoder = None
            if self.target is not None and h.compression != self.target:
                limit = self.config.max_message_bytes - HEADER_SIZE
                encoder = StreamEncoder(self.target, limit)
            source = open_inflater(h.compression, memoryview(self.buf)[start:end])
            walk = StreamWalk(source, h.records_count, None if encoder is None else encoder.feed)
        except InvalidRecordError as exc:
            raise ValidationError(ErrorCode.INVALID_RECORD, f"batch at {pos}: {exc}") from None
        except CorruptRecordError as exc:
            raise ValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        self.walks.append((pos, walk, encoder))

    def walk(self, budget: int | None) -> bool:
        """Walk on for about `budget` decompressed bytes (None: to the end); True when done."""
        for pos, walk, _encoder in self.walks:
            before = walk.inflated
            try:
                done = walk.step(budget)
            except InvalidRecordError as exc:
                raise ValidationError(ErrorCode.INVALID_RECORD, f"batch at {pos}: {exc}") from None
            except CorruptRecordError as exc:
                raise ValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
            except OutputTooLarge:
                raise _too_large(self.config) from None
            if not done:
                return False
            if budget is not None:
                budget = max(0, budget - (walk.inflated - before))
        return True

    def close(self) -> None:
        """Give up the walks, freeing their decompressors now (`validate` may start again)."""
        for _pos, walk, _encoder in self.walks:
            walk.close()
        self.walks = []

    def finish(self) -> ValidatedBatches:
        """Walk what is left and give the result (raises ValidationError)."""
        self.walk(None)
        return self.result()

    def result(self) -> ValidatedBatches:
        buf = self.buf
        batches = self.batches
        if self.log_append:
            buf = bytearray(buf)
        target = self.target
        if target is not None and any(h.compression != target for _p, h in batches):
            payloads: dict[int, bytes | bytearray] = {}
            try:
                for pos, _walk, encoder in self.walks:
                    if encoder is not None:
                        payloads[pos] = encoder.finish()
            except OutputTooLarge:
                raise _too_large(self.config) from None
            buf, batches = _recompress(buf, batches, payloads, target)
        return ValidatedBatches(buf, batches, self.log_append)


def _too_large(config: LogConfig) -> ValidationError:
    """Kafka's RecordTooLargeException for a batch that grew when it was recompressed."""
    return ValidationError(
        ErrorCode.MESSAGE_TOO_LARGE,
        f"recompressed batch over max.message.bytes {config.max_message_bytes}",
    )


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
    buf: Buffer,
    batches: list[tuple[int, BatchHeader]],
    payloads: dict[int, bytes | bytearray],
    codec: int,
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """Every batch with the topic's codec; header fields (producer id, epoch, sequence,
    timestamps, offset deltas, flags) kept, as the records' bytes are unchanged. `payloads`:
    compressed batches' records already recompressed while they were walked."""
    out = bytearray()
    for pos, h in batches:
        start = len(out)
        if h.compression == codec:
            out += memoryview(buf)[pos : pos + h.size]
            continue
        payload = payloads.get(pos)
        if payload is None:  # uncompressed: the records lie in place
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


def _validate_legacy(records: bytes, config: LogConfig, now: int) -> ValidatedBatches:
    """A magic 0/1 message set checked and up-converted to one v2 batch (module docstring)."""
    try:
        return _up_convert(records, config, now)
    except InvalidRecordError as exc:
        raise ValidationError(ErrorCode.INVALID_RECORD, str(exc)) from None
    except CorruptRecordError as exc:
        raise ValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None


class _UpConverter:
    """Message by message into a v2 records section (streamed: no record objects are kept, so
    memory stays a few times the decompressed set whatever its record count)."""

    def __init__(self, config: LogConfig, now: int) -> None:
        self.now = now
        self.log_append = config.message_timestamp_type == "LogAppendTime"
        self.before = config.message_timestamp_before_max_ms
        self.after = config.message_timestamp_after_max_ms
        self.compact = config.compact
        self.section = bytearray()
        self.count = 0
        self.base_timestamp = NO_TIMESTAMP
        self.max_timestamp = NO_TIMESTAMP

    def add(self, m: Message, batch: Message) -> None:
        """Check record `m` of `batch` (its wrapper, or itself when uncompressed) and add it."""
        index = self.count
        batch_log_append = batch.timestamp_type == LOG_APPEND_TIME
        timestamp = batch.timestamp if batch_log_append else m.timestamp
        if self.compact and m.key is None:
            raise InvalidRecordError(
                f"record {index}: compacted topic cannot accept message without key"
            )
        if not self.log_append and timestamp != NO_TIMESTAMP:
            now = self.now
            if now - timestamp > self.before or timestamp - now > self.after:
                raise ValidationError(
                    ErrorCode.INVALID_TIMESTAMP,
                    f"timestamp {timestamp} of record {index} is out of range "
                    f"[{now - self.before}, {now + self.after}]",
                )
        elif batch_log_append:
            raise ValidationError(
                ErrorCode.INVALID_TIMESTAMP,
                f"record {index}: producer should not set timestamp type to LogAppendTime",
            )
        if index == 0:
            self.base_timestamp = timestamp
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        # a v2 record (records.py): length, attributes 0, timestamp delta, offset delta, key,
        # value, no headers
        head = bytearray(b"\x00")
        delta = ((timestamp - self.base_timestamp + _TWO63) % _TWO64) - _TWO63
        write_varlong(head, delta)
        write_varint(head, index)
        key, value = m.key, m.value
        write_varint(head, -1 if key is None else len(key))
        tail = bytearray()
        write_varint(tail, -1 if value is None else len(value))
        length = len(head) + len(tail) + 1
        length += len(key) if key is not None else 0
        length += len(value) if value is not None else 0
        section = self.section
        write_varint(section, length)
        section += head
        if key is not None:
            section += key
        section += tail
        if value is not None:
            section += value
        section.append(0)  # header count
        self.count = index + 1

    def batch(self, codec: int) -> bytearray:
        payload = compress(codec, self.section) if codec else self.section
        out = bytearray(HEADER_SIZE)
        HEADER_STRUCT.pack_into(
            out,
            0,
            0,  # base offset: the log assigns it
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            -1,  # partition leader epoch: the log sets it
            MAGIC,
            0,  # crc, written below
            codec,  # CreateTime; the log stamps LogAppendTime topics
            self.count - 1,
            self.base_timestamp,
            self.max_timestamp,
            -1,  # producer id, epoch, base sequence: none in magic 0/1
            -1,
            -1,
            self.count,
        )
        out += payload
        write_crc(out, 0)
        return out


def _up_convert(buf: bytes, config: LogConfig, now: int) -> ValidatedBatches:
    limit = config.max_message_bytes
    bound = max_decompressed_size(limit)
    up = _UpConverter(config, now)
    first_magic = None
    source_codec = 0
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos >= LOG_OVERHEAD:
            (size,) = _INT32.unpack_from(buf, pos + 8)
            if size + LOG_OVERHEAD > limit:
                raise ValidationError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"message of {size + LOG_OVERHEAD} bytes over max.message.bytes {limit}",
                )
        start = pos
        message, pos = read_message(buf, pos, end)
        if first_magic is None:
            first_magic = message.magic
        elif message.magic != first_magic:
            raise InvalidRecordError(
                f"message magic {message.magic} is not the same as the first message's "
                f"magic {first_magic}"
            )
        if message.codec:
            if start or pos < end:
                raise InvalidRecordError("Compressed outer record has more than one batch")
            source_codec = message.codec
            for inner in iter_inner(message, bound):
                up.add(inner, message)
        else:
            up.add(message, message)
    if not up.count:
        raise InvalidRecordError("message set has no messages at all")
    target = CODECS.get(config.compression_type)
    batch = up.batch(source_codec if target is None else target)
    if len(batch) > limit:
        raise ValidationError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"up-converted batch of {len(batch)} bytes over max.message.bytes {limit}",
        )
    out: bytes | bytearray = batch if up.log_append else bytes(batch)
    return ValidatedBatches(out, list(iter_batches(out)), up.log_append, up.count)
