"""Produce-time validation streams a compressed batch, as Kafka's LogValidator does: what a batch
inflates to costs time, not memory, and no compression ratio is refused.

Repetitive JSON log lines inflating to 200 MB (ratios of 18x for snappy to ~290x for zstd) are
accepted and kept byte for byte, with a few MiB of memory; a valid batch inflating to 1 GiB is
accepted the same way, and data after the declared records is refused without inflating it.
"""

from __future__ import annotations

import hashlib
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
import zstandard

from odradek.log.config import LogConfig
from odradek.log.validator import PendingValidation, ValidationError, begin, validate
from odradek.testing.hostile_batches import raw_batch, record
from odradek.testing.log_lines import json_log_batch, json_log_values, stream_bomb_batch
from odradek.wire.batch import HEADER_SIZE, parse_header
from odradek.wire.compression import GZIP, LZ4, SNAPPY, ZSTD
from odradek.wire.errors import ErrorCode
from odradek.wire.records import decode_records
from odradek.wire.stream_walk import LONG_RECORD
from odradek.wire.streams import open_inflater

NOW = 1_700_000_000_000
MB = 1_000_000
CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def traced_peak(fn: Callable[[], object]) -> int:
    """Peak bytes Python allocated while `fn()` ran."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", list(CODECS))
def test_json_logs_inflating_to_200_mb_are_accepted_unchanged(name: str) -> None:
    codec = CODECS[name]
    data, count, inflated = json_log_batch(codec, 200 * MB)
    assert inflated > 200 * MB
    # the topic takes the batch's compressed size, as a user raises max.message.bytes for it;
    # every codec here inflates past 16x that (snappy least: about 18x)
    config = LogConfig(max_message_bytes=max(len(data), 1 << 20))
    assert inflated > 16 * config.max_message_bytes
    results = []
    peak = traced_peak(lambda: results.append(validate(data, config, NOW, produce_version=9)))
    (result,) = results
    assert bytes(result.buf) == data  # stored as produced: no recompression
    assert [h.records_count for _p, h in result.batches] == [count]
    assert peak < 16 << 20, f"validation allocated {peak >> 20} MiB"


@pytest.mark.parametrize(("name", "mib"), [("zstd", 1024), ("gzip", 256)])
def test_valid_record_inflating_to_a_gibibyte_is_walked_in_bounded_memory(
    name: str, mib: int
) -> None:
    """Kafka accepts it (a record's size is not limited after compression): so do we, having
    read it through a window (gzip, slower to build, at a quarter of the size)."""
    data = stream_bomb_batch(CODECS[name], mib)
    assert len(data) < 1 << 20
    results = []
    peak = traced_peak(lambda: results.append(validate(data, LogConfig(), NOW, 9)))
    assert results[0].record_count == 1
    assert peak < 16 << 20, f"validation allocated {peak >> 20} MiB"


def test_data_after_the_declared_records_is_refused_before_it_is_inflated() -> None:
    """Kafka reads one byte past the last declared record ("records still remaining")."""
    z = zstandard.ZstdCompressor(level=3).compressobj()
    body = z.compress(record(0, b"k", b"v"))
    body += b"".join(z.compress(bytes(1 << 20)) for _ in range(1024))  # then a GiB of zeros
    data = raw_batch(body + z.flush(), 1, codec=ZSTD)
    peak = traced_peak(lambda: pytest.raises(ValidationError, validate, data, LogConfig(), NOW, 9))
    with pytest.raises(ValidationError) as err:
        validate(data, LogConfig(), NOW, 9)
    assert err.value.code == ErrorCode.INVALID_RECORD
    assert "left after the 1 declared records" in str(err.value)
    assert peak < 16 << 20


def digest(codec: int, section: bytes | memoryview) -> tuple[int, str]:
    """(inflated size, sha256) of a compressed records section, read as a stream."""
    src = open_inflater(codec, section)
    h = hashlib.sha256()
    size = 0
    while chunk := src.read(1 << 20):
        h.update(chunk)
        size += len(chunk)
    return size, h.hexdigest()


@pytest.mark.parametrize(("source", "target"), [("zstd", "gzip"), ("zstd", "lz4"), ("lz4", "zstd")])
def test_recompression_streams_into_the_topic_codec(source: str, target: str) -> None:
    data, count, inflated = json_log_batch(CODECS[source], 100 * MB)
    config = LogConfig(compression_type=target, max_message_bytes=4 << 20)
    assert inflated > 16 * config.max_message_bytes
    result = validate(data, config, NOW, 9)
    ((pos, h),) = result.batches
    assert h.compression == CODECS[target] and h.records_count == count
    section = memoryview(result.buf)[pos + HEADER_SIZE : pos + h.size]
    # the recompressed stream holds the producer's records byte for byte
    assert digest(h.compression, section) == digest(CODECS[source], data[HEADER_SIZE:])


def test_recompressed_batch_over_max_message_bytes_is_message_too_large() -> None:
    """Kafka checks a batch whose size changed in conversion (RecordTooLargeException)."""
    data, _count, _inflated = json_log_batch(ZSTD, 20 * MB)
    config = LogConfig(compression_type="uncompressed")
    with pytest.raises(ValidationError) as err:
        validate(data, config, NOW, 9)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_long_records_and_their_headers_are_checked(codec: int) -> None:
    """A record longer than the window is read through; its headers are still walked."""
    value = b"v" * (LONG_RECORD + 12345)

    def pack(raw: bytes) -> bytes:
        if codec == GZIP:
            z = zlib.compressobj(6, zlib.DEFLATED, 31)
            return z.compress(raw) + z.flush()
        return bytes(zstandard.ZstdCompressor().compress(raw))

    good = record(0, b"key", value, [(b"h1", b"x"), (b"h2", None)]) + record(1, None, b"w")
    result = validate(raw_batch(pack(good), 2, codec=codec), LogConfig(), NOW, 9)
    header, records = decode_records(result.buf, max_size=64 << 20)
    assert header.records_count == 2 and records[0].value == value
    for bad in (
        record(0, b"key", value, [(b"h1", b"x")], header_count=3),
        record(1, b"key", value),  # offset delta 1 for record 0
        record(0, b"key", value, length_fix=1),
        record(0, b"key", value, value_length=len(value) + 100),
    ):
        with pytest.raises(ValidationError) as err:
            validate(
                raw_batch(pack(bad + record(1, None, b"w")), 2, codec=codec), LogConfig(), NOW, 9
            )
        assert err.value.code == ErrorCode.INVALID_RECORD, bad[:8]


def test_long_batch_is_handed_over_after_the_inline_budget() -> None:
    data, count, _inflated = json_log_batch(LZ4, 20 * MB)
    config = LogConfig(max_message_bytes=1 << 20)
    started = begin(data, config, NOW, 9, inline_budget=2 << 20)
    assert isinstance(started, PendingValidation)
    assert started.finish().record_count == count
    # a single record longer than the window keeps to the budget too
    bomb = begin(stream_bomb_batch(GZIP, 64), config, NOW, 9, inline_budget=2 << 20)
    assert isinstance(bomb, PendingValidation)
    assert bomb.finish().record_count == 1
    small, small_count, _ = json_log_batch(LZ4, 500_000)
    done = begin(small, config, NOW, 9, inline_budget=2 << 20)
    assert not isinstance(done, PendingValidation) and done.record_count == small_count


def test_every_codec_cut_short_is_refused() -> None:
    for codec in CODECS.values():
        data, _count, _inflated = json_log_batch(codec, 5 * MB)
        section = data[HEADER_SIZE:]
        count = parse_header(data).records_count
        cut = raw_batch(section[: len(section) * 2 // 3], count, codec=codec)
        with pytest.raises(ValidationError) as err:
            validate(cut, LogConfig(max_message_bytes=1 << 24), NOW, 9)
        assert err.value.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)


def test_raw_snappy_batch_as_librdkafka_writes_it_inflating_past_16x() -> None:
    """librdkafka writes a batch as one raw snappy block (no xerial framing); snappy's ceiling
    is about 21x, so such a block is inflated whole, bounded by that ratio."""
    import cramjam

    raw = bytearray()
    count = 0
    for value in json_log_values(20 * MB):
        raw += record(count, None, value)
        count += 1
    packed = bytes(cramjam.snappy.compress_raw(bytes(raw)))
    data = raw_batch(packed, count, codec=SNAPPY)
    config = LogConfig(max_message_bytes=max(len(data), 1 << 20))
    assert len(raw) > 16 * config.max_message_bytes
    # the block inflates whole: past the inline budget, so left to the worker thread
    started = begin(data, config, NOW, 9, inline_budget=2 << 20)
    assert isinstance(started, PendingValidation)
    result = started.finish()
    assert bytes(result.buf) == data and result.record_count == count
