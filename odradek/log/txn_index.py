"""The aborted-transaction index of a segment, as Kafka's TransactionIndex (KIP-98).

`<base>.txnindex` lists the transactions aborted by abort markers written into the segment, in
marker order. A read_committed fetch asks the log for every aborted transaction that overlaps the
fetched range, so the consumer can drop those producers' records; the index answers without
reading the log. The file is created on the first abort and appended to; entries are 34 bytes:

    offset 0   int16  version             0
    offset 2   int64  producer_id
    offset 10  int64  first_offset        first offset of the aborted transaction
    offset 18  int64  last_offset         offset of the abort marker
    offset 26  int64  last_stable_offset  the partition's LSO just after the marker was written

Searching stops at the first entry whose last_stable_offset reaches the upper bound: every
transaction aborted after that point started at or past the bound (Kafka's isComplete).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass

log = logging.getLogger(__name__)

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


class TransactionIndex:
    """One segment's `.txnindex`: entries kept in memory, the file only appended or rewritten.

    No descriptor is held open: aborts are rare and a deleted segment then needs no close.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self.dirty = False  # written since the last flush
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        usable = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, usable, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != VERSION or (self.entries and last <= self.entries[-1].last_offset):
                log.warning("%s: bad entry at byte %d, dropping the rest", self.path, pos)
                usable = pos
                break
            self.entries.append(AbortedTxn(pid, first, last, lso))
        if usable != len(data):
            # a torn tail (the process died mid-write) or garbage: keep the valid prefix
            self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(e.encode() for e in self.entries))
        os.replace(tmp, self.path)
        self.dirty = True

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, entry: AbortedTxn) -> bool:
        """Add an entry; one at or below the last marker is a replay of a known abort (False)."""
        if entry.last_offset <= self.last_offset:
            return False
        with open(self.path, "ab") as f:
            f.write(entry.encode())
        self.entries.append(entry)
        self.dirty = True
        return True

    def flush(self) -> None:
        """fsync what was written since the last flush, as Kafka's segment flush does for its
        transaction index: a `.txnindex` entry lost to a crash after the producer-state snapshot
        past its marker reached the disk would never be replayed, and read_committed would
        then hand out that aborted transaction's records."""
        if not self.dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # every entry truncated away: nothing to keep
            self.dirty = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.dirty = False

    def truncate_to(self, offset: int) -> None:
        """Drop the aborts whose marker is at or after `offset` (log truncation, recovery)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def reset(self) -> None:
        self.truncate_to(-1)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound); True when complete."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False
