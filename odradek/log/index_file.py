"""Index files of fixed-size entries, as Kafka's AbstractIndex, held in memory and no descriptor.

Kafka memory-maps its indexes. Python's `mmap` keeps a duplicate of the file descriptor for as
long as the map lives, so a mapped index costs a descriptor (and a map against
vm.max_map_count): 10,000 partitions would hold 20,000 index descriptors. Here an index is read
into a bytearray on first use (Kafka's LazyIndex) and a new entry is appended to it and written
to the file at once with pwrite, so a live broker's index reads as Kafka's mapped one (`odradek
dump-log`). Only an index being appended to (the active segment's) holds a descriptor, closed
when the segment is sealed or the LRU lets go of it; a sealed index holds none. An index the
LRU of open segments lets go of (open_files.py) drops its bytes and reads them again when next
used.

The index is a hint (the segment scans batch headers from the position it gives): a log flush
does not fsync it (flush.messages=1 would pay a second fsync per batch); it is fsync'd when the
segment is sealed, and recovery rebuilds the index of every segment past the recovery point.
The file is no longer preallocated to `segment.index.bytes`: it holds exactly its entries (a
preallocated file left by an older version is read as before: recovery or a roll trims it);
`segment.index.bytes` still bounds the entry count (`full` makes the segment roll).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

# one lock for every index: appends on the event loop against the LRU letting go from a worker
# thread (the cleaner); uncontended in practice
_LOCK = threading.RLock()


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
        self._fd: int | None = None  # held while appended to (active), let go of by the LRU
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
            self._persist_locked(fsync=False, keep_open=True)  # written through, as a map

    def let_go(self) -> None:
        """The LRU of open segments: write what is pending and drop the bytes (read again on
        the next use)."""
        with _LOCK:
            self._persist_locked(fsync=False)
            self._close_fd()
            self._buf = None

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

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

    def _persist_locked(self, fsync: bool, keep_open: bool = False) -> None:
        """Write pending entries; `keep_open`: keep the descriptor for the next append (an
        active index: open, write and close per entry cost 40 % more per produced batch)."""
        start, end = self._written, self.entries
        buf = self._buf
        if (end <= start or buf is None) and not (fsync and self._dirty):
            return
        es = self.entry_size
        fd = self._fd
        if fd is None:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            if keep_open:
                self._fd = fd
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
            if fd is not self._fd:
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
            self._close_fd()  # sealed: no more appends
            self._max_entries = self.entries
            if self._file_size > self.entries * self.entry_size:
                self._truncate_file(self.entries * self.entry_size)

    def resize(self, max_bytes: int) -> None:
        """Room for `max_bytes` (a truncated segment becomes active again)."""
        self._max_entries = max(self.entries, max_bytes // self.entry_size)

    def close(self) -> None:
        """Write what is pending and let go of the bytes and the descriptor."""
        with _LOCK:
            self._persist_locked(fsync=False)
            self._close_fd()
            self._buf = None

    def drop(self) -> None:
        """Let go of the bytes and the descriptor without writing (an unclean stop, a deleted
        segment)."""
        with _LOCK:
            self._close_fd()
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
