"""Compressed records sections as streams, for produce-time validation (Kafka's LogValidator).

Kafka validates a compressed batch by reading its records one at a time from a decompressing
InputStream (DefaultRecordBatch.skipKeyValueIterator), so what a batch inflates to costs time,
never memory, and no ratio is refused. `open_inflater` gives the same: a reader whose `read(n)`
returns the next at most `n` decompressed bytes (b"" at the end), whatever the stream declares,
so memory stays bounded by `n` plus the codec's own state:

    codec   state kept while reading
    gzip    zlib's 32 KiB window; concatenated members are read as Java's GZIPInputStream does
    lz4     one frame block (64 KiB as Kafka writes them, at most 4 MiB)
    zstd    the frame's window, at most 2^ZSTD_MAX_WINDOW_LOG (a frame asking more is refused)
    snappy  one xerial block (32 KiB as Java writes them); raw snappy (librdkafka) is one block,
            at most _SNAPPY_MAX_RATIO times its compressed size, checked before it is inflated

`StreamEncoder` is the other way, for a topic whose compression.type differs from the batch's
codec: decompressed chunks in, the topic codec's stream out, refused once it passes a limit.

Malformed input raises CorruptRecordError (CORRUPT_MESSAGE), as compression.decompress does.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from odradek.wire.batch import CorruptRecordError
from odradek.wire.compression import (
    GZIP,
    LZ4,
    LZ4_END_MARK,
    LZ4_FRAME_HEADER,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    lz4_block,
    snappy_raw_view,
    xerial_block,
    xerial_header,
)

# A zstd frame names the window its decoder must keep. Kafka's zstd-jni allows 2^27 (128 MiB);
# frames from compression levels up to 19 use at most 2^23, and an attacker's frame would make
# each validation hold its window, so it is capped at 32 MiB (levels 20-22 on large batches
# need more and are refused, CORRUPT_MESSAGE, as before streaming).
ZSTD_MAX_WINDOW_LOG = 25

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_ERRORS = (cramjam.DecompressionError, zlib.error, zstandard.ZstdError, RuntimeError)


class Inflater:
    """The decompressed bytes of a records section, read piece by piece."""

    def read(self, n: int) -> bytes | memoryview:
        """The next at most `n` (> 0) decompressed bytes; empty only at the end."""
        raise NotImplementedError

    def upcoming(self) -> int:
        """Bytes the next read inflates at once whatever it is asked for (a snappy block), so
        that a caller keeping to a budget can leave it to a worker thread; 0 when reads are
        bounded by what they ask."""
        return 0


class _Plain(Inflater):
    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data)
        self._pos = 0

    def read(self, n: int) -> bytes | memoryview:
        start = self._pos
        self._pos = min(start + n, len(self._view))
        return self._view[start : self._pos]


class _Gzip(Inflater):
    """One or more gzip members."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._d = zlib.decompressobj(_GZIP_WBITS)
        self._pending: bytes | memoryview = memoryview(data)

    def read(self, n: int) -> bytes | memoryview:
        while True:
            d = self._d
            if d.eof:
                if not d.unused_data:
                    return b""
                self._pending = d.unused_data
                d = self._d = zlib.decompressobj(_GZIP_WBITS)
            out = d.decompress(self._pending, n)
            self._pending = d.unconsumed_tail
            if out:
                return out
            if not d.eof and not self._pending:
                raise CorruptRecordError("truncated gzip stream")


class _Lz4(Inflater):
    """One or more LZ4 frames, independent or linked blocks, with or without checksums."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._d = lz4.frame.LZ4FrameDecompressor()
        self._pending: bytes | memoryview = memoryview(data)

    def read(self, n: int) -> bytes | memoryview:
        while True:
            d = self._d
            if d.eof:
                if not d.unused_data:
                    return b""
                self._pending = d.unused_data
                d = self._d = lz4.frame.LZ4FrameDecompressor()
            out: bytes = d.decompress(self._pending, max_length=n)
            self._pending = b""  # the decompressor keeps what it did not use
            if out:
                return out
            if not d.eof and d.needs_input:
                raise CorruptRecordError("truncated lz4 frame")


class _Zstd(Inflater):
    """One or more zstd frames (a cut-off frame ends quietly; the record walk sees it short)."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        dctx = zstandard.ZstdDecompressor(max_window_size=1 << ZSTD_MAX_WINDOW_LOG)
        self._reader = dctx.stream_reader(data, read_across_frames=True)
        # the size a frame header declares is a hint for the first read only (the reader
        # allocates what it is asked for): a liar gets a short read or a second one
        try:
            self._hint = zstandard.frame_content_size(data)
        except zstandard.ZstdError:
            self._hint = -1

    def read(self, n: int) -> bytes | memoryview:
        if 0 <= self._hint < n:
            n = self._hint + 1
        self._hint = -1
        chunk: bytes = self._reader.read(n)
        return chunk


class _Snappy(Inflater):
    """Xerial framing block by block, or one raw snappy block."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data)
        self._blocks = self._view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC
        if self._blocks and len(self._view) < len(xerial_header()):
            raise CorruptRecordError("truncated xerial snappy header")
        self._pos = len(xerial_header()) if self._blocks else 0
        self._block = memoryview(b"")
        self._at = 0

    def upcoming(self) -> int:
        if self._at < len(self._block) or self._pos >= len(self._view):
            return 0
        start = self._pos + (4 if self._blocks else 0)
        try:
            size: int = cramjam.snappy.decompress_raw_len(self._view[start : start + 10])
        except _ZLIB_ERRORS:
            return 0  # the read itself names the fault
        return size

    def read(self, n: int) -> bytes | memoryview:
        while self._at >= len(self._block):
            view, pos = self._view, self._pos
            if pos >= len(view):
                return b""
            if not self._blocks:
                self._block, self._pos = snappy_raw_view(view), len(view)
            else:
                self._block, self._pos = xerial_block(view, pos)
            self._at = 0
        start = self._at
        self._at = min(start + n, len(self._block))
        return self._block[start : self._at]


_INFLATERS: dict[int, Callable[[bytes | bytearray | memoryview], Inflater]] = {
    GZIP: _Gzip,
    SNAPPY: _Snappy,
    LZ4: _Lz4,
    ZSTD: _Zstd,
}


class _Guarded(Inflater):
    """Codec errors as CorruptRecordError."""

    def __init__(self, codec: int, inner: Inflater) -> None:
        self._codec = codec
        self._inner = inner

    def upcoming(self) -> int:
        return self._inner.upcoming()

    def read(self, n: int) -> bytes | memoryview:
        try:
            return self._inner.read(n)
        except _ZLIB_ERRORS as exc:
            raise CorruptRecordError(f"cannot decompress codec {self._codec}: {exc}") from None


def open_inflater(codec: int, data: bytes | bytearray | memoryview) -> Inflater:
    """A reader of the records section `data` compressed with `codec` (Kafka's
    Compression.wrapForInput); an empty section (a batch emptied by compaction) reads empty."""
    if codec == NONE or not len(data):
        return _Plain(data)
    cls = _INFLATERS.get(codec)
    if cls is None:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    try:
        return _Guarded(codec, cls(data))
    except _ZLIB_ERRORS as exc:
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from None


class OutputTooLarge(Exception):
    """A recompressed records section passed its limit (Kafka's RecordTooLargeException)."""


_LZ4_BLOCK = 64 * 1024
_XERIAL_BLOCK = 32 * 1024


class StreamEncoder:
    """A records section compressed with `codec` as its decompressed bytes arrive, refusing
    (OutputTooLarge) once the output passes `limit` bytes. The bytes are the ones
    compression.compress writes for gzip, lz4 and snappy; zstd is one frame without a content
    size (any reader takes it)."""

    def __init__(self, codec: int, limit: int) -> None:
        self.codec = codec
        self.limit = limit
        self.out = bytearray()
        self._pending = bytearray()  # lz4 / snappy: the part of a block still to fill
        self._z: zlib._Compress | None = None
        self._zstd: zstandard.ZstdCompressionObj | None = None
        if codec == GZIP:
            self._z = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
        elif codec == ZSTD:
            self._zstd = zstandard.ZstdCompressor(level=3).compressobj()
        elif codec == LZ4:
            self.out += LZ4_FRAME_HEADER
        elif codec != NONE and codec != SNAPPY:
            raise CorruptRecordError(f"unknown compression codec {codec}")

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        codec = self.codec
        if codec == NONE:
            self.out += data
        elif self._z is not None:
            self.out += self._z.compress(data)
        elif self._zstd is not None:
            self.out += self._zstd.compress(data)
        else:
            self._pending += data
            size = _LZ4_BLOCK if codec == LZ4 else _XERIAL_BLOCK
            if len(self._pending) >= size:
                whole = len(self._pending) - len(self._pending) % size
                view = memoryview(self._pending)
                for start in range(0, whole, size):
                    self._block(view[start : start + size])
                view.release()
                del self._pending[:whole]
        if len(self.out) > self.limit:
            raise OutputTooLarge(f"recompressed records pass {self.limit} bytes")

    def _block(self, data: memoryview) -> None:
        if self.codec == LZ4:
            self.out += lz4_block(data)
        else:
            if not self.out:
                self.out += xerial_header()
            self.out += xerial_block_encode(data)

    def finish(self) -> bytes | bytearray:
        if self._z is not None:
            self.out += self._z.flush()
        elif self._zstd is not None:
            self.out += self._zstd.flush()
        elif self.codec in (LZ4, SNAPPY):
            if self._pending:
                self._block(memoryview(self._pending))
            if self.codec == LZ4:
                self.out += LZ4_END_MARK
            elif not self.out:
                self.out += cramjam.snappy.compress_raw(b"")
        if len(self.out) > self.limit:
            raise OutputTooLarge(f"recompressed records pass {self.limit} bytes")
        return self.out


def xerial_block_encode(data: bytes | bytearray | memoryview) -> bytes:
    """One xerial block: its int32 BE length and a raw snappy block."""
    block = bytes(cramjam.snappy.compress_raw(data))
    return len(block).to_bytes(4, "big") + block
