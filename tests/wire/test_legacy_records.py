"""The magic 0/1 message-set codec (odradek/wire/legacy_records.py) against kafka-python's own
legacy reader and builder: what we write old clients read back, what old clients write we
read, and malformed sets raise the error Kafka answers with."""

from __future__ import annotations

import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from odradek.wire import legacy_records as L
from odradek.wire.batch import CorruptRecordError, InvalidRecordError
from odradek.wire.compression import GZIP, LZ4, SNAPPY, ZSTD, compress

CODECS = [0, GZIP, SNAPPY, LZ4]
RECORDS = [
    (10 + i, 1_700_000_000_000 + i, b"k%d" % i if i % 2 else None, b"v%d" % i) for i in range(5)
]


def read_with_kafka_python(buf: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    records = MemoryRecords(buf)
    out = []
    while records.has_next():
        for r in records.next_batch():
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("log_append_time", [-1, 1_800_000_000_000])
def test_kafka_python_reads_what_we_write(magic: int, codec: int, log_append_time: int) -> None:
    buf = L.encode_message_set(RECORDS, magic, codec, log_append_time=log_append_time)
    if magic == 0:
        expected_ts = [None] * len(RECORDS)
    elif log_append_time >= 0:
        expected_ts = [log_append_time] * len(RECORDS)
    else:
        expected_ts = [t for _o, t, _k, _v in RECORDS]
    expected = [(o, ts, k, v) for (o, _t, k, v), ts in zip(RECORDS, expected_ts, strict=True)]
    assert read_with_kafka_python(buf) == expected
    ours = [(m.offset, m.timestamp, m.key, m.value) for m in L.decode_message_set(buf)]
    assert ours == [(o, -1 if ts is None else ts, k, v) for o, ts, k, v in expected]
    if codec == 0:
        assert len(buf) == L.message_set_size(RECORDS, magic)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_we_read_what_kafka_python_writes(magic: int, codec: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(4):
        ts = 1_700_000_000_000 + i if magic else None
        builder.append(i, timestamp=ts, key=b"k" if i else None, value=b"v%d" % i)
    got = [(m.offset, m.timestamp, m.key, m.value) for m in L.decode_message_set(builder.build())]
    assert got == [
        (i, 1_700_000_000_000 + i if magic else -1, b"k" if i else None, b"v%d" % i)
        for i in range(4)
    ]


def wrapper(inner: bytes, magic: int = 1, codec: int = GZIP, offset: int = 0) -> bytes:
    out = bytearray()
    L.write_message(out, offset, magic, codec, 1_700_000_000_000, None, compress(codec, inner))
    return bytes(out)


def test_bad_inner_crc_is_corrupt() -> None:
    inner = bytearray(L.encode_message_set(RECORDS[:3], 1))
    inner[-1] ^= 0xFF  # the last inner message's value, under its CRC
    with pytest.raises(CorruptRecordError, match="CRC") as err:
        L.decode_message_set(wrapper(bytes(inner)))
    assert not isinstance(err.value, InvalidRecordError)


def test_inner_offsets_going_backwards_are_invalid() -> None:
    inner = bytearray()
    for rel in (0, 2, 1):
        L.write_message(inner, rel, 1, 0, 1_700_000_000_000, None, b"x")
    with pytest.raises(InvalidRecordError, match="out of order"):
        L.decode_message_set(wrapper(bytes(inner), offset=2))


def test_inner_offsets_that_repeat_are_renumbered_as_kafka_does() -> None:
    inner = bytearray()
    for _ in range(3):  # some old clients wrote 0 for every inner message
        L.write_message(inner, 0, 1, 0, 1_700_000_000_000, None, b"x")
    assert len(L.decode_message_set(wrapper(bytes(inner)))) == 3


def test_magic0_message_laid_out_with_a_timestamp_is_invalid() -> None:
    as_v1 = bytearray(L.encode_message_set([(0, 1_700_000_000_000, b"k", b"v")], 1))
    as_v1[16] = 0  # magic 0, but the bytes still hold magic 1's timestamp field
    as_v1[12:16] = zlib.crc32(as_v1[16:]).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="magic 0"):
        L.decode_message_set(bytes(as_v1))
    flagged = bytearray(L.encode_message_set([(0, -1, b"k", b"v")], 0))
    flagged[17] |= L.TIMESTAMP_TYPE_MASK
    flagged[12:16] = zlib.crc32(flagged[16:]).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="timestamp"):
        L.decode_message_set(bytes(flagged))


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (lambda b: b[:-1], CorruptRecordError),  # truncated
        (lambda b: b[:15] + bytes([b[15] ^ 1]) + b[16:], CorruptRecordError),  # outer CRC
        (lambda b: wrapper(b, magic=0), InvalidRecordError),  # magic 1 inside a magic 0 wrapper
        (lambda b: wrapper(wrapper(b)), InvalidRecordError),  # nested compression
        (lambda b: b[:17] + bytes([ZSTD]) + b[18:], CorruptRecordError),  # CRC covers attributes
    ],
)
def test_malformed_sets(mangle: object, error: type[Exception]) -> None:
    buf = L.encode_message_set(RECORDS[:2], 1)
    with pytest.raises(error):
        L.decode_message_set(mangle(buf))  # type: ignore[operator]


def test_zstd_wrapper_and_zstd_encoding_refused() -> None:
    inner = L.encode_message_set(RECORDS[:2], 1)
    with pytest.raises(InvalidRecordError, match="codec"):
        L.decode_message_set(wrapper(inner, codec=ZSTD))
    with pytest.raises(ValueError, match="codec"):
        L.encode_message_set(RECORDS, 1, ZSTD)


def test_magic0_lz4_carries_kafkas_broken_header_checksum() -> None:
    buf = L.encode_message_set(RECORDS, 0, LZ4)
    (outer,) = L.iter_messages(buf)
    assert outer.value is not None
    frame = outer.value
    assert frame[6] == (L.xxh32(frame[0:6]) >> 8) & 0xFF  # KAFKA-3160: magic included
    assert frame[6] != (L.xxh32(frame[4:6]) >> 8) & 0xFF
    assert [m.value for m in L.decode_message_set(buf)] == [v for _o, _t, _k, v in RECORDS]
