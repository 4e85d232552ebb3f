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

Decompression is bounded (decompression bombs): every codec is read as a stream and
stops with CorruptRecordError as soon as the output would pass the caller's `max_size`, so a
35 KB batch declaring gigabytes costs at most `max_size` bytes, never the declared size. Kafka
streams records out of a compressed batch one at a time inside a bounded JVM heap; we hold a
batch's records section whole, so the bound is explicit: `max_decompressed_size` derives it from
`max.message.bytes`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.frame
import zstandard

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


# Bound on a decompressed records section: 16 times the larger of max.message.bytes and 1 MiB.
# librdkafka caps a batch's *uncompressed* size at message.max.bytes (1 MB) and the Java producer
# fills batch.size (16 KiB) by an estimated compression ratio, so real batches sit far below;
# 16x a full-size batch is beyond what text or JSON reach (5-10x) and still caps what one
# hostile batch can make the broker allocate at 16 MiB with the defaults.
DECOMPRESSION_RATIO = 16
_MIN_BOUND_BASE = 1 << 20
# For callers that know no topic config (coordinator loaders): 32 MiB.
DEFAULT_MAX_DECOMPRESSED = 32 << 20

# Output is produced in chunks of at most this much, so a lying size field allocates no more.
_CHUNK = 1 << 20
# zstd's decoder keeps a window of history; its default limit is 128 MiB (windowLog 27).
_ZSTD_MAX_WINDOW_LOG = 27
_ZSTD_MIN_WINDOW_LOG = 20
_GZIP_WBITS = 16 + zlib.MAX_WBITS


def max_decompressed_size(max_message_bytes: int) -> int:
    """The largest records section a batch may inflate to, for a topic's max.message.bytes."""
    return DECOMPRESSION_RATIO * max(max_message_bytes, _MIN_BOUND_BASE)


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


def decompress(
    codec: int, data: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress a records section of at most `max_size` bytes.

    Malformed input, or output that would pass `max_size`, raises CorruptRecordError; no more
    than about `max_size` bytes are ever allocated for the output.
    """
    if codec == NONE:
        return bytes(data)
    if codec not in (GZIP, SNAPPY, LZ4, ZSTD):
        raise CorruptRecordError(f"unknown compression codec {codec}")
    if not len(data):
        return b""  # a batch emptied by compaction keeps its codec bits but no stream
    try:
        if codec == GZIP:
            return _gzip_decode(data, max_size)
        if codec == SNAPPY:
            return _snappy_decode(data, max_size)
        if codec == LZ4:
            return _lz4_decode(data, max_size)
        return _zstd_decode(data, max_size)
    except (cramjam.DecompressionError, zlib.error, zstandard.ZstdError, RuntimeError) as exc:
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from None


def _over(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed records exceed {max_size} bytes")


def _decode_members(
    data: bytes | bytearray | memoryview,
    max_size: int,
    new: Callable[[], Any],
    step: Callable[[Any, bytes | bytearray | memoryview, int], bytes],
    rest: Callable[[Any, bytes, int], bytes | None],
    what: str,
) -> bytes:
    """Inflate concatenated members (gzip) or frames (lz4) at most `_CHUNK` bytes at a time,
    refusing to go past `max_size`. `new()` makes a decompressor, `step(d, input, want)` gives
    up to `want` bytes, `rest(d, chunk, want)` the input still to feed a decompressor not at its
    end (None: the stream is cut short)."""
    chunks: list[bytes] = []
    total = 0
    pending: bytes | bytearray | memoryview = data
    d = new()
    while True:
        want = min(_CHUNK, max_size + 1 - total)
        chunk = step(d, pending, want)
        total += len(chunk)
        if total > max_size:
            raise _over(max_size)
        chunks.append(chunk)
        if d.eof:
            if not d.unused_data:
                return b"".join(chunks)
            pending = d.unused_data
            d = new()
        else:
            more = rest(d, chunk, want)
            if more is None:
                raise CorruptRecordError(f"truncated {what}")
            pending = more


def _gzip_decode(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """One or more gzip members (Java's GZIPInputStream reads concatenated members too)."""
    return _decode_members(
        data,
        max_size,
        lambda: zlib.decompressobj(_GZIP_WBITS),
        lambda d, pending, want: d.decompress(pending, want),
        lambda d, chunk, want: (
            d.unconsumed_tail if d.unconsumed_tail or len(chunk) == want else None
        ),
        "gzip stream",
    )


def _lz4_decode(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """One or more LZ4 frames, independent or linked blocks, with or without checksums."""
    return _decode_members(
        data,
        max_size,
        lz4.frame.LZ4FrameDecompressor,
        lambda d, pending, want: d.decompress(pending, max_length=want),
        lambda d, chunk, want: None if d.needs_input else b"",
        "lz4 frame",
    )


def _zstd_decode(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """One or more zstd frames; a frame wanting a window larger than the bound is refused."""
    window_log = min(max(max_size.bit_length(), _ZSTD_MIN_WINDOW_LOG), _ZSTD_MAX_WINDOW_LOG)
    dctx = zstandard.ZstdDecompressor(max_window_size=1 << window_log)
    reader = dctx.stream_reader(data, read_across_frames=True)
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        declared = -1
    chunks: list[bytes] = []
    total = 0
    # a size from the frame header is only a hint: one read of it (+1 to see an overrun)
    want = declared + 1 if 0 <= declared <= max_size else min(_CHUNK, max_size + 1)
    while True:
        chunk = reader.read(want)
        if not chunk:
            # the reader ends quietly on a cut-off frame: the record walk catches the shortfall
            return b"".join(chunks)
        total += len(chunk)
        if total > max_size:
            raise _over(max_size)
        chunks.append(chunk)
        want = min(_CHUNK, max_size + 1 - total)


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


def _snappy_decode(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return _snappy_raw(view, max_size)
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CorruptRecordError("truncated xerial snappy header")
    chunks: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"truncated xerial snappy block length at {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes overruns the data")
        block = _snappy_raw(view[pos : pos + length], max_size - total)
        total += len(block)
        chunks.append(block)
        pos += length
    return b"".join(chunks)


def _snappy_raw(block: memoryview, max_size: int) -> bytes:
    # a raw snappy block starts with its uncompressed length: checked before allocating it
    claimed = cramjam.snappy.decompress_raw_len(block)
    if claimed > max_size:
        raise _over(max_size)
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
