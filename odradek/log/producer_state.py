"""Idempotent-producer state per partition, as Kafka's ProducerStateManager (KIP-98, KIP-360).

For each producer id the partition keeps its epoch and the metadata of its last five batches, so a
retried batch is recognised as a duplicate (answered with its original offset) and a gap in
sequence numbers is answered OUT_OF_ORDER_SEQUENCE_NUMBER. It also tracks the first offset of each
producer's open transaction, from which the last stable offset follows.

Snapshots (`<offset>.snapshot`, offset = 20 digits) let a restart replay only the log after them.
Their layout is Kafka's ProducerSnapshot v1 (storage/.../message/ProducerSnapshot.json), so Kafka
reads odradek's and odradek Kafka's:

    offset 0   int16  version (1)
    offset 2   uint32 crc32c of everything after this field
    offset 6   int32  entry count
    then per entry (46 bytes):
      int64 producer_id; int16 epoch; int32 last_sequence; int64 last_offset (-1: no batch);
      int32 offset_delta (last - first of the last batch); int64 timestamp;
      int32 coordinator_epoch; int64 current_txn_first_offset (-1: none)

Kafka writes one entry per producer, its last batch; odradek writes one entry per remembered
batch (up to five per producer, oldest first, each repeating the producer's epoch, coordinator
epoch and open transaction). Kafka's loader keeps the last entry of a producer id, which is the
newest batch, so Kafka reads these files as its own; odradek gathers the entries of one producer
id back into its five-batch window, so a retry of any of the last five batches is still
recognised as a duplicate after a restart (Kafka recognises only the last one).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field

from odradek.wire.batch import BatchHeader, crc32c
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

MAX_BATCHES = 5
_ENTRY = struct.Struct(">qhiqiqiq")
_HEAD = struct.Struct(">hIi")
INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int = -1
    last_timestamp: int = -1
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class SequenceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ProducerStateManager:
    """Producer entries for one partition; mutated only under the partition's append lock."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        # (offset, bytes) of the snapshot last read or written: closing an unchanged log does
        # not write the same snapshot again (10,000 partitions stop in a fraction of the time)
        self._last_snapshot: tuple[int, bytes] | None = None
        self._snapshot_synced = False  # that snapshot was fsync'd
        self.producers: dict[int, ProducerEntry] = {}
        # first offset -> producer id of open transactions (for the last stable offset)
        self.ongoing: dict[int, int] = {}

    # -- validation -----------------------------------------------------------------------------

    def check(self, h: BatchHeader) -> BatchMeta | None:
        """Validate an idempotent batch before append; a duplicate returns its original meta."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return None
        if h.producer_epoch < entry.epoch:
            raise SequenceError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {h.producer_epoch} older than {entry.epoch}",
            )
        if h.producer_epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                    return b
        if h.producer_epoch != entry.epoch:
            if h.base_sequence != 0 and entry.epoch != -1:
                raise SequenceError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {h.producer_epoch} must start at sequence 0, got {h.base_sequence}",
                )
        elif entry.batches and not _in_sequence(entry.last_seq, h.base_sequence):
            raise SequenceError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"expected sequence {entry.last_seq + 1}, got {h.base_sequence}",
            )
        return None

    # -- applying -------------------------------------------------------------------------------

    def apply(self, h: BatchHeader, first_offset: int, last_offset: int) -> None:
        """Record an appended data batch (also used when replaying the log)."""
        if h.producer_id < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerEntry(h.producer_id)
        if h.producer_epoch != entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        if h.is_control:
            return
        if h.base_sequence >= 0:
            entry.batches.append(
                BatchMeta(h.base_sequence, h.last_sequence, first_offset, last_offset)
            )
        if h.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self.ongoing[first_offset] = h.producer_id

    def complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """A control record ended the producer's transaction; returns its first offset or -1."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, producer_epoch)
        if producer_epoch > entry.epoch:
            # a marker under a newer epoch (a fence, or transactions v2's bump at every end):
            # that epoch's batches start again at sequence 0, so the old ones are no duplicates
            entry.epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        first = entry.txn_first_offset
        if first >= 0:
            self.ongoing.pop(first, None)
            entry.txn_first_offset = -1
        return first

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing) if self.ongoing else None

    def truncate(self) -> None:
        """Forget everything (before a replay after truncation)."""
        self.producers.clear()
        self.ongoing.clear()

    # -- snapshots ------------------------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, f"{offset:020d}.snapshot")

    def snapshot_offsets(self, names: list[str] | None = None) -> list[int]:
        """Offsets of the snapshots in the directory (`names`: its listing, if just taken)."""
        if names is None:
            try:
                names = os.listdir(self.dir)
            except FileNotFoundError:
                return []
        return sorted(int(n[:-9]) for n in names if n.endswith(".snapshot") and n[:-9].isdigit())

    def write_snapshot(self, offset: int, sync: bool = False) -> str:
        """Write the snapshot at `offset` (its path); `sync`: fsync'd too, as Kafka's
        takeSnapshot at a clean stop (a roll's is synced by the flush it schedules)."""
        body = bytearray()
        count = 0
        for e in self.producers.values():
            for b in e.batches or (None,):
                body += _ENTRY.pack(
                    e.producer_id,
                    e.epoch,
                    b.last_seq if b else -1,
                    b.last_offset if b else -1,
                    b.last_offset - b.first_offset if b else 0,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.txn_first_offset,
                )
                count += 1
        body = bytearray(struct.pack(">i", count)) + body
        data = struct.pack(">hI", 1, crc32c(bytes(body))) + body
        path = self._snapshot_path(offset)
        if self._last_snapshot == (offset, data) and os.path.exists(path):
            if sync and not self._snapshot_synced:
                _fsync_path(path)
                self._snapshot_synced = True
            return path
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self._last_snapshot = (offset, bytes(data))
        self._snapshot_synced = sync
        for old in self.snapshot_offsets()[:-2]:
            os.unlink(self._snapshot_path(old))
        return path

    def delete_snapshots_after(self, offset: int, names: list[str] | None = None) -> None:
        for off in self.snapshot_offsets(names):
            if off > offset:
                try:
                    os.unlink(self._snapshot_path(off))
                except FileNotFoundError:
                    pass

    def load_snapshot(self, max_offset: int, names: list[str] | None = None) -> int:
        """Load the newest valid snapshot at or below `max_offset`; returns its offset or 0."""
        self.truncate()
        for off in reversed(self.snapshot_offsets(names)):
            if off > max_offset:
                continue
            try:
                self._read_snapshot(self._snapshot_path(off), off)
                return off
            except (ValueError, struct.error) as exc:
                log.warning("bad producer snapshot %s: %s", self._snapshot_path(off), exc)
                self.truncate()
        return 0

    def _read_snapshot(self, path: str, offset: int) -> None:
        with open(path, "rb") as f:
            data = f.read()
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != 1 or crc32c(data[6:]) != crc:
            raise ValueError("version or crc mismatch")
        self._last_snapshot = (offset, data)
        # found on disk at a start: not synced again at close (as Kafka's takeSnapshot, which
        # writes none at an offset that has one), so a stop of many unchanged logs stays quick
        self._snapshot_synced = True
        pos = _HEAD.size
        if len(data) != pos + count * _ENTRY.size:
            raise ValueError(f"{len(data)} bytes for {count} entries")
        for _ in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, cepoch, txn_first = _ENTRY.unpack_from(
                data, pos
            )
            pos += _ENTRY.size
            entry = self.producers.get(pid) or ProducerEntry(pid)
            entry.epoch, entry.coordinator_epoch = epoch, cepoch
            entry.txn_first_offset, entry.last_timestamp = txn_first, ts
            if last_offset >= 0:
                first_seq = last_seq - delta if last_seq >= delta else last_seq - delta + 2**31
                entry.batches.append(
                    BatchMeta(first_seq, last_seq, last_offset - delta, last_offset)
                )
            self.producers[pid] = entry
            if txn_first >= 0:
                self.ongoing[txn_first] = pid
