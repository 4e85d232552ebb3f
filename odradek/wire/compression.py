"""Record batch compression codecs, as Kafka's CompressionType (attributes bits 0-2).

A compressed RecordBatch v2 keeps its 61-byte header in the clear and compresses the records
section as one stream. Codec ids and the stream format each Kafka client expects:

    0  none
    1  gzip    RFC 1952 gzip stream (Java's GZIPOutputStream)
    2  snappy  xerial snappy-java framing, as the Java client writes; raw snappy also accepted
    3  lz4     LZ4 frame format with independent blocks (Kafka's KafkaLZ4BlockOutputStream)
    4  zstd    zstd frame format (KIP-110)

Snappy, xerial framing (snappy-java's SnappyOutputStream; librdkafka and Java read it):

    offset  size  field
    0       8     magic            b"\\x82SNAPPY\\x00"
    8       4     version          int32 BE, 1
    12      4     compat version   int32 BE, 1
    16      ...   blocks, repeated until the end:
                    4    compressed length  int32 BE
                    n    raw snappy block of at most 32 KiB uncompressed

LZ4 frame (as Kafka writes it; any valid frame is read):

    offset  size  field
    0       4     magic            0x184D2204 little-endian
    4       1     FLG              0x60: version 01, independent blocks, no checksums
    5       1     BD               0x40: 64 KiB maximum block size
    6       1     HC               (xxh32(FLG BD) >> 8) & 0xFF = 0x82
    7       ...   blocks: uint32 LE size (high bit set = stored uncompressed), then the data
    end     4     end mark         0x00000000

Java's LZ4 reader decompresses each block on its own, so blocks must be independent.
"""

from __future__ import annotations

import struct

import cramjam

from odradek.wire.batch import CorruptRecordError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODECS: dict[str, int] = {
    "none": NONE,
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK = 32 * 1024

_LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"

# Kafka's defaults: zstd level 3 (zstd's own default), gzip level 6 (Deflater's default).
_ZSTD_LEVEL = 3
_GZIP_LEVEL = 6

_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")

# A raw snappy element expands at most 64 bytes from 3 input bytes, so a block claiming more
# than this per input byte is corrupt; checking it first avoids allocating for a bogus size.
_SNAPPY_MAX_RATIO = 22


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a records section with `codec`; `level` overrides the codec's default."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=_GZIP_LEVEL if level is None else level))
    if codec == SNAPPY:
        return _xerial_encode(data)
    if codec == LZ4:
        return _lz4_frame_encode(data, level)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL if level is None else level))
    raise CorruptRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a records section; any malformed input raises CorruptRecordError."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decode(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from None
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _xerial_encode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if not view:
        # kafka-python and librdkafka take xerial framing only when more than the 16-byte
        # header is present; an empty raw snappy block (b"\x00") reads as empty everywhere
        return bytes(cramjam.snappy.compress_raw(b""))
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return _snappy_raw(view)
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CorruptRecordError("truncated xerial snappy header")
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"truncated xerial snappy block length at {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes overruns the data")
        out += _snappy_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


def _snappy_raw(block: memoryview) -> bytes:
    claimed = cramjam.snappy.decompress_raw_len(block)
    if claimed > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise CorruptRecordError(f"snappy block claims {claimed} bytes from {len(block)}")
    return bytes(cramjam.snappy.decompress_raw(block))


def _lz4_frame_encode(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    view = memoryview(data)
    out = bytearray(_LZ4_FRAME_HEADER)
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        if level is None:
            block = cramjam.lz4.compress_block(chunk, store_size=False)
        else:
            block = cramjam.lz4.compress_block(
                chunk, mode="high_compression", compression=level, store_size=False
            )
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED)
            out += chunk
    out += _LZ4_END_MARK
    return bytes(out)
