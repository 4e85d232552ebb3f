"""Compression codecs: round trips, the exact framings Kafka clients expect, garbage rejected."""

from __future__ import annotations

import gzip
import os
import struct
from types import SimpleNamespace

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from odradek.wire.batch import CorruptRecordError
from odradek.wire.compression import (
    CODECS,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    decompress,
)

ALL = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

PAYLOADS = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    os.urandom(5000),  # incompressible: lz4 stores it, snappy literals
    os.urandom(40_000) + b"\0" * 100_000,  # several xerial (32 KiB) and lz4 (64 KiB) blocks
]


def test_codec_names_are_kafkas() -> None:
    assert CODECS == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_round_trip(codec: int, payload: bytes) -> None:
    packed = compress(codec, payload)
    assert decompress(codec, packed) == payload
    assert decompress(codec, memoryview(packed)) == payload
    assert decompress(codec, bytearray(packed)) == payload
    assert compress(codec, memoryview(payload)) == packed or codec == GZIP


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_levels(codec: int) -> None:
    payload = b"level " * 5000
    for level in (1, 9):
        assert decompress(codec, compress(codec, payload, level=level)) == payload


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 100])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(CorruptRecordError, match="codec"):
        compress(codec, b"abc")
    with pytest.raises(CorruptRecordError, match="codec"):
        decompress(codec, b"abc")


# -- snappy: xerial framing ----------------------------------------------------------------


def _xerial_blocks(packed: bytes) -> list[bytes]:
    assert packed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    blocks, pos = [], 16
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(packed[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(packed)
    return blocks


def test_snappy_writes_xerial_blocks_of_32k() -> None:
    payload = os.urandom(32 * 1024) + b"a" * (32 * 1024) + b"tail"
    blocks = _xerial_blocks(compress(SNAPPY, payload))
    raw = [bytes(cramjam.snappy.decompress_raw(b)) for b in blocks]
    assert [len(r) for r in raw] == [32 * 1024, 32 * 1024, 4]
    assert b"".join(raw) == payload


def test_snappy_empty_input_is_a_raw_empty_block() -> None:
    # a header-only xerial stream is not recognised as xerial by kafka-python or librdkafka
    assert compress(SNAPPY, b"") == b"\x00"


def test_snappy_reads_raw_and_xerial() -> None:
    payload = b"raw snappy from librdkafka-style producers " * 100
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(payload))) == payload
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    two = b""
    for part in (payload[:1000], payload[1000:]):
        block = bytes(cramjam.snappy.compress_raw(part))
        two += struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, header + two) == payload
    assert decompress(SNAPPY, header) == b""


def test_snappy_cross_checked_with_kafka_python_framing(monkeypatch) -> None:
    # kafka-python's own xerial encoder/decoder over raw snappy blocks (python-snappy's role)
    raw = SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    monkeypatch.setattr(kafka_codec, "snappy", raw)
    for payload in (b"", b"a", os.urandom(20_000) + b"z" * 90_000):
        assert kafka_codec.snappy_decode(compress(SNAPPY, payload)) == payload
        assert decompress(SNAPPY, kafka_codec.snappy_encode(payload)) == payload


@pytest.mark.parametrize(
    "data",
    [
        XERIAL_MAGIC + b"\0\0\0\1",  # header cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\0\0",  # block length cut short
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, 100) + b"abc",  # block overruns
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, -5),  # negative block length
        b"\xff\xff\xff\xff\x0f\x00",  # raw block claiming 4 GiB
    ],
)
def test_snappy_garbage(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, data)


# -- lz4: frame format as Kafka writes it ----------------------------------------------------


def test_lz4_frame_layout() -> None:
    payload = b"lz4 " * 50_000  # 200 KB: four 64 KiB blocks
    packed = compress(LZ4, payload)
    # magic, FLG 0x60 (v01, independent blocks, no checksums), BD 0x40 (64 KiB), HC 0x82
    assert packed[:7] == bytes.fromhex("04224d18604082")
    assert packed[-4:] == b"\0\0\0\0"
    pos, sizes = 7, []
    while True:
        (n,) = struct.unpack_from("<I", packed, pos)
        if n == 0:
            break
        stored = n & 0x7FFFFFFF
        # every block decodes on its own, as Java's KafkaLZ4BlockInputStream needs
        alone = packed[:7] + packed[pos : pos + 4 + stored] + b"\0\0\0\0"
        sizes.append(len(decompress(LZ4, alone)))
        pos += 4 + stored
    assert pos == len(packed) - 4
    assert sizes == [65536, 65536, 65536, 200_000 - 3 * 65536]


def test_lz4_incompressible_blocks_are_stored() -> None:
    payload = os.urandom(1000)
    packed = compress(LZ4, payload)
    (n,) = struct.unpack_from("<I", packed, 7)
    assert n == 0x80000000 | 1000
    assert packed[11:1011] == payload


def test_lz4_reads_frames_with_checksums_and_linked_blocks() -> None:
    payload = b"frames from other writers " * 10_000
    assert decompress(LZ4, bytes(cramjam.lz4.compress(payload))) == payload
    c = cramjam.lz4.Compressor(content_checksum=True, block_linked=True)
    c.compress(payload)
    assert decompress(LZ4, bytes(c.finish())) == payload


# -- gzip and zstd ---------------------------------------------------------------------------


def test_gzip_matches_stdlib() -> None:
    payload = b"gzip " * 3000
    assert gzip.decompress(compress(GZIP, payload)) == payload
    assert decompress(GZIP, gzip.compress(payload)) == payload
    # several gzip members, as a concatenating writer may produce
    assert decompress(GZIP, gzip.compress(payload) + gzip.compress(b"!")) == payload + b"!"


def test_zstd_streamed_frame_without_content_size() -> None:
    payload = b"zstd streaming " * 5000
    c = cramjam.zstd.Compressor()
    c.compress(payload)
    assert decompress(ZSTD, bytes(c.finish())) == payload


# -- properties ------------------------------------------------------------------------------


@given(st.sampled_from(ALL), st.binary(max_size=3000))
def test_round_trip_anything(codec: int, payload: bytes) -> None:
    assert decompress(codec, compress(codec, payload)) == payload


_PREFIXES = [
    b"",
    XERIAL_MAGIC + struct.pack(">ii", 1, 1),
    bytes.fromhex("04224d18604082"),
    bytes.fromhex("04224d186840c7"),
    bytes.fromhex("28b52ffd"),
    bytes.fromhex("1f8b0800000000000000"),
]


@settings(max_examples=300)
@given(st.integers(-2, 9), st.sampled_from(_PREFIXES), st.binary(max_size=200))
def test_garbage_only_raises_corrupt_record(codec: int, prefix: bytes, tail: bytes) -> None:
    try:
        decompress(codec, prefix + tail)
    except CorruptRecordError:
        pass


@settings(max_examples=100)
@given(st.sampled_from(ALL[1:]), st.binary(min_size=1, max_size=500), st.data())
def test_damaged_streams_only_raise_corrupt_record(codec: int, payload: bytes, data) -> None:
    packed = bytearray(compress(codec, payload))
    cut = data.draw(st.integers(0, len(packed)))
    flips = data.draw(st.lists(st.integers(0, len(packed) - 1), max_size=3))
    for i in flips:
        packed[i] ^= 0xFF
    try:
        decompress(codec, bytes(packed[:cut]))
    except CorruptRecordError:
        pass
