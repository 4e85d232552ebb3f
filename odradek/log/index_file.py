"""Memory-mapped, preallocated index files, as Kafka's AbstractIndex.

An index file is preallocated to `segment.index.bytes` (sparse), memory-mapped, and trimmed to
its real entry count when the segment is closed or rolled. Subclasses define the entry layout.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable


class IndexFile:
    """Fixed-size entries in an mmap; binary search over them is done by subclasses."""

    entry_size = 8

    def __init__(self, path: str, base_offset: int, max_bytes: int, entries: int | None = None):
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max(1, max_bytes // self.entry_size)
        exists = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if entries is None:
                entries = size // self.entry_size if exists else 0
            self.entries = entries
            os.ftruncate(fd, self._max_entries * self.entry_size)
            self._mm = mmap.mmap(fd, self._max_entries * self.entry_size)
        finally:
            os.close(fd)

    @property
    def full(self) -> bool:
        return self.entries >= self._max_entries

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        if self._mm is None:
            return
        self._mm[: self.entries * self.entry_size] = bytes(self.entries * self.entry_size)
        self.entries = 0

    def truncate_entries(self, count: int) -> None:
        start = count * self.entry_size
        end = self.entries * self.entry_size
        if end > start:
            self._mm[start:end] = bytes(end - start)
        self.entries = min(self.entries, count)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def trim(self) -> None:
        """Shrink the file to its entries (done on roll and close)."""
        self.resize(self.entries * self.entry_size)

    def resize(self, max_bytes: int) -> None:
        """Remap with room for `max_bytes` (a truncated segment becomes active again)."""
        if self._mm is not None:
            self._mm.flush()
            self._mm.close()
        self._max_entries = max(self.entries, max_bytes // self.entry_size)
        size = self._max_entries * self.entry_size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size)
            # None only while sized 0 (full: nothing is written or read); typed as always mapped so
            # the subclasses' hot lookups need no check.
            self._mm = mmap.mmap(fd, size) if size else None  # type: ignore[assignment]
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None  # type: ignore[assignment]  # closed: no entry is read after close

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
