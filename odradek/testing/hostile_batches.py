"""Hostile RecordBatch v2 builders for tests and fuzzing: batch contents.

Decompression bombs (a small compressed records section inflating to hundreds of megabytes or
more) and batches whose records' framing lies, each with a valid CRC so that only a look inside
the records section can catch them. The compressed streams are produced chunk by chunk, so
building a bomb never holds its inflated size in memory. `record` writes one record with knobs
to make its framing lie; `good_records` a valid records section.
"""

from __future__ import annotations

import functools
import zlib

import cramjam
import lz4.frame
import zstandard

from odradek.wire.batch import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, MAGIC, write_crc
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, XERIAL_MAGIC, ZSTD
from odradek.wire.records import write_varint, write_varlong

_CHUNK = bytes(1 << 20)


def record(
    offset_delta: int,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: list[tuple[bytes, bytes | None]] | None = None,
    *,
    timestamp_delta: int = 0,
    length_fix: int = 0,
    key_length: int | None = None,
    value_length: int | None = None,
    header_count: int | None = None,
) -> bytes:
    """One record's bytes, with knobs to make its framing lie: `length_fix` is added to the
    record's length; `key_length`, `value_length` and `header_count` replace the true ones."""
    body = bytearray(b"\x00")
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    for part, forced in ((key, key_length), (value, value_length)):
        if forced is not None:
            write_varint(body, forced)
        elif part is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(part))
        if part is not None:
            body += part
    headers = headers or []
    write_varint(body, len(headers) if header_count is None else header_count)
    for name, hv in headers:
        write_varint(body, len(name))
        body += name
        if hv is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hv))
            body += hv
    out = bytearray()
    write_varint(out, len(body) + length_fix)
    return bytes(out + body)


def good_records(n: int) -> bytes:
    """A valid records section of `n` records (offset deltas 0..n-1, each with a header)."""
    return b"".join(record(i, b"key-%d" % i, b"value-%d" % i, [(b"h", b"x")]) for i in range(n))


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
