"""Sparse offset index, as Kafka's OffsetIndex.

Each 8-byte entry, appended every `index.interval.bytes` of log:

    offset 0  int32  relative offset  (largest offset of the batch - segment base offset)
    offset 4  int32  position         (file position of that batch in the .log)

A lookup gives the last entry at or below the target; the segment scans batch headers from there.
"""

from __future__ import annotations

import struct

from odradek.log.index_file import IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    entry_size = 8

    def append(self, offset: int, position: int) -> None:
        if self.full:
            return
        self._append(_ENTRY.pack(offset - self.base_offset, position))

    def entry(self, n: int) -> tuple[int, int]:
        rel, pos = _ENTRY.unpack_from(self._load(), n * 8)
        return self.base_offset + rel, pos

    def last(self) -> tuple[int, int] | None:
        return self.entry(self.entries - 1) if self.entries else None

    def lookup(self, offset: int) -> int:
        """File position to start scanning from for `offset`."""
        if not self.entries:
            return 0
        mm = self._load()
        base = self.base_offset
        n = self._search(lambda i: base + _ENTRY.unpack_from(mm, i * 8)[0], offset)
        return 0 if n < 0 else _ENTRY.unpack_from(mm, n * 8)[1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        if not self.entries:
            return
        mm = self._load()
        base = self.base_offset
        n = self._search(lambda i: base + _ENTRY.unpack_from(mm, i * 8)[0], offset - 1)
        self.truncate_entries(n + 1)
