"""Down-conversion of RecordBatch v2 to magic 0/1 message sets, for Fetch v0-3.

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
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from odradek.wire.batch import (
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptRecordError,
    parse_header,
)
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from odradek.wire.legacy_records import NO_TIMESTAMP, write_message, xxh32
from odradek.wire.regions import ChunkedPiece

if TYPE_CHECKING:
    from odradek.wire.regions import FileRegion

log = logging.getLogger(__name__)

CHUNK = 256 * 1024  # source bytes converted at once, and the size of the pieces written
_LEGACY_CODECS = (NONE, GZIP, SNAPPY, LZ4)
_LOG_APPEND_ATTR = 0x08
_PREFIX = struct.Struct(">qiI")  # offset, message size, crc (the last two patched)
_V0_HEAD = struct.Struct(">bb")
_V1_HEAD = struct.Struct(">bbq")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_NULL = _I32.pack(-1)
# an LZ4 frame as compression.compress writes it, and magic 0's wrong header checksum byte
_LZ4_PREFIX = b"\x04\x22\x4d\x18\x60\x40"
_LZ4_BROKEN_HC = bytes([(xxh32(_LZ4_PREFIX) >> 8) & 0xFF])
_OVERFLOW_HEAD = struct.Struct(">qi")


class UnsupportedCompression(ValueError):
    """A batch whose codec (zstd) has no magic 0/1 form."""


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """A multi-byte unsigned varint at `pos` (the one-byte case is inlined by the caller)."""
    result = 0
    shift = 0
    for _ in range(10):
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError("varint longer than 10 bytes")


def _messages(
    data: bytes,
    count: int,
    header: BatchHeader,
    magic: int,
    first_offset: int,
    relative_to: int | None,
) -> tuple[bytearray, int, int, int, int]:
    """The records section `data` of a batch as legacy messages, in one pass (decoding records
    into objects first costs twice as much): (messages, records, first offset, last offset,
    largest timestamp). Headers are skipped. `relative_to`: magic 1 inner offsets are written
    relative to the first record kept (the caller passes 0 to ask for that)."""
    out = bytearray()
    view = memoryview(data)
    pos = 0
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.timestamp_type == 1
    attrs = _LOG_APPEND_ATTR if magic and log_append else 0
    head_v1 = _V1_HEAD
    prefix = _PREFIX
    i32 = _I32
    crc32 = zlib.crc32
    kept = 0
    first = last = -1
    max_ts = NO_TIMESTAMP
    rel_base: int | None = None
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            raw, pos = b, pos + 1
        else:
            raw, pos = _uvarint(data, pos)
        end = pos + ((raw >> 1) ^ -(raw & 1))
        p = pos + 1  # attributes: unused
        b = data[p]
        if b < 0x80:
            raw, p = b, p + 1
        else:
            raw, p = _uvarint(data, p)
        ts_delta = (raw >> 1) ^ -(raw & 1)
        b = data[p]
        if b < 0x80:
            raw, p = b, p + 1
        else:
            raw, p = _uvarint(data, p)
        offset = base_offset + ((raw >> 1) ^ -(raw & 1))
        b = data[p]
        if b < 0x80:
            raw, p = b, p + 1
        else:
            raw, p = _uvarint(data, p)
        klen = (raw >> 1) ^ -(raw & 1)
        kstart = p
        if klen > 0:
            p += klen
        b = data[p]
        if b < 0x80:
            raw, p = b, p + 1
        else:
            raw, p = _uvarint(data, p)
        vlen = (raw >> 1) ^ -(raw & 1)
        vstart = p
        if vlen > 0:
            p += vlen
        if p > end or end > len(data):
            raise CorruptRecordError(f"record at {pos} overruns its length")
        pos = end
        if offset < first_offset:
            continue
        ts = header.max_timestamp if log_append else base_ts + ts_delta
        if ts > max_ts:
            max_ts = ts
        if first < 0:
            first = offset
            if relative_to is not None:
                rel_base = offset
        last = offset
        kept += 1
        start = len(out)
        out += prefix.pack(offset - rel_base if rel_base is not None else offset, 0, 0)
        out += head_v1.pack(1, attrs, ts) if magic else _V0_HEAD.pack(0, attrs)
        if klen < 0:
            out += _NULL
        else:
            out += i32.pack(klen)
            out += view[kstart : kstart + klen]
        if vlen < 0:
            out += _NULL
        else:
            out += i32.pack(vlen)
            out += view[vstart : vstart + vlen]
        i32.pack_into(out, start + 8, len(out) - start - 12)
        _U32.pack_into(out, start + 12, crc32(view_of(out, start + 16)))
    if pos != len(data):
        raise CorruptRecordError(f"{len(data) - pos} bytes left after {count} records")
    return out, kept, first, last, max_ts


def view_of(buf: bytearray, start: int) -> memoryview:
    return memoryview(buf)[start:]


def convert_batch(
    buf: bytes | bytearray | memoryview, magic: int, first_offset: int, max_size: int
) -> tuple[bytes, int]:
    """One whole v2 batch as a magic 0/1 message set: (bytes, records converted).

    Records below `first_offset` are left out; a batch left with none converts to b"". Raises
    UnsupportedCompression for zstd, CorruptRecordError for a batch that cannot be decoded.
    """
    header = parse_header(buf, 0)
    if len(buf) < header.size:
        raise CorruptRecordError(f"truncated batch: {len(buf)} of {header.size} bytes")
    codec = header.compression
    if codec not in _LEGACY_CODECS:
        raise UnsupportedCompression(f"codec {codec} has no magic {magic} form")
    data = decompress(codec, memoryview(buf)[HEADER_SIZE : header.size], max_size)
    count = header.records_count
    if count < 0 or count * 7 > len(data):
        raise CorruptRecordError(f"record count {count} does not fit {len(data)} bytes")
    try:
        relative = 0 if codec != NONE and magic else None
        out, kept, _first, last, max_ts = _messages(
            data, count, header, magic, first_offset, relative
        )
    except (IndexError, struct.error) as exc:
        raise CorruptRecordError(f"undecodable records: {exc}") from None
    if not kept or codec == NONE:
        return bytes(out), kept
    payload = compress(codec, out)
    if codec == LZ4 and magic == 0 and payload[:6] == _LZ4_PREFIX:
        payload = payload[:6] + _LZ4_BROKEN_HC + payload[7:]  # KAFKA-3160, as Kafka 0.8/0.9
    wrapper = bytearray()
    ts = header.max_timestamp if header.timestamp_type == 1 else max_ts
    attrs = (_LOG_APPEND_ATTR if magic and header.timestamp_type == 1 else 0) | codec
    write_message(wrapper, last, magic, attrs, ts, None, payload)
    return bytes(wrapper), kept


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
