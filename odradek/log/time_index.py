"""Time index, as Kafka's TimeIndex.

Each 12-byte entry records that offsets up to a point hold timestamps up to a maximum:

    offset 0  int64  timestamp        (largest timestamp seen so far in the segment)
    offset 8  int32  relative offset  (offset of the record with that timestamp - base offset)

Entries are appended only when the timestamp grows, so timestamps are non-decreasing.
"""

from __future__ import annotations

import struct

from odradek.log.index_file import IndexFile

_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    entry_size = 12

    def append(self, timestamp: int, offset: int) -> None:
        if self.full:
            return
        if self.entries:
            mm = self._load()
            if timestamp <= _ENTRY.unpack_from(mm, (self.entries - 1) * 12)[0]:
                return
        self._append(_ENTRY.pack(timestamp, offset - self.base_offset))

    def entry(self, n: int) -> tuple[int, int]:
        ts, rel = _ENTRY.unpack_from(self._load(), n * 12)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int) -> int:
        """An offset to start searching from: the last entry with timestamp < `timestamp`."""
        if not self.entries:
            return self.base_offset
        mm = self._load()
        n = self._search(lambda i: _ENTRY.unpack_from(mm, i * 12)[0], timestamp - 1)
        return self.base_offset if n < 0 else self.entry(n)[1]

    def truncate_to_offset(self, offset: int) -> None:
        keep = 0
        if self.entries:
            mm = self._load()
            rel = offset - self.base_offset
            while keep < self.entries and _ENTRY.unpack_from(mm, keep * 12)[1] < rel:
                keep += 1
        self.truncate_entries(keep)
