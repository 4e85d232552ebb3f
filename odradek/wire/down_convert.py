"""Down-conversion of RecordBatch v2 to magic 0/1 message sets, for Fetch v0-3 (issue 16).

As Kafka's RecordsUtil.downConvert / LazyDownConversionRecords: a fetcher that speaks Fetch v0-1
reads magic 0 messages, v2-3 magic 1 (timestamps). Each v2 batch becomes, uncompressed, one
message per record, or, compressed, one wrapper message holding the records compressed with the
same codec (zstd has no magic 0/1 form: Kafka answers UNSUPPORTED_COMPRESSION_TYPE). Headers are
dropped; control batches and aborted transactions are left out (the fetch handler's filter);
records below the fetch offset are left out too (the client would skip them).

The message format itself (and magic 0 lz4's broken header checksum) is legacy_records.py's
`encode_message_set`; this module decides what is converted, and when.

`LazyDownConversion` is the lazily converted records of one partition: a Fetch response piece of
a fixed `length` whose bytes are produced chunk by chunk while the connection writes them, so a
large fetch never holds more than a chunk (CHUNK bytes of source batches) of converted data.
As Kafka's LazyDownConversionRecordsSend: `length` is the fetched region's size, or the first
converted batch's when larger (a consumer needs one whole message to progress); what converts to
more is cut short (the client drops the trailing partial message and fetches again from there),
what converts to less is padded with an "overflow" message whose size runs past the response
(also dropped by every client as a partial message).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from odradek.wire.batch import (
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptRecordError,
    parse_header,
)
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from odradek.wire.legacy_records import NO_TIMESTAMP, encode_message_set
from odradek.wire.records import decode_records
from odradek.wire.regions import ChunkedPiece

if TYPE_CHECKING:
    from odradek.wire.regions import FileRegion

log = logging.getLogger(__name__)

CHUNK = 256 * 1024  # source bytes converted at once, and the size of the pieces written
_LEGACY_CODECS = (NONE, GZIP, SNAPPY, LZ4)
_OVERFLOW_HEAD = struct.Struct(">qi")


class UnsupportedCompression(ValueError):
    """A batch whose codec (zstd) has no magic 0/1 form."""


def convert_batch(
    buf: bytes | bytearray | memoryview, magic: int, first_offset: int, max_size: int
) -> tuple[bytes, int]:
    """One whole v2 batch as a magic 0/1 message set: (bytes, records converted).

    Records below `first_offset` are left out; a batch left with none converts to b"". Raises
    UnsupportedCompression for zstd, CorruptRecordError for a batch that cannot be decoded.
    """
    header, records = decode_records(buf, max_size=max_size)
    codec = header.compression
    if codec not in _LEGACY_CODECS:
        raise UnsupportedCompression(f"codec {codec} has no magic {magic} form")
    recs = [(r.offset, r.timestamp, r.key, r.value) for r in records if r.offset >= first_offset]
    if not recs:
        return b"", 0
    append_time = header.max_timestamp if header.timestamp_type else NO_TIMESTAMP
    return encode_message_set(recs, magic, codec, log_append_time=append_time), len(recs)


# -- the lazy, chunked records of one partition ---------------------------------------------------

# (producer_id, first_offset, last_offset) of aborted transactions from an offset on
AbortedLookup = Callable[[int], list[tuple[int, int, int]]]
# records converted, converted bytes sent: the metrics' hook
ConversionHook = Callable[[int, int], None]


class LazyDownConversion(ChunkedPiece):
    """A partition's records for Fetch v0-3, converted from `region` while being written.

    Build it with `prepare()`; `length` is then fixed and `chunks()` yields exactly that many
    bytes. `error` is set (and `length` 0) when the first convertible batch is zstd;
    `skipped_to` is the offset after the region when nothing in it converts (only control
    batches or aborted data), so the caller may read on from there.
    """

    __slots__ = (
        "region",
        "magic",
        "first_offset",
        "max_size",
        "length",
        "unsupported",
        "skipped_to",
        "records",
        "_aborted_lookup",
        "_aborted",
        "_first",
        "_first_records",
        "_resume",
        "on_converted",
    )

    def __init__(
        self,
        region: FileRegion,
        magic: int,
        first_offset: int,
        max_size: int,
        aborted_lookup: AbortedLookup,
        on_converted: ConversionHook | None = None,
    ) -> None:
        self.region = region
        self.magic = magic
        self.first_offset = first_offset
        self.max_size = max_size
        self.length = 0
        self.unsupported = False
        self.skipped_to: int | None = None
        self.records = 0
        self._aborted_lookup = aborted_lookup
        self._aborted: dict[int, list[tuple[int, int]]] | None = None
        self._first = b""
        self._first_records = 0
        self._resume = region.position  # where conversion goes on after the first batch
        self.on_converted = on_converted

    # the first convertible batch, converted now: it decides `length`
    def prepare(self) -> LazyDownConversion:
        end = self.region.position + self.region.length
        last_complete = -1
        for pos, header, data in self._batches(self.region.position, end):
            last_complete = header.last_offset
            converted = self._convert(pos, header, data, first=True)
            if converted is None:
                return self  # unsupported codec
            if converted[0]:
                self._first, self._first_records = converted
                self._resume = pos + header.size
                self.length = max(self.region.length, len(self._first))
                return self
            self._resume = pos + header.size
        if last_complete >= 0:
            self.skipped_to = last_complete + 1
        return self

    def _is_aborted(self, header: BatchHeader) -> bool:
        if self._aborted is None:
            self._aborted = {}
            for pid, first, last in self._aborted_lookup(self.first_offset):
                self._aborted.setdefault(pid, []).append((first, last))
        spans = self._aborted.get(header.producer_id)
        return bool(spans) and any(a <= header.base_offset <= b for a, b in spans or ())

    def _convert(
        self, pos: int, header: BatchHeader, data: bytes | None, first: bool
    ) -> tuple[bytes, int] | None:
        """A batch's converted bytes (b"" when left out); None when its codec is unsupported."""
        if header.is_control or header.last_offset < self.first_offset:
            return b"", 0
        if header.is_transactional and self._is_aborted(header):
            return b"", 0
        if header.compression == ZSTD:
            if first:
                self.unsupported = True
            return None
        if data is None:
            data = os.pread(self.region.file.fileno(), header.size, pos)
        try:
            return convert_batch(data, self.magic, self.first_offset, self.max_size)
        except (CorruptRecordError, UnsupportedCompression, struct.error) as exc:
            log.warning(
                "down-conversion: skipping undecodable batch at offset %d: %s",
                header.base_offset,
                exc,
            )
            return b"", 0

    def _batches(self, start: int, end: int) -> Iterator[tuple[int, BatchHeader, bytes | None]]:
        """(position, header, whole batch bytes or None) of the complete batches in
        [start, end), reading the file CHUNK bytes at a time."""
        fd = self.region.file.fileno()
        pos = start
        while pos + HEADER_SIZE <= end:
            buf = os.pread(fd, min(CHUNK, end - pos), pos)
            at = 0
            while at + HEADER_SIZE <= len(buf):
                try:
                    header = parse_header(buf, at)
                except CorruptRecordError as exc:
                    log.warning("down-conversion: stopping at position %d: %s", pos + at, exc)
                    return
                if header.batch_length < MIN_BATCH_LENGTH or pos + at + header.size > end:
                    return  # the region ends in a partial batch
                if at + header.size <= len(buf):
                    yield pos + at, header, bytes(buf[at : at + header.size])
                else:
                    yield pos + at, header, None  # larger than what is in hand: read alone
                at += header.size
            if at == 0:
                return
            pos += at

    def chunks(self) -> Iterator[bytes]:
        """Exactly `length` bytes: the converted batches, cut or padded."""
        remaining = self.length
        hook = self.on_converted
        if self._first:
            piece = self._first[:remaining]
            self._first = b""
            remaining -= len(piece)
            if hook is not None:
                hook(self._first_records, len(piece))
            yield piece
        end = self.region.position + self.region.length
        out = bytearray()
        count = 0
        if remaining > 0:
            for pos, header, data in self._batches(self._resume, end):
                converted = self._convert(pos, header, data, first=False)
                if converted is None:
                    break  # a zstd batch: the client fetches again from it and is told
                out += converted[0]
                count += converted[1]
                if len(out) >= CHUNK or len(out) >= remaining:
                    piece = bytes(out[:remaining])
                    out.clear()
                    remaining -= len(piece)
                    if hook is not None:
                        hook(count, len(piece))
                    count = 0
                    yield piece
                    if remaining <= 0:
                        return
        if out and remaining > 0:
            piece = bytes(out[:remaining])
            remaining -= len(piece)
            if hook is not None:
                hook(count, len(piece))
            yield piece
        if remaining > 0:
            yield from _overflow(remaining)


def _overflow(remaining: int) -> Iterator[bytes]:
    """`remaining` bytes of a message claiming to be longer than what is left, as Kafka's
    LazyDownConversionRecordsSend pads: clients drop it as a trailing partial message."""
    head = _OVERFLOW_HEAD.pack(-1, remaining + 1)[:remaining]
    yield head
    remaining -= len(head)
    zeros = bytes(min(remaining, CHUNK))
    while remaining > 0:
        n = min(remaining, len(zeros))
        yield zeros if n == len(zeros) else zeros[:n]
        remaining -= n
