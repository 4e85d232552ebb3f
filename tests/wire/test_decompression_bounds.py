"""Decompression is bounded (issue 11, defect 2): a small batch declaring gigabytes costs at most
the bound, for every codec and for every reader of batches (decode_records)."""

from __future__ import annotations

import os
import tracemalloc

import pytest

from odradek.testing.hostile_batches import bomb_batch, bomb_section
from odradek.wire.batch import CorruptRecordError
from odradek.wire.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
    max_decompressed_size,
)
from odradek.wire.records import build_batch, decode_records

MiB = 1 << 20
BOUND = 4 * MiB

# (codec, inflated MiB): the zstd one is the 35 KB batch declaring ~1 GB
BOMBS = [(ZSTD, 1024), (GZIP, 256), (LZ4, 256), (SNAPPY, 32)]


@pytest.mark.parametrize(("codec", "mib"), BOMBS, ids=lambda v: str(v))
def test_bomb_stops_at_the_bound_without_allocating_its_size(codec: int, mib: int) -> None:
    section = bomb_section(codec, mib)
    if codec == ZSTD:
        assert len(section) < 40_000  # the 35 KB batch declaring 1 GB
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="exceed"):
            decompress(codec, section, BOUND)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # output is held in chunks up to the bound, then dropped: never the declared size
    assert peak < 3 * BOUND


@pytest.mark.parametrize(("codec", "mib"), BOMBS, ids=lambda v: str(v))
def test_decode_records_refuses_a_bomb_batch(codec: int, mib: int) -> None:
    batch = bomb_batch(codec, mib)
    with pytest.raises(CorruptRecordError):
        decode_records(batch, max_size=BOUND)
    # the default bound (for readers without a topic config) holds too
    if mib * MiB > DEFAULT_MAX_DECOMPRESSED:
        with pytest.raises(CorruptRecordError, match="exceed"):
            decode_records(batch)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_output_of_exactly_the_bound_is_allowed(codec: int) -> None:
    payload = os.urandom(1000) * 100  # 100,000 bytes
    packed = compress(codec, payload)
    assert decompress(codec, packed, len(payload)) == payload
    with pytest.raises(CorruptRecordError, match="exceed"):
        decompress(codec, packed, len(payload) - 1)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_an_empty_section_reads_as_empty(codec: int) -> None:
    """Compaction empties a compressed batch's records but keeps its codec bits."""
    assert decompress(codec, b"", BOUND) == b""


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_valid_batches_still_decode(codec: int) -> None:
    records = [(b"k%d" % i, os.urandom(300), [("h", b"v")], 1000 + i) for i in range(500)]
    batch = build_batch(records, compression=codec)
    _h, got = decode_records(batch, max_size=BOUND)
    assert [(r.key, r.value, r.headers) for r in got] == [
        (k, v, list(h)) for k, v, h, _t in records
    ]


def test_bound_follows_max_message_bytes() -> None:
    assert max_decompressed_size(1048588) == 16 * 1048588
    assert max_decompressed_size(1000) == 16 * MiB  # never below 16 MiB
    assert max_decompressed_size(8 * MiB) == 128 * MiB


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_truncated_stream_is_not_read_as_valid_records(codec: int) -> None:
    records = [(b"k", b"v" * 100, (), 1000 + i) for i in range(50)]
    batch = build_batch(records, compression=codec)
    h_size = 61
    section = batch[h_size:]
    cut = section[: len(section) // 2]
    try:
        data = decompress(codec, cut, BOUND)
    except CorruptRecordError:
        return
    # zstd's reader ends quietly on a cut-off frame: what it gives is a strict prefix
    assert len(data) < len(decompress(codec, section, BOUND))
