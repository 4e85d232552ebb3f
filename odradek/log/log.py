"""A partition's log, as Kafka's UnifiedLog: segments, offsets, reads, rolls and truncation.

Appends assign offsets by writing them into the batch headers (outside the CRC) and then write the
whole produce payload with one `pwrite`. Reads return file regions. Everything here is synchronous
and called from the broker's event loop; the partition's lock makes one writer at a time.
"""

from __future__ import annotations

import base64
import bisect
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from odradek.clock import now_ms
from odradek.log import checkpoints, reader
from odradek.log import flusher as group_flush
from odradek.log.config import LONG_MAX, LogConfig
from odradek.log.disk_faults import LogDir, storage_op
from odradek.log.leader_epoch import LeaderEpochCache
from odradek.log.producer_state import ProducerStateManager
from odradek.log.segment import LogSegment
from odradek.log.transactions import collect_aborted, complete_transaction, replay_marker
from odradek.log.txn_index import AbortedTxn
from odradek.wire.batch import (
    BatchHeader,
    CorruptRecordError,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from odradek.wire.compression import max_decompressed_size
from odradek.wire.records import Record, decode_records
from odradek.wire.regions import FileRegion

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
PREFIX_PATCH = 16  # base_offset int64, batch_length int32, partition_leader_epoch int32
PARTITION_METADATA = "partition.metadata"


class OffsetOutOfRange(Exception):
    """A fetch below the log start offset or above the log end offset."""


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless LogAppendTime
    max_timestamp: int


def write_partition_metadata(directory: str, topic_id: uuid.UUID) -> None:
    """The partition's topic id (Kafka's PartitionMetadataFile): replaced atomically now and
    fsync'd soon after in the fsync thread, as Kafka flushes it on its scheduler, so that a
    machine losing power keeps it (written on the loop for every partition created)."""
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    checkpoints.write_soon(
        os.path.join(directory, PARTITION_METADATA), f"version: 0\ntopic_id: {encoded}\n"
    )


def read_partition_metadata(directory: str) -> uuid.UUID | None:
    try:
        with open(os.path.join(directory, PARTITION_METADATA), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "topic_id":
                    raw = value.strip()
                    return uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (FileNotFoundError, ValueError):
        return None
    return None


class Log:
    """Segments of one topic-partition in `directory` (named `<topic>-<partition>`)."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
        log_dir: LogDir | None = None,
    ) -> None:
        self.dir = directory
        self.log_dir = log_dir  # health of the data dir holding this log (disk_faults.py)
        self.topic = topic
        self.partition = partition
        self.config = config
        os.makedirs(directory, exist_ok=True)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.producer_state = ProducerStateManager(directory)
        self.epochs = LeaderEpochCache(directory)
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self._unflushed = 0
        self._last_flush_ms = now_ms()
        # group commit (flusher.py): the end of what is fsync'ed, the end of what a requested
        # flush must sync before it is visible, and the round that will sync it
        self.synced_offset = recovery_point
        self._flush_barrier = 0
        self.truncations = 0  # a flush round that began before a truncation syncs nothing
        self.pending_flush: group_flush.FlushRound | None = None
        self.unsynced_snapshot: str | None = None  # written by a roll, synced by its flush
        self._load(clean_shutdown)

    # -- loading --------------------------------------------------------------------------------

    def _load(self, clean_shutdown: bool) -> None:
        names = os.listdir(self.dir)  # once: 10,000 partitions make every listing count
        bases = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
        for name in names:
            if name.endswith((".index", ".timeindex", ".txnindex")):
                stem = name.split(".")[0]
                if stem.isdigit() and int(stem) not in bases:
                    os.unlink(os.path.join(self.dir, name))  # orphaned index
            elif name.endswith((".cleaned", ".swap", ".deleted", ".tmp")):
                path = os.path.join(self.dir, name)
                if os.path.isfile(path):
                    os.unlink(path)
        created = now_ms()
        for base in bases:
            seg = self._open_segment(base, created)
            self.segments.append(seg)
            self._bases.append(base)
        if not self.segments:
            self._new_segment(max(self.log_start_offset, 0))
        first_recovered = self._recover(clean_shutdown)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        for seg in self.segments[:-1]:
            seg.seal()
        self.epochs.truncate_from_end(self.log_end_offset)
        # snapshots past a recovered (cut) log end describe records that are gone; left there, a
        # later start would load one once the log grew past it again. Snapshots past the start
        # of the first recovered segment are not trusted either: written before the crash, one
        # may have reached the disk while the records below its offset did not (a power loss
        # keeps no order between two files), and it would claim sequences the log no longer
        # has (a retry then looks like a duplicate and is lost) and skip the replay that
        # rebuilds the recovered segments' .txnindex. As Kafka's LogLoader.recoverSegment
        # (ProducerStateManager.truncateAndReload to the segment's base offset).
        limit = self.log_end_offset
        if first_recovered is not None:
            limit = min(limit, first_recovered)
        self.producer_state.delete_snapshots_after(limit, names)
        self._rebuild_producer_state(names, limit)

    def _open_segment(self, base: int, created: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
            created,
            self.log_dir,
        )

    def _recover(self, clean_shutdown: bool) -> int | None:
        """Recover every segment that may hold unflushed data; load the others' tails.
        Returns the base offset of the first segment recovered (None: none was): its
        `.txnindex` and every later one's are rebuilt by the producer-state replay."""
        first: int | None = None
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            needs = not clean_shutdown and (nxt is None or nxt > self.recovery_point)
            if needs or seg.index.entries == 0 and seg.size > 0:
                if needs:  # as Kafka's "Recovering unflushed segment"
                    log.info(
                        "%s-%d: recovering segment %d (past the recovery point %d)",
                        self.topic,
                        self.partition,
                        seg.base_offset,
                        self.recovery_point,
                    )
                truncated, valid = seg.recover()
                if first is None:
                    first = seg.base_offset
                for _pos, h in valid:  # as Kafka's LogSegment.recover: epochs from the batches
                    self.epochs.assign(h.partition_leader_epoch, h.base_offset)
                if truncated:
                    log.warning(
                        "%s-%d: truncated %d bytes of torn or corrupt data in %s",
                        self.topic,
                        self.partition,
                        truncated,
                        seg.path,
                    )
                    # everything after a corrupt batch is suspect: drop later segments
                    for later in self.segments[i + 1 :]:
                        later.delete()
                    del self.segments[i + 1 :]
                    del self._bases[i + 1 :]
                    break
            else:
                seg.load_tail()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        return first

    def _rebuild_producer_state(
        self, names: list[str] | None = None, limit: int | None = None
    ) -> None:
        """Load the newest snapshot at or below `limit` (default: the log end) and replay batch
        headers after it (no record decoding). `names`: the directory's listing, when just
        taken (snapshots past `limit` may have gone since: they are not loaded anyway)."""
        top = self.log_end_offset if limit is None else limit
        start = self.producer_state.load_snapshot(top, names)
        start = max(start, self.log_start_offset)
        for seg in self.segments:
            if seg.next_offset <= start:
                continue
            for bp in seg.batches_from(seg.index.lookup(start) if seg.base_offset < start else 0):
                if bp.last_offset < start:
                    continue
                h = seg.read_header(bp.position)
                self._apply_loaded_batch(h, seg, bp.position)

    def _apply_loaded_batch(self, h: BatchHeader, seg: LogSegment, position: int) -> None:
        if h.is_control:  # a transaction marker: ends the txn, aborts go to the .txnindex
            replay_marker(self, seg, h, seg.read_bytes(position, h.size))
            return
        self.producer_state.apply(h, h.base_offset, h.last_offset)

    def moved_to(self, directory: str) -> None:
        """The partition directory was renamed to `directory` (dir_move.py): segments opened
        again (the LRU of open files may have let them go) are opened from there."""
        self.dir = directory
        for seg in self.segments:
            seg.moved_to(directory)

    # -- offsets --------------------------------------------------------------------------------

    @property
    def offline(self) -> bool:
        """The data dir failed (Kafka's offline log dir): no reads or writes until a restart."""
        return self.log_dir is not None and self.log_dir.offline

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _segment_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def segments_from(self, offset: int) -> list[LogSegment]:
        """The segment holding `offset` and every later one (a snapshot of the list)."""
        return self.segments[self._segment_for(offset) :]

    # -- iterating (log/reader.py) --------------------------------------------------------------

    def batches(
        self, from_offset: int | None = None, to_offset: int | None = None
    ) -> Iterator[reader.LogBatch]:
        """Every stored batch from the one holding `from_offset` to `to_offset` (exclusive)."""
        return reader.batches(self, from_offset, to_offset)

    def records(
        self, from_offset: int | None = None, to_offset: int | None = None, name: str = ""
    ) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """(header, records) of every decodable batch in that range, decoded within the
        decompression bound; an undecodable batch is logged once and skipped."""
        return reader.records(self, from_offset, to_offset, name)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions a read_committed fetch from `fetch_offset` must be told of
        (Kafka's UnifiedLog.collectAbortedTransactions)."""
        return collect_aborted(self, fetch_offset, upper_bound)

    # -- appending ------------------------------------------------------------------------------

    @storage_op
    def append_as_leader(
        self,
        buf: bytes | bytearray,
        batches: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        log_append_time: bool,
        defer_flush: bool = False,
    ) -> AppendInfo:
        """Assign offsets to validated batches in `buf` and write them in one call.

        With `defer_flush` (a produce request, on the event loop) a flush this append makes due
        is left to the loop's group flusher: `pending_flush` is the round to wait for.

        A bytearray is patched in place; immutable request bytes are not copied: each batch's
        16-byte prefix (base offset, length, leader epoch) is patched in a small copy and the
        pieces are written with one pwritev.
        """
        first = offset = self.log_end_offset
        now = now_ms()
        max_ts, off_max = -1, -1
        # a bytearray is patched in place; LogAppendTime payloads always are one (validator.py)
        writable = buf if isinstance(buf, bytearray) else None
        pieces: list[bytes | bytearray | memoryview] = []
        view = memoryview(buf)
        for pos, h in batches:
            if writable is not None:
                set_base_offset(writable, pos, offset)
                set_partition_leader_epoch(writable, pos, leader_epoch)
            else:
                prefix = bytearray(view[pos : pos + PREFIX_PATCH])
                set_base_offset(prefix, 0, offset)
                set_partition_leader_epoch(prefix, 0, leader_epoch)
                pieces += (prefix, view[pos + PREFIX_PATCH : pos + h.size])
            last = offset + h.last_offset_delta
            ts = h.max_timestamp
            if log_append_time:
                if writable is None:
                    raise TypeError("LogAppendTime needs the payload as a bytearray")
                set_log_append_time(writable, pos, now)
                ts = now
            if ts > max_ts:
                max_ts, off_max = ts, last
            offset = last + 1
        self.epochs.assign(leader_epoch, first)
        self._write(
            buf if writable is not None else pieces, first, offset - 1, max_ts, off_max, defer_flush
        )
        position_offset = first
        for _pos, h in batches:
            self.producer_state.apply(h, position_offset, position_offset + h.last_offset_delta)
            position_offset += h.last_offset_delta + 1
        return AppendInfo(first, offset - 1, now if log_append_time else -1, max_ts)

    @storage_op
    def append_as_follower(
        self, buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
    ) -> None:
        """Append batches that already carry offsets (replication); they must follow the end."""
        if not batches:
            return
        first = batches[0][1].base_offset
        last = batches[-1][1].last_offset
        max_ts, off_max = -1, -1
        for _pos, h in batches:
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, h.last_offset
            self.epochs.assign(h.partition_leader_epoch, h.base_offset)
        self._write(buf, first, last, max_ts, off_max)
        for pos, h in batches:
            if h.is_control:
                replay_marker(self, self.active, h, memoryview(buf)[pos : pos + h.size])
            else:
                self.producer_state.apply(h, h.base_offset, h.last_offset)

    @storage_op
    def append_control(
        self,
        buf: bytearray,
        header: BatchHeader,
        leader_epoch: int,
        coordinator_epoch: int | None = None,
        aborted: bool = False,
    ) -> int:
        """Append one control batch (transaction marker); returns its offset.

        With `coordinator_epoch` the marker also ends the producer's transaction here (and an
        abort goes into the .txnindex), inside this storage op: a failed index write takes
        the log dir offline like a failed .log write (Kafka's UnifiedLog.append)."""
        offset = self.log_end_offset
        set_base_offset(buf, 0, offset)
        set_partition_leader_epoch(buf, 0, leader_epoch)
        self.epochs.assign(leader_epoch, offset)
        self._write(buf, offset, offset, header.max_timestamp, offset)
        if coordinator_epoch is not None:
            complete_transaction(
                self,
                self.active,
                header.producer_id,
                header.producer_epoch,
                coordinator_epoch,
                offset,
                aborted,
            )
        return offset

    def _write(
        self,
        data: bytes | bytearray | memoryview | list,
        first: int,
        last: int,
        max_ts: int,
        off_max: int,
        defer_flush: bool = False,
    ) -> None:
        size = sum(len(p) for p in data) if isinstance(data, list) else len(data)
        self._maybe_roll(size, max_ts, last)
        self.active.append(data, first, last, max_ts, off_max)
        self._unflushed += last - first + 1
        cfg = self.config
        if self._unflushed >= cfg.flush_messages or (
            cfg.flush_ms != LONG_MAX and now_ms() - self._last_flush_ms >= cfg.flush_ms
        ):
            flusher = group_flush.for_running_loop() if defer_flush else None
            if flusher is None:
                self.flush()
            else:  # one fsync round, off the loop, serves every log waiting (flusher.py)
                self._unflushed = 0
                self._last_flush_ms = now_ms()
                self._flush_barrier = self.log_end_offset
                self.pending_flush = flusher.request(self)

    def _maybe_roll(self, incoming: int, max_ts: int, last_offset: int) -> None:
        seg = self.active
        if seg.size == 0:
            return
        cfg = self.config
        # Kafka's LogSegment.timeWaitedForRoll: with timestamps in the segment, the incoming
        # batch's max timestamp minus the first batch's; without, the wall clock since creation
        first_ts = seg.rolling_based_timestamp()
        age_ms = max_ts - first_ts if first_ts >= 0 else now_ms() - seg.created_ms
        if (
            seg.size + incoming > cfg.segment_bytes
            or age_ms > cfg.segment_ms - cfg.segment_jitter_ms
            or seg.index.full
            or seg.time_index.full
            or last_offset - seg.base_offset > INT32_MAX
        ):
            self.roll()

    @storage_op
    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset."""
        seg = self.active
        if seg.size == 0:
            return seg
        seg.seal()
        snapshot = self.producer_state.write_snapshot(self.log_end_offset)
        new = self._new_segment(self.log_end_offset)
        log.debug("%s-%d: rolled segment at offset %d", self.topic, self.partition, new.base_offset)
        # as Kafka's UnifiedLog.roll: a flush of the sealed segment and of the roll's snapshot,
        # off the loop and not waited for, moves the recovery point to the new segment. Without
        # it nothing below the active segment is synced until a flush is due (never, by
        # default) and a power loss would empty every sealed segment since the last one
        flusher = group_flush.for_running_loop()
        if flusher is not None:
            self.unsynced_snapshot = snapshot
            flusher.request(self)
        return new

    def take_unsynced_snapshot(self) -> str | None:
        """The producer snapshot a flush round must sync first (the last roll's), if any."""
        path, self.unsynced_snapshot = self.unsynced_snapshot, None
        return path

    def _new_segment(self, base: int) -> LogSegment:
        seg = self._open_segment(base, now_ms())
        seg.next_offset = base
        self.segments.append(seg)
        self._bases.append(base)
        return seg

    def unsynced_segments(self) -> list[LogSegment]:
        """The segments holding bytes past `synced_offset`, newest first: the active one, and
        those a roll sealed since the last sync (a seal syncs indexes, not the .log)."""
        out: list[LogSegment] = []
        synced = self.synced_offset
        for seg in reversed(self.segments):
            if seg.next_offset <= synced and out:
                break
            out.append(seg)
            if seg.base_offset <= synced:
                break
        return out

    def note_synced(self, upto: int, truncations: int) -> None:
        """A group flush round fsync'd every segment from `synced_offset` up to `upto`:
        that is durable, so the recovery point (checkpointed with the others, and where the next
        unclean start begins its scan) moves there too, as Kafka's flush moves it. Nothing moves
        when the log was truncated since the round began (the bytes below `upto` may be new)."""
        if truncations != self.truncations:
            return
        upto = min(upto, self.log_end_offset)
        if upto > self.synced_offset:
            self.synced_offset = upto
        if upto > self.recovery_point:
            self.recovery_point = upto

    @storage_op
    def flush(self) -> None:
        for seg in self.unsynced_segments()[1:]:  # sealed by a roll since the last sync
            seg.sync()
            seg.txn_index.flush()
        self.active.flush()
        self.recovery_point = self.log_end_offset
        self.synced_offset = self.log_end_offset
        self._unflushed = 0
        self._last_flush_ms = now_ms()

    @property
    def visible_end(self) -> int:
        """The end a single-replica high watermark may reach: the log end, unless a requested
        group flush has not synced its data yet (then what is synced), as Kafka's flush inside
        the append never lets readers see unflushed data that was due for a flush."""
        end = self.log_end_offset
        if self.synced_offset >= self._flush_barrier:
            return end
        return min(self.synced_offset, end)

    def close(self) -> None:
        """Clean close: flush, snapshot producer state, trim indexes. A log already flushed to
        its end (nothing appended since) is not fsync'd again."""
        if self._unflushed or self.recovery_point < self.log_end_offset:
            self.flush()
        self.producer_state.write_snapshot(self.log_end_offset, sync=True)
        for seg in self.segments:
            seg.close()

    # -- reading --------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one: bool
    ) -> FileRegion | None:
        """Batches from `offset` bounded by `max_offset` (exclusive: high watermark or LSO)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset)
        if offset >= max_offset:
            return None
        i = self._segment_for(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            if max_offset >= seg.next_offset:
                max_position = seg.size
            else:
                max_position = seg.position_of(max_offset)
            region = seg.read(offset, max_bytes, max_position, min_one)
            if region is not None or max_offset <= seg.next_offset:
                return region
            i += 1  # offset lies in a gap left by compaction or at a segment end
        return None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, else None.

        As Kafka: the time index gives a starting batch, then batches are scanned on (across
        segments) past control batches and records below the log start offset.
        """
        for seg in self.segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= self.log_start_offset:
                continue
            start = seg.find_timestamp_position(timestamp)
            if start is None:
                continue
            for bp in seg.batches_from(start.position):
                if bp.last_offset < self.log_start_offset:
                    continue
                header = seg.read_header(bp.position)
                if header.is_control or header.max_timestamp < timestamp:
                    continue
                records = self._decode_for_lookup(seg, bp.position, bp.size)
                for r in records:
                    if r.timestamp >= timestamp and r.offset >= self.log_start_offset:
                        return r.offset, r.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (KIP-734)."""
        best = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best[0]):
                best = (seg.max_timestamp, seg)
        if best is None:
            return None
        ts, seg = best
        bp = seg.find_timestamp_position(ts)
        if bp is None:
            return None
        for r in self._decode_for_lookup(seg, bp.position, bp.size):
            if r.timestamp == ts:
                return r.offset, r.timestamp
        return None

    def _decode_for_lookup(self, seg: LogSegment, position: int, size: int) -> list[Record]:
        """The records of one batch for a timestamp lookup; an unreadable batch (bad framing,
        a compressed section over the decompression bound) is skipped with one log line."""
        bound = max_decompressed_size(self.config.max_message_bytes)
        try:
            return decode_records(seg.read_bytes(position, size), max_size=bound)[1]
        except CorruptRecordError as exc:
            log.warning(
                "%s-%d: batch at position %d of %s skipped by a timestamp lookup: %s",
                self.topic,
                self.partition,
                position,
                seg.path,
                exc,
            )
            return []

    # -- deleting -------------------------------------------------------------------------------

    @storage_op
    def truncate_to(self, offset: int) -> None:
        """Remove everything at or after `offset` (a follower's diverged tail)."""
        if offset >= self.log_end_offset:
            return
        while len(self.segments) > 1 and self.active.base_offset >= offset:
            seg = self.segments.pop()
            self._bases.pop()
            seg.delete()
        seg = self.active
        seg.truncate_to(offset)
        seg.index.resize(self.config.segment_index_bytes)
        seg.time_index.resize(self.config.segment_index_bytes)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.producer_state.delete_snapshots_after(self.log_end_offset)
        self._rebuild_producer_state()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.synced_offset = min(self.synced_offset, self.log_end_offset)
        self._flush_barrier = min(self._flush_barrier, self.log_end_offset)
        self.truncations += 1

    @storage_op
    def truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self.segments:
            seg.delete()
        self.segments.clear()
        self._bases.clear()
        self.producer_state.truncate()
        self.producer_state.delete_snapshots_after(-1)
        self._new_segment(offset)
        self.log_start_offset = offset
        self.recovery_point = offset
        self.synced_offset = self._flush_barrier = offset
        self.truncations += 1

    @storage_op
    def advance_log_start(self, offset: int) -> None:
        """DeleteRecords: move the log start offset and drop segments wholly below it."""
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.epochs.truncate_from_start(offset)
        self._delete_segments(lambda seg, nxt: nxt is not None and nxt <= offset, "log start")

    def apply_retention(self, now: int, high_watermark: int | None = None) -> int:
        """Delete whole segments past retention.ms / retention.bytes; returns how many.

        `now` is the broker's wall clock (odradek.clock), compared with each segment's largest
        timestamp as Kafka's UnifiedLog.deleteRetentionMsBreachedSegments does. Only segments
        wholly below `high_watermark` (default: the log end) go, as in Kafka's deleteOldSegments:
        the log start offset never passes the high watermark, whatever the clock says."""
        cfg = self.config
        if not cfg.delete or self.offline:
            return 0
        hw = self.log_end_offset if high_watermark is None else high_watermark
        deleted = 0
        if cfg.retention_ms >= 0:
            limit = now - cfg.retention_ms
            active = self.active
            if active.size and 0 <= active.max_timestamp < limit and hw >= self.log_end_offset:
                self.roll()
            deleted += self._delete_segments(
                lambda seg, nxt: (
                    nxt is not None
                    and nxt <= hw
                    and (
                        0 <= seg.max_timestamp < limit
                        or seg.size
                        and seg.max_timestamp < 0
                        and seg.created_ms < limit
                    )
                ),
                "retention.ms",
            )
        if cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes

            def over(seg: LogSegment, nxt: int | None) -> bool:
                nonlocal excess
                if nxt is None or nxt > hw or excess < seg.size:
                    return False
                excess -= seg.size
                return True

            deleted += self._delete_segments(over, "retention.bytes")
        return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, int], object], reason: str) -> int:
        """Delete oldest segments while `predicate(segment, next segment's base)` is truthy."""
        count = 0
        while len(self.segments) > 1:
            seg = self.segments[0]
            if not predicate(seg, self.segments[1].base_offset):
                break
            self.segments.pop(0)
            self._bases.pop(0)
            seg.delete()
            count += 1
            log.info(
                "%s-%d: deleted segment %d (%s)",
                self.topic,
                self.partition,
                seg.base_offset,
                reason,
            )
        if count:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.epochs.truncate_from_start(self.log_start_offset)
        return count

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        for seg in self.segments:
            seg.delete()
        self.segments.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
