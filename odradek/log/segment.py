"""One log segment, as Kafka's LogSegment: `<base>.log` plus its offset and time indexes.

The .log holds record batches exactly as received (with base offset and leader epoch filled in).
Appends are one positional write of the batch bytes; reads return file regions. Batches are
located by reading only their first 27 header bytes (base_offset, batch_length and, at offset 23,
last_offset_delta: `wire.batch.peek_span`, the layout is in odradek/wire/batch.py).

Nothing is opened when a segment is loaded: the `.log` is opened and the indexes are read on
first use, and the process's LRU of open segments (open_files.py) makes the least recently used
ones let go of them past its limit, so open files stay bounded whatever the partition count.
`file` reopens transparently; code reading or writing keeps the file object (or an index's
bytes) in a local for the whole operation, so being let go of meanwhile never cuts it off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c._crc32c import crc32c  # the extension itself, as odradek.wire.batch does

from odradek.log.disk_faults import FSYNC, WRITE, LogDir
from odradek.log.offset_index import OffsetIndex
from odradek.log.open_files import CACHE, SegmentFile
from odradek.log.time_index import TimeIndex
from odradek.log.txn_index import TransactionIndex
from odradek.wire.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    SPAN_SIZE,
    BatchHeader,
    parse_header,
    peek_sizes,
    peek_span,
)
from odradek.wire.regions import FileRegion

log = logging.getLogger(__name__)

RECOVER_CHUNK = 1 << 20  # bytes of a batch held at once while recovery checks its CRC


def _create(path: str, _flags: int) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _reopen(path: str, _flags: int) -> int:
    return os.open(path, os.O_RDWR | os.O_CLOEXEC)


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class BatchPos:
    """Where a batch sits in a segment file and what it spans."""

    position: int
    base_offset: int
    last_offset: int
    size: int


class LogSegment:
    """A `.log` file with its indexes; appended to only while it is the active segment."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        created_ms: int,
        log_dir: LogDir | None = None,
    ) -> None:
        self.dir = directory
        self.log_dir = log_dir  # the data dir's health and injected faults (disk_faults.py)
        self.base_offset = base_offset
        self.path = os.path.join(directory, file_name(base_offset, ".log"))
        self.index_interval = index_interval
        self._file: SegmentFile | None = None
        self._gone = False  # deleted, or replaced by a cleaned copy: never opened again
        try:
            self.size = os.stat(self.path).st_size
        except FileNotFoundError:  # a new segment: created now, and written next
            self._file = SegmentFile(self.path, "r+", opener=_create)
            self.size = 0
            CACHE.opened(self)
        self.index = OffsetIndex(
            os.path.join(directory, file_name(base_offset, ".index")),
            base_offset,
            index_bytes,
            on_load=self._loaded,
        )
        self.time_index = TimeIndex(
            os.path.join(directory, file_name(base_offset, ".timeindex")),
            base_offset,
            index_bytes,
            on_load=self._loaded,
        )
        self.txn_index = TransactionIndex(
            os.path.join(directory, file_name(base_offset, ".txnindex"))
        )
        self.created_ms = created_ms
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.next_offset = base_offset
        self._bytes_since_index = 0
        self._rolling_ts: int | None = None  # see rolling_based_timestamp

    # -- open files (open_files.py) -------------------------------------------------------------

    @property
    def file(self) -> SegmentFile:
        """The open `.log`, opened again if the LRU let go of it (never created again: a
        deleted segment's file is gone, FileNotFoundError). Hold the returned object while
        using its descriptor."""
        f = self._file
        if f is None or f.closed:
            if self._gone:
                raise FileNotFoundError(f"segment {self.path} was deleted")
            f = SegmentFile(self.path, "r+", opener=_reopen)
            self._file = f
            CACHE.opened(self)
        else:
            CACHE.touch(self)
        return f

    def moved_to(self, directory: str) -> None:
        """Its directory was renamed (a replica moved between data dirs leaves its old dir
        under another name for readers still in flight): reopen from there."""
        self.dir = directory
        self.path = os.path.join(directory, file_name(self.base_offset, ".log"))
        self.index.path = os.path.join(directory, file_name(self.base_offset, ".index"))
        self.time_index.path = os.path.join(directory, file_name(self.base_offset, ".timeindex"))
        self.txn_index.path = os.path.join(directory, file_name(self.base_offset, ".txnindex"))

    def _loaded(self) -> None:
        CACHE.opened(self)

    def release_handles(self) -> None:
        """The LRU lets go of this segment's descriptor and index bytes (pending entries are
        written first). Only references are dropped: a file region or a reader holding the file
        object keeps it valid until done, and then it closes."""
        self._file = None
        self.index.let_go()
        self.time_index.let_go()

    def release(self) -> None:
        """Close the descriptor and drop the indexes without writing anything (an unclean
        stop; a clean one seals first)."""
        CACHE.forget(self)
        self.index.drop()
        self.time_index.drop()
        f, self._file = self._file, None
        if f is not None:
            f.close()

    # -- writing ------------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview | list,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> int:
        """Write batches (one buffer, or pieces written with one pwritev) at the end of the
        file; returns the position they start at.

        A failed write (ENOSPC, EIO) is rolled back: the file is cut to its size before the
        call, so it still ends in a complete batch and the indexes are never ahead of it.
        """
        position = self.size
        try:
            total = self._write_at(data, position)
        except OSError:
            self._roll_back(position)
            raise
        self.size += total
        if self._bytes_since_index >= self.index_interval or position == 0:
            self.index.append(last_offset, position)
            if max_timestamp > self.max_timestamp:
                self.time_index.append(max_timestamp, offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += total
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        self.next_offset = last_offset + 1
        return position

    def _write_at(self, data: bytes | bytearray | memoryview | list, position: int) -> int:
        f = self.file  # held until the write is done
        fd = f.fileno()
        ld = self.log_dir
        if ld is not None and ld.write_errno is not None:
            self._injected_short_write(data, position, ld)
        if isinstance(data, list):
            total = sum(len(p) for p in data)
            written = os.pwritev(fd, data, position)
            if written < total:  # rare short write: finish the rest as one buffer
                joined = memoryview(b"".join(data))
                while written < total:
                    written += os.pwrite(fd, joined[written:], position + written)
        else:
            total = len(data)
            written = os.pwrite(fd, data, position)
            while written < total:
                written += os.pwrite(fd, memoryview(data)[written:], position + written)
        return total

    def _injected_short_write(
        self, data: bytes | bytearray | memoryview | list, position: int, ld: LogDir
    ) -> None:
        """A test's disk fault: write half the bytes, as a filling disk does, then fail."""
        joined = b"".join(data) if isinstance(data, list) else bytes(data)
        f = self.file
        os.pwrite(f.fileno(), joined[: len(joined) // 2], position)
        raise ld.injected_error(WRITE)

    def _roll_back(self, position: int) -> None:
        try:
            f = self.file
            os.ftruncate(f.fileno(), position)
        except OSError as exc:  # recovery cuts the torn tail at the next start
            log.warning(
                "%s: cannot cut a failed write back to %d: %s", self.path, position, exc.strerror
            )

    def sync(self) -> None:
        """fsync the `.log`."""
        ld = self.log_dir
        if ld is not None and ld.fsync_errno is not None:
            raise ld.injected_error(FSYNC)
        f = self.file
        os.fsync(f.fileno())

    def flush(self) -> None:
        self.sync()
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def seal(self) -> None:
        """This segment stops being active: trim the preallocated indexes (fsync'd), and fsync
        the `.txnindex` if an abort was indexed since its last sync: a flush round that syncs
        the sealed .log moves the recovery point past it, and no later start rebuilds it."""
        if self.max_timestamp >= 0:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.trim()
        self.time_index.trim()
        self.txn_index.flush()

    def close(self) -> None:
        self.seal()
        self.release()

    def detach(self) -> None:
        """This segment leaves its log (deleted, or replaced by a cleaned copy): out of the
        LRU, indexes dropped. Its open file, if any, is kept for whoever still holds the segment
        or a region of it (it closes with the last of them); it is never opened again, since
        its path is gone or names the replacement."""
        self._gone = True
        CACHE.forget(self)
        self.index.drop()
        self.time_index.drop()

    def delete(self) -> None:
        """Remove the files; open file regions (and a reader holding this segment while its
        file is open) keep the data readable until they finish."""
        self.detach()
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.unlink(os.path.join(self.dir, file_name(self.base_offset, suffix)))
            except FileNotFoundError:
                pass

    # -- reading ------------------------------------------------------------------------------

    def _read_prefix(self, position: int) -> BatchPos | None:
        f = self.file
        raw = os.pread(f.fileno(), SPAN_SIZE, position)
        if len(raw) < SPAN_SIZE:
            return None
        base, length, delta = peek_span(raw)
        if length < HEADER_SIZE - LOG_OVERHEAD or position + LOG_OVERHEAD + length > self.size:
            return None
        return BatchPos(position, base, base + delta, length + LOG_OVERHEAD)

    def batches_from(self, position: int = 0, end: int | None = None) -> Iterator[BatchPos]:
        stop = self.size if end is None else end
        while position < stop:
            b = self._read_prefix(position)
            if b is None:
                return
            yield b
            position += b.size

    def translate(self, offset: int) -> BatchPos | None:
        """The first batch whose last offset is >= `offset`."""
        for b in self.batches_from(self.index.lookup(offset)):
            if b.last_offset >= offset:
                return b
        return None

    def position_of(self, offset: int) -> int:
        """File position of the batch holding `offset`, or the segment size when beyond."""
        b = self.translate(offset)
        return self.size if b is None else b.position

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one: bool
    ) -> FileRegion | None:
        """Up to `max_bytes` from the batch holding `offset`, never past `max_position`.

        As Kafka (KIP-74): when `min_one` and the first batch is larger than `max_bytes`, the
        whole first batch is returned; otherwise the region may end in a partial batch, which
        clients skip.
        """
        start = self.translate(offset)
        if start is None or start.position >= max_position:
            return None
        limit = max_position - start.position
        length = min(limit, max_bytes)
        if min_one and length < start.size:
            length = min(limit, start.size)
        if length <= 0:
            return None
        return FileRegion(self.file, start.position, length)

    def read_bytes(self, position: int, length: int) -> bytes:
        f = self.file
        return os.pread(f.fileno(), length, position)

    def rolling_based_timestamp(self) -> int:
        """The first batch's max timestamp, -1 when the segment is empty or the batch has none:
        Kafka's LogSegment.rollingBasedTimestamp, from which segment.ms counts (read from the
        file once, as Kafka's loadFirstBatchTimestamp)."""
        if self.size == 0:
            return -1
        if self._rolling_ts is None:
            self._rolling_ts = self.read_header(0).max_timestamp
        return self._rolling_ts

    def read_header(self, position: int) -> BatchHeader:
        f = self.file
        return parse_header(os.pread(f.fileno(), HEADER_SIZE, position))

    def find_timestamp_position(self, timestamp: int) -> BatchPos | None:
        """The first batch whose max timestamp is >= `timestamp`."""
        start = self.index.lookup(self.time_index.lookup(timestamp))
        for b in self.batches_from(start):
            if self.read_header(b.position).max_timestamp >= timestamp:
                return b
        return None

    # -- recovery and truncation ---------------------------------------------------------------

    def recover(self) -> tuple[int, list[tuple[int, BatchHeader]]]:
        """Scan every batch checking CRCs, cut a torn or corrupt tail, rebuild the indexes.

        As Kafka's LogSegment.recover: a batch is torn only when it runs past the end of the
        file or its header or CRC is bad; a complete batch with a valid CRC is kept whatever its
        size (a coordinator or an older `max.message.bytes` may have written it). A large batch
        is checked in chunks of `RECOVER_CHUNK` bytes, never read whole.

        Returns (bytes truncated, [(position, header)] of the valid batches).
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        valid: list[tuple[int, BatchHeader]] = []
        position = 0
        while position < self.size:
            header = self._recover_batch(position)
            if header is None:
                break
            total = header.size
            if self._bytes_since_index >= self.index_interval or position == 0:
                self.index.append(header.last_offset, position)
                if header.max_timestamp > self.max_timestamp:
                    self.time_index.append(header.max_timestamp, header.last_offset)
                self._bytes_since_index = 0
            self._bytes_since_index += total
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            valid.append((position, header))
            self.next_offset = header.last_offset + 1
            position += total
        # rebuilt by the replay of the markers that follows recovery (Log._load), as Kafka's
        # LogSegment.recover rebuilds it while it scans: a crash may have kept an abort marker's
        # .log bytes and lost its index entry, or the reverse
        self.txn_index.reset()
        truncated = self.size - position
        if truncated:
            self.file.truncate(position)
            self.size = position
        return truncated, valid

    def _recover_batch(self, position: int) -> BatchHeader | None:
        """The header of the complete, CRC-valid batch at `position`, else None (torn)."""
        f = self.file  # held for the whole check
        fd = f.fileno()
        raw = os.pread(fd, LOG_OVERHEAD, position)
        if len(raw) < LOG_OVERHEAD:
            return None
        _base, length = peek_sizes(raw)
        total = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or position + total > self.size:
            return None
        first = os.pread(fd, min(total, RECOVER_CHUNK), position)
        try:
            header = parse_header(first)
        except ValueError:
            return None
        # CRC-32C of bytes [ATTRIBUTES_OFFSET, total), fed chunk by chunk
        crc = crc32c(memoryview(first)[ATTRIBUTES_OFFSET:])
        done = len(first)
        while done < total:
            chunk = os.pread(fd, min(total - done, RECOVER_CHUNK), position + done)
            if not chunk:
                return None
            crc = crc32c(chunk, crc)
            done += len(chunk)
        if crc != header.crc:
            log.warning("%s: CRC mismatch at position %d, truncating", self.path, position)
            return None
        return header

    def load_tail(self) -> None:
        """For a cleanly closed segment: find next offset and max timestamp from the index."""
        last = self.index.last()
        start = last[1] if last else 0
        for b in self.batches_from(start):
            self.next_offset = b.last_offset + 1
        if self.time_index.entries:
            ts, off = self.time_index.entry(self.time_index.entries - 1)
            self.max_timestamp, self.offset_of_max_timestamp = ts, off
        if self.size and self.max_timestamp < 0:
            for b in self.batches_from(0):
                h = self.read_header(b.position)
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp, self.offset_of_max_timestamp = (
                        h.max_timestamp,
                        b.last_offset,
                    )

    def truncate_to(self, offset: int) -> int:
        """Drop every batch at or after `offset`; returns bytes removed."""
        b = self.translate(offset)
        if b is None:
            return 0
        # as Kafka: cut at the start of the batch holding `offset`
        position = b.position
        offset = min(offset, b.base_offset)
        removed = self.size - position
        self.file.truncate(position)
        self.size = position
        self.index.truncate_to_offset(offset)
        self.time_index.truncate_to_offset(offset)
        self.txn_index.truncate_to(offset)
        self.next_offset = max(self.base_offset, offset)
        self._rolling_ts = None
        # recompute max timestamp from what is left
        self.max_timestamp = -1
        for bp in self.batches_from(0):
            h = self.read_header(bp.position)
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, bp.last_offset
        return removed
