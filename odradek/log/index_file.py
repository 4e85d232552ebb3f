"""Memory-mapped, preallocated index files, as Kafka's AbstractIndex (and its LazyIndex).

An index file is preallocated to `segment.index.bytes` (sparse), memory-mapped, and trimmed to
its real entry count when the segment is closed or rolled. The map is made on first use, not
when the segment is loaded, and the descriptor is closed as soon as the map exists. The owning
segment is told when the index maps itself (`on_map`), so the process's LRU of open segments
(open_files.py) bounds maps as well as descriptors; `unmap` lets go of the map (it is made again
on the next use; the entry count is kept in memory). Subclasses define the entry layout and read
the map through `_map()`, holding it in a local for the length of one operation.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable


class IndexFile:
    """Fixed-size entries in an mmap; binary search over them is done by subclasses."""

    entry_size = 8

    def __init__(
        self,
        path: str,
        base_offset: int,
        max_bytes: int,
        entries: int | None = None,
        on_map: Callable[[], None] | None = None,
    ):
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max(1, max_bytes // self.entry_size)
        self._on_map = on_map
        self._mm: mmap.mmap | None = None
        self._dirty = False  # written since the last flush (an unmapped index fsyncs its file)
        try:
            self._file_size = os.stat(path).st_size
            exists = True
        except FileNotFoundError:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
            self._file_size = 0
            exists = False
        if entries is None:
            entries = self._file_size // self.entry_size if exists else 0
        self.entries = entries

    @property
    def mapped(self) -> bool:
        return self._mm is not None

    def _map(self) -> mmap.mmap:
        """The map, made now if there is none (sized `_max_entries` entries). Callers hold the
        returned object for the length of one operation: an LRU eviction only drops
        `self._mm`, so a held map stays valid."""
        mm = self._mm
        if mm is not None:
            return mm
        size = self._max_entries * self.entry_size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if self._file_size != size:
                os.ftruncate(fd, size)
                self._file_size = size
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._mm = mm
        if self._on_map is not None:
            self._on_map()
        return mm

    def unmap(self) -> None:
        """Let go of the map (the LRU of open segments); it is made again when next used."""
        self._mm = None

    @property
    def full(self) -> bool:
        return self.entries >= self._max_entries

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        n = self.entries * self.entry_size
        if n and self._max_entries:
            mm = self._map()
            n = min(n, len(mm))
            mm[:n] = bytes(n)
            self._dirty = True
        self.entries = 0

    def truncate_entries(self, count: int) -> None:
        start = count * self.entry_size
        end = self.entries * self.entry_size
        if end > start:
            mm = self._map()
            mm[start:end] = bytes(end - start)
            self._dirty = True
        self.entries = min(self.entries, count)

    def flush(self) -> None:
        mm = self._mm
        if mm is not None:
            mm.flush()
        elif self._dirty:  # written through a map since let go of: fsync the file itself
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def trim(self) -> None:
        """Shrink the file to its entries (done on roll and close)."""
        self.resize(self.entries * self.entry_size)

    def resize(self, max_bytes: int) -> None:
        """Room for `max_bytes` (a truncated segment becomes active again); the file is sized
        now, the map made again on the next use."""
        mm = self._mm
        if mm is not None:
            mm.flush()
            self._mm = None
            mm.close()  # before a shrinking truncate: no access may land past the new end
        self._max_entries = max(self.entries, max_bytes // self.entry_size)
        size = self._max_entries * self.entry_size
        if size != self._file_size:
            os.truncate(self.path, size)
            self._file_size = size

    def close(self) -> None:
        mm = self._mm
        if mm is not None:
            self._mm = None
            mm.close()

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
