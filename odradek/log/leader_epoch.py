"""Leader epoch cache, as Kafka's LeaderEpochFileCache (KIP-101, KIP-279).

`leader-epoch-checkpoint` in the partition directory:

    line 1   version (0)
    line 2   number of entries
    then     "<epoch> <start offset>" per entry, epochs increasing
"""

from __future__ import annotations

import os

from odradek.log.checkpoints import write_soon

FILE = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, FILE)
        self.entries: list[tuple[int, int]] = []
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            for line in lines[2 : 2 + int(lines[1])]:
                epoch, start = line.split()
                self.entries.append((int(epoch), int(start)))
        except (FileNotFoundError, ValueError, IndexError):
            self.entries = []

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries.append((epoch, start_offset))
        self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset), as OffsetForLeaderEpoch answers."""
        if not self.entries or epoch < self.entries[0][0]:
            return -1, -1
        for i, (e, _start) in enumerate(self.entries):
            nxt = self.entries[i + 1] if i + 1 < len(self.entries) else None
            if nxt is None:
                return e, log_end_offset
            if nxt[0] > epoch:
                return e, nxt[1]
        return -1, -1

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (log truncated there)."""
        keep = [(e, s) for e, s in self.entries if s < end_offset]
        if keep != self.entries:
            self.entries = keep
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        if not self.entries:
            return
        keep = [(e, s) for e, s in self.entries if s > start_offset]
        older = [(e, s) for e, s in self.entries if s <= start_offset]
        if older:
            keep.insert(0, (older[-1][0], start_offset))
        if keep != self.entries:
            self.entries = keep
            self._write()

    def _write(self) -> None:
        lines = ["0", str(len(self.entries))] + [f"{e} {s}" for e, s in self.entries]
        write_soon(self.path, "\n".join(lines) + "\n")  # fsync'd off the event loop
