"""Hostile RecordBatch v2 builders for tests and fuzzing (issue 11: batch contents).

Decompression bombs (a small compressed records section inflating to hundreds of megabytes or
more) and batches whose records' framing lies, each with a valid CRC so that only a look inside
the records section can catch them. The compressed streams are produced chunk by chunk, so
building a bomb never holds its inflated size in memory.
"""

from __future__ import annotations

import functools
import zlib

import cramjam
import lz4.frame
import zstandard

from odradek.wire.batch import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, MAGIC, write_crc
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, XERIAL_MAGIC, ZSTD

_CHUNK = bytes(1 << 20)


def raw_batch(
    section: bytes,
    records_count: int,
    *,
    codec: int = NONE,
    last_offset_delta: int | None = None,
    timestamp: int = 1_700_000_000_000,
) -> bytes:
    """A batch around a records section given as is (already compressed when `codec` is set),
    with a valid CRC; `last_offset_delta` defaults to records_count - 1."""
    out = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out,
        0,
        0,  # base offset
        HEADER_SIZE - LOG_OVERHEAD + len(section),
        -1,  # partition leader epoch
        MAGIC,
        0,  # crc, written below
        codec,
        records_count - 1 if last_offset_delta is None else last_offset_delta,
        timestamp,
        timestamp,
        -1,
        -1,
        -1,
        records_count,
    )
    out += section
    write_crc(out, 0)
    return bytes(out)


@functools.lru_cache(maxsize=8)
def bomb_section(codec: int, inflated_mib: int) -> bytes:
    """A `codec` stream of `inflated_mib` MiB of zero bytes, compressed chunk by chunk."""
    if codec == GZIP:
        c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        parts = [c.compress(_CHUNK) for _ in range(inflated_mib)]
        return b"".join(parts) + c.flush()
    if codec == ZSTD:
        z = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [z.compress(_CHUNK) for _ in range(inflated_mib)]
        return b"".join(parts) + z.flush()
    if codec == LZ4:
        f = lz4.frame.LZ4FrameCompressor(block_linked=False)
        parts = [f.begin()] + [f.compress(_CHUNK) for _ in range(inflated_mib)]
        tail: bytes = f.flush()  # lz4 is untyped
        return b"".join(parts) + tail
    if codec == SNAPPY:
        # xerial framing, 32 KiB blocks: snappy's ratio is capped near 21x, so this is the
        # "largest within max.message.bytes" kind of bomb rather than a gigabyte one
        block = bytes(cramjam.snappy.compress_raw(_CHUNK[: 32 * 1024]))
        framed = len(block).to_bytes(4, "big") + block
        header = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
        return header + framed * (inflated_mib * 32)
    raise ValueError(f"no bomb for codec {codec}")


def bomb_batch(codec: int, inflated_mib: int, records_count: int = 1000) -> bytes:
    """A valid-CRC batch whose compressed records section inflates to `inflated_mib` MiB."""
    return raw_batch(bomb_section(codec, inflated_mib), records_count, codec=codec)
