"""Index files of fixed-size entries, as Kafka's AbstractIndex, held in memory and no descriptor.

Kafka memory-maps its indexes. Python's `mmap` keeps a duplicate of the file descriptor for as
long as the map lives, so a mapped index costs a descriptor (and a map against
vm.max_map_count): 10,000 partitions would hold 20,000 index descriptors. Here an index is read
into a bytearray on first use (Kafka's LazyIndex); new entries are appended to it and written
to the file in one open + pwrite + close once `PENDING_MAX` of them are pending, and at every
log flush, roll (seal), close and when the LRU of open segments (open_files.py) lets go of the
index; the broker's housekeeping writes the rest every second (`write_pending`), so a live
broker's index file reads as Kafka's mapped one (`odradek dump-log`) within a second. So no index
holds a descriptor, and the produce and replication paths pay a file write per `PENDING_MAX`
index entries, not per entry (a write per entry cost ~2 syscalls per 16 KiB batch). An index the
LRU lets go of drops its bytes and reads them again when next used.

Recovery does not depend on entries that were pending: an unclean start rebuilds the index of
the active segment (past any recovery point) and of every segment past the recovery point; a
sealed segment's index was written and fsync'd when it was sealed; a clean stop closes (seals)
every segment. An index short of entries would only make a lookup scan from an earlier batch.

The index is a hint (the segment scans batch headers from the position it gives): a log flush
does not fsync it (flush.messages=1 would pay a second fsync per batch); it is fsync'd when the
segment is sealed, and recovery rebuilds the index of every segment past the recovery point.
The file is no longer preallocated to `segment.index.bytes`: it holds exactly its entries (a
preallocated file left by an older version is read as before: recovery or a roll trims it);
`segment.index.bytes` still bounds the entry count (`full` makes the segment roll).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# one lock for every index: appends on the event loop against the LRU letting go from a worker
# thread (the cleaner); uncontended in practice
_LOCK = threading.RLock()

PENDING_MAX = 64  # entries held before they are written (a few hundred bytes)
# indexes holding entries not written yet (write_pending), by id
_PENDING: dict[int, IndexFile] = {}


def write_pending() -> int:
    """Write every index's pending entries (the broker's housekeeping, every second); returns
    how many indexes had some."""
    with _LOCK:
        pending = list(_PENDING.values())
        _PENDING.clear()
        for index in pending:
            try:
                index._persist_locked(fsync=False)
            except OSError as exc:  # a hint: a seal writes and fsyncs it, recovery rebuilds it
                log.debug("%s: pending index entries not written: %s", index.path, exc)
    return len(pending)


class IndexFile:
    """Fixed-size entries in a bytearray; binary search over them is done by subclasses."""

    entry_size = 8

    def __init__(
        self,
        path: str,
        base_offset: int,
        max_bytes: int,
        entries: int | None = None,
        on_load: Callable[[], None] | None = None,
    ):
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max(1, max_bytes // self.entry_size)
        self._on_load = on_load
        self._buf: bytearray | None = None
        try:
            self._file_size = os.stat(path).st_size
        except FileNotFoundError:  # a new segment's: created empty, as Kafka's
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            self._file_size = 0
        self._written = self._file_size // self.entry_size  # entries in the file
        self.entries = self._written if entries is None else entries
        self._dirty = False  # written since the last fsync

    @property
    def loaded(self) -> bool:
        return self._buf is not None

    def _load(self) -> bytearray:
        """The entries, read from the file if not in memory. Callers hold the returned object
        for the length of one operation (letting go only drops `self._buf`)."""
        buf = self._buf
        if buf is not None:
            return buf
        n = self.entries * self.entry_size
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            data = b""
        else:
            try:
                data = os.pread(fd, n, 0) if n else b""
            finally:
                os.close(fd)
        buf = bytearray(data)
        if len(buf) < n:  # a file cut short under us: keep what is there
            self.entries = len(buf) // self.entry_size
            del buf[self.entries * self.entry_size :]
        self._buf = buf
        if self._on_load is not None:
            self._on_load()
        return buf

    def _append(self, entry: bytes) -> None:
        with _LOCK:
            buf = self._load()
            del buf[self.entries * self.entry_size :]
            buf += entry
            self.entries += 1
            if self.entries - self._written >= PENDING_MAX:
                self._persist_locked(fsync=False)
            else:
                _PENDING[id(self)] = self

    def let_go(self) -> None:
        """The LRU of open segments: write what is pending and drop the bytes (read again on
        the next use)."""
        with _LOCK:
            self._persist_locked(fsync=False)
            self._buf = None

    @property
    def full(self) -> bool:
        return self.entries >= self._max_entries

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.truncate_entries(0)

    def truncate_entries(self, count: int) -> None:
        with _LOCK:
            if count >= self.entries:
                return
            buf = self._load()
            del buf[count * self.entry_size :]
            self.entries = count
            if self._written > count or self._file_size > count * self.entry_size:
                self._truncate_file(count * self.entry_size)
                self._written = count

    def _truncate_file(self, size: int) -> None:
        try:
            os.truncate(self.path, size)
        except FileNotFoundError:
            size = 0
        self._file_size = size

    def _persist(self, fsync: bool) -> None:
        """Write the entries not in the file yet (one pwrite); fsync when asked and dirty."""
        with _LOCK:
            self._persist_locked(fsync)

    def _persist_locked(self, fsync: bool) -> None:
        """Write pending entries (one open, pwrite and close)."""
        start, end = self._written, self.entries
        buf = self._buf
        _PENDING.pop(id(self), None)
        if (end <= start or buf is None) and not (fsync and self._dirty):
            return
        es = self.entry_size
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if end > start and buf is not None:
                os.pwrite(fd, memoryview(buf)[start * es : end * es], start * es)
                self._written = end
                self._file_size = max(self._file_size, end * es)
                self._dirty = True
            if fsync:
                os.fsync(fd)
                self._dirty = False
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Pending entries to the file, not fsync'd: the index is a hint (a missing entry only
        makes a scan start earlier), so a log flush (flush.messages=1 fsyncs every batch) does
        not pay a second fsync for it; the index is fsync'd when the segment is sealed."""
        self._persist(fsync=False)

    def trim(self) -> None:
        """The segment is sealed (roll, close): its entries go to the file (fsync'd), which is
        cut to them (a preallocated file of an older version too), and the index is full."""
        self._persist(fsync=True)
        with _LOCK:
            self._max_entries = self.entries
            if self._file_size > self.entries * self.entry_size:
                self._truncate_file(self.entries * self.entry_size)

    def resize(self, max_bytes: int) -> None:
        """Room for `max_bytes` (a truncated segment becomes active again)."""
        self._max_entries = max(self.entries, max_bytes // self.entry_size)

    def close(self) -> None:
        """Write what is pending and let go of the bytes."""
        with _LOCK:
            self._persist_locked(fsync=False)
            self._buf = None

    def drop(self) -> None:
        """Let go of the bytes without writing (an unclean stop, a deleted
        segment)."""
        with _LOCK:
            _PENDING.pop(id(self), None)
            self._buf = None

    def _search(self, key_at: Callable[[int], int], target: int) -> int:
        """Index of the last entry whose key <= target, or -1."""
        lo, hi = 0, self.entries - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if key_at(mid) <= target:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found
