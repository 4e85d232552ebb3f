"""Reading a log batch by batch, as the broker-side readers of Kafka's UnifiedLog do (the group
and transaction loaders, the transaction-marker replay): one iterator over a log's batches and
one over their decoded records, so nobody outside `log/` walks segments or reaches into them.

`batches` yields `LogBatch`es (the segment, where the batch sits and the offsets it spans) in
offset order from the segment holding `from_offset`, stopping at the first batch starting at or
after `to_offset`. `records` decodes each of them with the decompression bound tied to the log's
`max.message.bytes` (KAFKA-14063-style: no batch may inflate without limit); a batch that cannot
be decoded (bad framing, a compressed section over the bound) is logged once and skipped, so no
stored byte stops a reader. `data_records` is the (key, value) view the coordinators' loaders
replay: data records only, in [log start offset, `to_offset`).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from odradek.wire.batch import BatchHeader
from odradek.wire.compression import max_decompressed_size
from odradek.wire.records import Record, decode_records

if TYPE_CHECKING:
    from odradek.log.config import LogConfig
    from odradek.log.segment import BatchPos, LogSegment

log = logging.getLogger(__name__)

# what decoding a stored batch raises on bad bytes (CorruptRecordError is a ValueError)
DECODE_ERRORS = (ValueError, struct.error)


class ReadLog(Protocol):
    """A partition's log as this module reads it (`log/log.py` Log)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def config(self) -> LogConfig: ...
    @property
    def segments(self) -> list[LogSegment]: ...
    @property
    def log_start_offset(self) -> int: ...
    def segments_from(self, offset: int) -> list[LogSegment]: ...


@dataclass(slots=True, frozen=True)
class LogBatch:
    """One stored batch: its segment and its place there (a file region, read on demand)."""

    segment: LogSegment
    pos: BatchPos

    @property
    def base_offset(self) -> int:
        return self.pos.base_offset

    @property
    def last_offset(self) -> int:
        return self.pos.last_offset

    @property
    def position(self) -> int:
        return self.pos.position

    @property
    def size(self) -> int:
        return self.pos.size

    def read(self) -> bytes:
        """The whole batch, as stored."""
        return self.segment.read_bytes(self.pos.position, self.pos.size)

    def header(self) -> BatchHeader:
        """The batch header only (61 bytes read)."""
        return self.segment.read_header(self.pos.position)


def batches(
    lg: ReadLog, from_offset: int | None = None, to_offset: int | None = None
) -> Iterator[LogBatch]:
    """Every batch holding an offset >= `from_offset` (all when None) and starting below
    `to_offset` (no bound when None), in offset order."""
    segments = lg.segments_from(from_offset) if from_offset is not None else list(lg.segments)
    for batch in segment_batches(segments):
        if to_offset is not None and batch.base_offset >= to_offset:
            return
        if from_offset is not None and batch.last_offset < from_offset:
            continue
        yield batch


def segment_batches(segments: Iterable[LogSegment]) -> Iterator[LogBatch]:
    """Every batch of the given segments, in order: for a reader that fixed its segments
    beforehand (the cleaner, reading sealed segments in a worker thread while the event loop
    may change the log's segment list)."""
    for seg in segments:
        for bp in seg.batches_from(0):
            yield LogBatch(seg, bp)


def records(
    lg: ReadLog, from_offset: int | None = None, to_offset: int | None = None, name: str = ""
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """(header, records) of every decodable batch `batches` yields; an undecodable one is logged
    (as `name`, by default topic-partition) and skipped."""
    bound = max_decompressed_size(lg.config.max_message_bytes)
    for batch in batches(lg, from_offset, to_offset):
        data = batch.read()
        try:
            yield decode_records(data, max_size=bound)
        except DECODE_ERRORS as exc:
            log.warning(
                "%s: skipping undecodable batch at offset %d (%d bytes): %s",
                name or f"{lg.topic}-{lg.partition}",
                batch.base_offset,
                len(data),
                exc,
            )


def data_records(lg: ReadLog, to_offset: int) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every data record in [log start offset, `to_offset`), in offset order:
    what a coordinator replays from its internal topic (control batches are skipped)."""
    start = lg.log_start_offset
    for header, recs in records(lg, start, to_offset):
        if header.is_control:
            continue
        for r in recs:
            if start <= r.offset < to_offset:
                yield r.key, r.value
