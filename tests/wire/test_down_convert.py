"""wire/down_convert.py's one-pass batch conversion against the reference path (decode the v2
records, then legacy_records.encode_message_set): the same bytes for every codec, both magics,
LogAppendTime, null keys and values, multi-byte varints and a fetch offset inside the batch."""

from __future__ import annotations

import pytest

from odradek.wire.batch import CorruptRecordError
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from odradek.wire.down_convert import UnsupportedCompression, convert_batch
from odradek.wire.legacy_records import NO_TIMESTAMP, decode_message_set, encode_message_set
from odradek.wire.records import build_batch, decode_records

BOUND = 1 << 24


def batch(codec: int, log_append: bool) -> bytes:
    records = []
    for i in range(40):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 5 else bytes([i]) * (i * 13)  # 0..507 bytes: 1-2 byte varints
        records.append((key, value, [("h", b"x")], 1_700_000_000_000 + i * 100_000))
    return build_batch(
        records, base_offset=1000, compression=codec, timestamp_type=1 if log_append else 0
    )


def reference(buf: bytes, magic: int, first_offset: int) -> bytes:
    header, recs = decode_records(buf, max_size=BOUND)
    kept = [(r.offset, r.timestamp, r.key, r.value) for r in recs if r.offset >= first_offset]
    lat = header.max_timestamp if header.timestamp_type else NO_TIMESTAMP
    return encode_message_set(kept, magic, header.compression, log_append_time=lat)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("log_append", [False, True])
@pytest.mark.parametrize("first_offset", [0, 1017])
def test_one_pass_conversion_matches_the_reference(
    codec: int, magic: int, log_append: bool, first_offset: int
) -> None:
    buf = batch(codec, log_append)
    got, count = convert_batch(buf, magic, first_offset, BOUND)
    want = reference(buf, magic, first_offset)
    assert count == 40 - max(0, first_offset - 1000)
    assert got == want
    msgs = decode_message_set(got)
    assert [m.offset for m in msgs] == list(range(max(first_offset, 1000), 1040))


def test_zstd_and_garbage() -> None:
    with pytest.raises(UnsupportedCompression):
        convert_batch(batch(ZSTD, False), 1, 0, BOUND)
    buf = bytearray(batch(NONE, False))
    buf[70:90] = b"\xff" * 20  # records overrun
    with pytest.raises(CorruptRecordError):
        convert_batch(bytes(buf), 1, 0, BOUND)
