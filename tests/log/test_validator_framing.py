"""Produce-time record framing checks (issue 11, defect 3), as Kafka's LogValidator and
DefaultRecord.readFrom: a batch whose records cannot be read is refused, never appended.

Framing errors answer INVALID_RECORD (Kafka's InvalidRecordException); a compressed stream that
cannot be read, or inflates past the bound, answers CORRUPT_MESSAGE.
"""

from __future__ import annotations

import os
import tracemalloc

import pytest

from odradek.log.config import LogConfig
from odradek.log.validator import ValidationError, validate
from odradek.testing.hostile_batches import bomb_batch, good_records, raw_batch, record
from odradek.wire.batch import parse_header
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch, decode_records, write_varint

NOW = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
NAMES = {NONE: "uncompressed", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


def batch(section: bytes, count: int, codec: int = NONE, **kw: int) -> bytes:
    payload = compress(codec, section) if codec else section
    return raw_batch(payload, count, codec=codec, timestamp=NOW, **kw)


def check(data: bytes, codec: int = NONE, **config: object) -> ErrorCode | None:
    cfg = LogConfig(**config)  # type: ignore[arg-type]
    try:
        validate(data, cfg, NOW, produce_version=9)
    except ValidationError as exc:
        return exc.code
    return None


def test_huge_record_length_in_a_118_byte_frame_is_rejected() -> None:
    """The issue's case: a records length of 0x7fffffff inside a 118-byte frame."""
    body = record(0)[1:]
    section = bytearray()
    write_varint(section, 0x7FFFFFFF)
    section += body
    section += bytes(118 - 61 - len(section))
    data = batch(bytes(section), 1)
    assert len(data) == 118
    assert check(data) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
@pytest.mark.parametrize(
    ("case", "section", "count"),
    [
        ("fewer records than declared", good_records(2), 3),
        ("more records than declared", good_records(3), 2),
        ("truncated last record", good_records(3)[:-3], 3),
        ("trailing garbage", good_records(2) + b"\x00\x01\x02", 2),
        ("offset deltas out of order", record(1) + record(0), 2),
        ("offset deltas repeated", record(0) + record(0), 2),
        ("offset deltas with a gap", record(0) + record(2), 2),
        ("record length too long", record(0, length_fix=1) + record(1), 2),
        ("record length too short", record(0, length_fix=-1) + record(1), 2),
        ("record length zero", b"\x00" * 10, 1),
        ("negative record length", b"\x03" + record(0)[1:], 1),
        ("key length overruns", record(0, b"key", key_length=60), 1),
        ("key length below -1", record(0, b"", key_length=-2), 1),
        ("header count too large", record(0, headers=[(b"h", b"v")], header_count=50), 1),
        ("negative header count", record(0, headers=[], header_count=-1), 1),
        ("negative header key length", record(0, headers=[(b"h", b"v")])[:-4] + b"\x01", 1),
        ("unfinished varint", b"\x0c\x00" + b"\xff" * 11, 1),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_bad_framing_is_invalid_record(codec: int, case: str, section: bytes, count: int) -> None:
    if case == "more records than declared":
        data = batch(section, count, codec, last_offset_delta=count - 1)
    else:
        data = batch(section, count, codec)
    assert check(data) == ErrorCode.INVALID_RECORD, case


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
@pytest.mark.parametrize("target", ["producer", "uncompressed", "gzip", "lz4", "zstd"])
def test_valid_batches_pass_and_keep_their_records(codec: int, target: str) -> None:
    records = [
        (b"key-%d" % i, os.urandom(i * 7), [(f"h{j}", b"v" * j) for j in range(i % 3)], NOW + i)
        for i in range(300)  # offset deltas past 63 need two-byte varints
    ]
    records.append((None, None, [("null", None)], NOW + 300))
    records.append((b"", b"x" * 70_000, [], NOW + 301))  # a length of three varint bytes
    data = build_batch(records, compression=codec)
    cfg = LogConfig(compression_type=target)
    result = validate(data, cfg, NOW, produce_version=9)
    out = bytes(result.buf)
    h, got = decode_records(out)
    assert [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in got] == [
        (k, v, list(hs), t, i) for i, (k, v, hs, t) in enumerate(records)
    ]
    original = parse_header(data)
    expected_codec = codec if target == "producer" else {v: k for k, v in NAMES.items()}[target]
    assert h.compression == expected_codec
    assert (h.records_count, h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (
        original.records_count,
        original.last_offset_delta,
        original.base_timestamp,
        original.max_timestamp,
    )


def test_recompression_keeps_producer_fields() -> None:
    data = build_batch(
        [(b"k", b"v", (), NOW), (b"k2", b"v2", (), NOW + 5)],
        compression=GZIP,
        producer_id=7,
        producer_epoch=3,
        base_sequence=42,
        transactional=True,
    )
    result = validate(data, LogConfig(compression_type="zstd"), NOW, produce_version=9)
    h = parse_header(result.buf)
    assert (h.compression, h.producer_id, h.producer_epoch, h.base_sequence) == (ZSTD, 7, 3, 42)
    assert h.is_transactional


@pytest.mark.parametrize("target", ["producer", "zstd", "gzip"])
@pytest.mark.parametrize(("codec", "mib"), [(ZSTD, 1024), (GZIP, 256), (LZ4, 128)])
def test_bomb_of_zeros_is_invalid_record(codec: int, mib: int, target: str) -> None:
    """Whether or not the topic recompresses, a bomb whose records are zeros is refused at its
    first record (a record of length 0), as Kafka does, never inflated."""
    data = bomb_batch(codec, mib)
    tracemalloc.start()
    try:
        assert check(data, compression_type=target) == ErrorCode.INVALID_RECORD
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # the bombs inflate to 128 MiB - 1 GiB


def test_undecodable_stream_is_corrupt_message() -> None:
    data = raw_batch(b"\x1f\x8b\x08\x00garbage-not-deflate", 1, codec=GZIP, timestamp=NOW)
    assert check(data) == ErrorCode.CORRUPT_MESSAGE
