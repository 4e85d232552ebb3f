"""Log compaction, as Kafka's LogCleaner (cleanup.policy=compact, KIP-534 delete horizons).

A compacted log keeps, for every key, the record with its latest offset. Cleaning a log:

1. The cleanable range is every sealed segment below the first uncleanable offset: the smallest
   of the active segment's base offset, the last stable offset (the high watermark without open
   transactions), and the first segment with records newer than `min.compaction.lag.ms`.
2. An offset map (key -> latest offset) is built from the dirty part of that range, the part
   written since the last cleaning (`cleaner-offset-checkpoint`, Kafka's file).
3. Each cleanable segment is rewritten batch by batch: a record stays when no later offset in
   the map has its key; records of aborted transactions go; control batches (transaction
   markers) stay. A tombstone (null value) stays until its batch's delete horizon: the first
   cleaning that keeps it stamps the batch with `now + delete.retention.ms` (the has-delete-
   horizon attribute, the horizon in base_timestamp, record timestamps re-based on it), a later
   cleaning past the horizon drops it. Records keep their offsets, so a compacted log has gaps;
   batches keep their base offset and last offset delta (producer sequences stay valid), and an
   emptied batch that is its producer's last is kept as an empty header.
4. Each rewritten segment replaces the old one in place: the new `.log` and indexes are built in
   `cleaner-work/` inside the partition directory (with `LogSegment` itself), the old index files
   are removed, the new `.log` is renamed over the old one, then the new indexes are moved in. A
   crash at any point leaves either segment whole; missing indexes are rebuilt at load.

The expensive part (`build`) only reads sealed segments and writes new files, so the service runs
it in a worker thread; `swap` runs on the event loop, the only writer of the log's segment list.
Segments are rewritten one for one (no merging of small segments, unlike Kafka).

Like Kafka's LogCleaner (`abortCleaning` on topic deletion, `checkDone` between segments), the
work checks between batches whether the log was deleted or the cleaner is stopping, and then
gives up quietly (CleaningAborted); stopping the service waits for the worker thread to leave.
A batch that cannot be decoded (bad framing, or a compressed section inflating past
`max_decompressed_size(max.message.bytes)`) is kept as it is, with one log line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import now_ms
from odradek.log import reader
from odradek.log.checkpoints import read_checkpoint, write_checkpoint
from odradek.log.log import Log
from odradek.log.segment import LogSegment
from odradek.wire.batch import (
    DELETE_HORIZON_MASK,
    LOG_APPEND_TIME,
    BatchHeader,
    CorruptRecordError,
    parse_header,
)
from odradek.wire.compression import DEFAULT_MAX_DECOMPRESSED, max_decompressed_size
from odradek.wire.records import (
    ABORT,
    Record,
    build_batch_exact,
    decode_records,
    end_txn_marker,
)

log = logging.getLogger(__name__)

CHECKPOINT = "cleaner-offset-checkpoint"
WORK_DIR = "cleaner-work"


@dataclass(slots=True)
class CleanStats:
    segments: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


@dataclass(slots=True)
class Plan:
    """What one cleaning covers, fixed on the event loop before the work starts."""

    log: Log
    segments: list[LogSegment]
    first_dirty: int
    end: int  # first uncleanable offset: the base of the first segment not cleaned
    now: int
    delete_retention_ms: int
    producer_last_offsets: dict[int, int]
    sizes: list[int] = field(default_factory=list)  # of the segments, to see if they changed
    offset_map: dict[bytes, int] = field(default_factory=dict)
    aborted: set[tuple[int, int]] = field(default_factory=set)  # (segment base, position)
    # producer id -> [(first offset, last offset)] of aborted transactions, from the segments'
    # .txnindex: an abort marker may lie past the cleaned range
    aborted_ranges: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    built: dict[int, str] = field(default_factory=dict)  # segment base -> work dir with files
    horizon: int | None = None  # earliest delete horizon stamped or kept
    stats: CleanStats = field(default_factory=CleanStats)
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED  # bound on a batch's records section


class CleaningAborted(Exception):
    """The log was deleted, or the cleaner is stopping, while a cleaning was under way."""


# -- batches -----------------------------------------------------------------------------------


def encode_batch(h: BatchHeader, records: list[Record], horizon: int | None) -> bytes:
    """A v2 batch like `h` (offsets, producer, flags, codec) holding only `records`.

    With a delete horizon (KIP-534) the base timestamp is the horizon and record timestamps are
    deltas from it; otherwise it is the first record's timestamp, as a producer writes it.
    """
    log_append = h.timestamp_type == LOG_APPEND_TIME
    if horizon is not None:
        base_ts = horizon
    elif records:
        base_ts = h.max_timestamp if log_append else records[0].timestamp
    else:
        base_ts = h.base_timestamp
    attributes = h.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    if records:
        max_ts = h.max_timestamp if log_append else max(r.timestamp for r in records)
    else:
        max_ts = h.max_timestamp
    return build_batch_exact(
        [(r.key, r.value, r.headers, r.timestamp) for r in records],
        [r.offset - h.base_offset for r in records],
        base_offset=h.base_offset,
        attributes=attributes,
        codec=h.compression if records else 0,
        last_offset_delta=h.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        partition_leader_epoch=h.partition_leader_epoch,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
    )


# -- the cleaner -------------------------------------------------------------------------------


class LogCleaner:
    """Plans, builds and swaps the cleaning of one log at a time."""

    def __init__(self) -> None:
        # set from the event loop; the worker thread checks it between batches
        self.stopping = threading.Event()

    def _check(self, plan: Plan) -> None:
        if self.stopping.is_set():
            raise CleaningAborted("the cleaner is stopping")
        if not plan.log.segments:  # Log.delete empties the list before removing the files
            raise CleaningAborted("the log was deleted")

    def _segment_batches(self, plan: Plan, seg: LogSegment) -> Iterator[tuple[int, bytes]]:
        for batch in reader.segment_batches((seg,)):
            self._check(plan)
            yield batch.position, batch.read()

    def first_uncleanable(self, lg: Log, max_offset: int, now: int) -> int:
        end = min(lg.active.base_offset, max_offset)
        lag = lg.config.min_compaction_lag_ms
        if lag > 0:
            for seg in lg.segments[:-1]:
                newest = seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
                if newest > now - lag:
                    end = min(end, seg.base_offset)
                    break
        return end

    def cleanable_segments(self, lg: Log, end: int) -> list[LogSegment]:
        segs = lg.segments
        return [seg for i, seg in enumerate(segs[:-1]) if segs[i + 1].base_offset <= end]

    def dirty_ratio(self, lg: Log, first_dirty: int, max_offset: int, now: int) -> float:
        end = self.first_uncleanable(lg, max_offset, now)
        segs = self.cleanable_segments(lg, end)
        total = sum(s.size for s in segs)
        dirty = sum(s.size for s in segs if s.base_offset >= first_dirty)
        return dirty / total if total else 0.0

    def plan(self, lg: Log, first_dirty: int, max_offset: int, now: int) -> Plan | None:
        end = self.first_uncleanable(lg, max_offset, now)
        segs = self.cleanable_segments(lg, end)
        if not segs:
            return None
        end = lg.segments[len(segs)].base_offset
        last_offsets = {
            pid: e.batches[-1].last_offset
            for pid, e in lg.producer_state.producers.items()
            if e.batches
        }
        ranges: dict[int, list[tuple[int, int]]] = {}
        for seg in lg.segments:
            for entry in getattr(getattr(seg, "txn_index", None), "entries", ()):
                ranges.setdefault(entry.producer_id, []).append(
                    (entry.first_offset, entry.last_offset)
                )
        return Plan(
            lg,
            segs,
            max(first_dirty, lg.log_start_offset),
            end,
            now,
            lg.config.delete_retention_ms,
            last_offsets,
            [s.size for s in segs],
            aborted_ranges=ranges,
            max_decompressed=max_decompressed_size(lg.config.max_message_bytes),
        )

    # -- build (thread-safe: reads sealed segments, writes the work directory) ----------------

    def build(self, plan: Plan) -> Plan:
        """Write the cleaned segments into the work directory; CleaningAborted if the log is
        deleted or the cleaner stops meanwhile."""
        try:
            self._scan(plan)
            work = os.path.join(plan.log.dir, WORK_DIR)
            shutil.rmtree(work, ignore_errors=True)
            self._check(plan)
            os.mkdir(work)  # never makedirs: that would bring a deleted partition back
            for seg in plan.segments:
                self._check(plan)
                target = os.path.join(work, str(seg.base_offset))
                os.mkdir(target)
                self._rewrite(plan, seg, target)
                plan.built[seg.base_offset] = target
        except (OSError, ValueError):
            # a deleted log's directory vanishes (FileNotFoundError) and its files close
            # (ValueError) under the worker: that is the deletion, not a failure
            self._check(plan)
            raise
        return plan

    def _scan(self, plan: Plan) -> None:
        """The offset map of the dirty part, and which transactional batches were aborted."""
        open_txns: dict[int, list[tuple[int, int]]] = {}
        found_by_marker = False
        for seg in plan.segments:
            for position, data in self._segment_batches(plan, seg):
                try:
                    h, records = decode_records(data, max_size=plan.max_decompressed)
                except CorruptRecordError:
                    continue
                if h.is_control:
                    pending = open_txns.pop(h.producer_id, [])
                    marker = end_txn_marker(records)
                    if marker is not None and marker[0] == ABORT:
                        plan.aborted.update(pending)
                        found_by_marker = found_by_marker or bool(pending)
                    continue
                if h.is_transactional:
                    where = (seg.base_offset, position)
                    if any(
                        first <= h.base_offset <= last
                        for first, last in plan.aborted_ranges.get(h.producer_id, ())
                    ):
                        plan.aborted.add(where)
                        continue
                    open_txns.setdefault(h.producer_id, []).append(where)
                if h.base_offset < plan.first_dirty:
                    continue
                for r in records:
                    if r.key is not None:
                        plan.offset_map[bytes(r.key)] = r.offset
        # batches of transactions still open at the end of the range are not aborted (yet)
        if found_by_marker:
            self._unmap_aborted(plan)

    def _unmap_aborted(self, plan: Plan) -> None:
        """Aborted records never count as a key's latest value: rebuild the map without them."""
        plan.offset_map.clear()
        for seg in plan.segments:
            for position, data in self._segment_batches(plan, seg):
                if (seg.base_offset, position) in plan.aborted:
                    continue
                try:
                    h, records = decode_records(data, max_size=plan.max_decompressed)
                except CorruptRecordError:
                    continue
                if h.is_control or h.base_offset < plan.first_dirty:
                    continue
                for r in records:
                    if r.key is not None:
                        plan.offset_map[bytes(r.key)] = r.offset

    def _keep(self, plan: Plan, h: BatchHeader, r: Record) -> bool:
        if r.key is None:
            return False  # a compacted topic needs keys; Kafka drops these too
        # the map covers the whole dirty range, so no record of the plan lies past it
        if r.offset < plan.offset_map.get(bytes(r.key), -1):
            return False
        if r.value is not None:
            return True
        horizon = h.base_timestamp if h.has_delete_horizon else None
        return horizon is None or plan.now < horizon

    def _rewrite(self, plan: Plan, seg: LogSegment, target: str) -> None:
        cfg = plan.log.config
        out = LogSegment(
            target,
            seg.base_offset,
            cfg.segment_index_bytes,
            cfg.index_interval_bytes,
            seg.created_ms,
        )
        stats = plan.stats
        stats.segments += 1
        stats.bytes_before += seg.size
        try:
            for position, data in self._segment_batches(plan, seg):
                kept = self._filter_batch(plan, seg, position, data)
                if kept is None:
                    continue
                h, raw = kept
                max_ts = h.max_timestamp
                out.append(raw, h.base_offset, h.last_offset, max_ts, h.last_offset)
                stats.bytes_after += len(raw)
        finally:
            out.close()

    def _filter_batch(
        self, plan: Plan, seg: LogSegment, position: int, data: bytes
    ) -> tuple[BatchHeader, bytes] | None:
        try:
            h, records = decode_records(data, max_size=plan.max_decompressed)
        except CorruptRecordError as exc:
            log.warning(
                "%s: unreadable batch at position %d kept as is: %s", seg.path, position, exc
            )
            return parse_header(data), data
        stats = plan.stats
        stats.records_read += len(records)
        if h.is_control:
            return h, data
        if (seg.base_offset, position) in plan.aborted:
            kept: list[Record] = []
        else:
            kept = [r for r in records if self._keep(plan, h, r)]
        stats.records_kept += len(kept)
        stats.tombstones_dropped += sum(1 for r in records if r.value is None) - sum(
            1 for r in kept if r.value is None
        )
        tombstones = any(r.value is None for r in kept)
        horizon = h.base_timestamp if h.has_delete_horizon else None
        if tombstones:
            if horizon is None:
                horizon = plan.now + plan.delete_retention_ms
            plan.horizon = horizon if plan.horizon is None else min(plan.horizon, horizon)
        if not kept:
            if (
                h.producer_id >= 0
                and plan.producer_last_offsets.get(h.producer_id) == h.last_offset
            ):
                new = encode_batch(h, [], None)  # keeps the producer's last sequence
                return parse_header(new), new
            return None
        if len(kept) == len(records) and (horizon is None or h.has_delete_horizon):
            return h, data
        new = encode_batch(h, kept, horizon if tombstones else None)
        return parse_header(new), new

    # -- swap (event loop) --------------------------------------------------------------------

    def swap(self, plan: Plan) -> CleanStats | None:
        """Put the rebuilt segments in place; None (nothing changed) if the log moved on."""
        lg = plan.log
        if self.stopping.is_set() or not lg.segments:
            self.discard(plan)
            return None
        current = {id(s) for s in lg.segments[:-1]}
        if any(
            id(s) not in current or s.size != size
            for s, size in zip(plan.segments, plan.sizes, strict=True)
        ):
            log.info(
                "%s-%d: segments changed while cleaning; cleaning abandoned", lg.topic, lg.partition
            )
            self.discard(plan)
            return None
        for old in plan.segments:
            index = next(i for i, s in enumerate(lg.segments) if s is old)
            lg.segments[index] = self._replace(lg, old, plan.built[old.base_offset])
        self.discard(plan)
        return plan.stats

    def _replace(self, lg: Log, old: LogSegment, built: str) -> LogSegment:
        base = old.base_offset
        name = f"{base:020d}"
        old.detach()  # out of the LRU of open files; its file stays open for its readers
        for suffix in (".index", ".timeindex"):
            try:
                os.unlink(os.path.join(lg.dir, name + suffix))
            except FileNotFoundError:
                pass
        os.replace(os.path.join(built, name + ".log"), old.path)
        for suffix in (".timeindex", ".index"):
            os.replace(os.path.join(built, name + suffix), os.path.join(lg.dir, name + suffix))
        cfg = lg.config
        new = LogSegment(
            lg.dir, base, cfg.segment_index_bytes, cfg.index_interval_bytes, old.created_ms
        )
        new.load_tail()
        new.next_offset = max(new.next_offset, old.next_offset)
        new.seal()
        return new

    def discard(self, plan: Plan) -> None:
        shutil.rmtree(os.path.join(plan.log.dir, WORK_DIR), ignore_errors=True)
        if not plan.log.segments:
            # deleted while we wrote in it: remove the directory if our files were all it kept
            # (a topic re-created under the same name has files there, and stays)
            try:
                os.rmdir(plan.log.dir)
            except OSError:
                pass

    def clean(
        self, lg: Log, first_dirty: int, max_offset: int, now: int | None = None
    ) -> tuple[Plan | None, CleanStats | None]:
        """Plan, build and swap in one go (tests, and logs small enough not to need a thread)."""
        plan = self.plan(lg, first_dirty, max_offset, now_ms() if now is None else now)
        if plan is None:
            return None, None
        self.build(plan)
        return plan, self.swap(plan)


# -- the service -------------------------------------------------------------------------------


class LogCleanerService:
    """Runs compaction in the background, every `log.cleaner.backoff.ms`.

    `logs()` gives (log, last stable offset) for every partition of this broker; logs whose
    `cleanup.policy` includes compact are cleaned when their dirty ratio reaches
    `min.cleanable.dirty.ratio`, when a record is older than `max.compaction.lag.ms`, or when a
    tombstone's delete horizon has passed. The first dirty offset of each log is kept in each
    data directory's `cleaner-offset-checkpoint`.
    """

    def __init__(
        self,
        logs: Callable[[], list[tuple[Log, int]]],
        *,
        enabled: bool = True,
        backoff_ms: int = 15000,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.logs = logs
        self.enabled = enabled
        self.backoff_ms = backoff_ms
        self.clock = clock
        self.cleaner = LogCleaner()
        self.first_dirty: dict[tuple[str, int], int] = {}
        self.horizons: dict[tuple[str, int], int] = {}
        self._loaded_dirs: set[str] = set()
        self._task: asyncio.Task[Any] | None = None
        self.cleanings = 0

    async def start(self) -> None:
        self.cleaner.stopping.clear()
        if self.enabled:
            self._task = asyncio.create_task(self._run(), name="log-cleaner")

    async def stop(self) -> None:
        """Stop cleaning: a cleaning under way is given up at its next batch, and this returns
        once the worker thread has left (so no cleaning runs past the broker's stop)."""
        self.cleaner.stopping.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    def abandon(self) -> None:
        self.cleaner.stopping.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(self.backoff_ms, 10) / 1000)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner failed")

    def _load_checkpoint(self, data_dir: str) -> None:
        if data_dir in self._loaded_dirs:
            return
        self._loaded_dirs.add(data_dir)
        for key, offset in read_checkpoint(os.path.join(data_dir, CHECKPOINT)).items():
            self.first_dirty.setdefault(key, offset)

    def _save_checkpoint(self, data_dir: str, logs: list[Log]) -> None:
        keys = {(lg.topic, lg.partition) for lg in logs if os.path.dirname(lg.dir) == data_dir}
        entries = {k: v for k, v in self.first_dirty.items() if k in keys}
        write_checkpoint(os.path.join(data_dir, CHECKPOINT), entries)

    def needs_cleaning(self, lg: Log, max_offset: int, now: int) -> bool:
        key = (lg.topic, lg.partition)
        first_dirty = max(self.first_dirty.get(key, lg.log_start_offset), lg.log_start_offset)
        cfg = lg.config
        if self.cleaner.dirty_ratio(
            lg, first_dirty, max_offset, now
        ) >= cfg.min_cleanable_dirty_ratio and self._has_dirty(lg, first_dirty, max_offset, now):
            return True
        horizon = self.horizons.get(key)
        if horizon is not None and now >= horizon:
            return True
        if cfg.max_compaction_lag_ms < 2**62:
            for seg in lg.segments[:-1]:
                if seg.base_offset >= first_dirty:
                    oldest = seg.created_ms
                    return now - oldest > cfg.max_compaction_lag_ms
        return False

    def _has_dirty(self, lg: Log, first_dirty: int, max_offset: int, now: int) -> bool:
        end = self.cleaner.first_uncleanable(lg, max_offset, now)
        return any(s.base_offset >= first_dirty for s in self.cleaner.cleanable_segments(lg, end))

    async def _build(self, plan: Plan) -> bool:
        """Run the build in a worker thread; False if it was given up (log deleted, stopping).

        Cancelling the caller (stop) does not leave the thread running on its own: the
        cleaner is told to stop and the thread is waited for before the cancellation goes on.
        """
        work = asyncio.get_running_loop().run_in_executor(None, self.cleaner.build, plan)
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            self.cleaner.stopping.set()
            try:
                await work
            except (CleaningAborted, Exception):
                pass
            self.cleaner.discard(plan)
            raise
        except CleaningAborted as exc:
            lg = plan.log
            log.info("%s-%d: cleaning given up: %s", lg.topic, lg.partition, exc)
            self.cleaner.discard(plan)
            return False
        except Exception:
            self.cleaner.discard(plan)
            raise
        return True

    async def run_once(self, now: int | None = None) -> int:
        """Clean every compacted log that needs it; returns how many were cleaned."""
        cleaned = 0
        logs = [(lg, mo) for lg, mo in self.logs() if lg.config.compact]
        for lg, max_offset in logs:
            if self.cleaner.stopping.is_set():
                break
            if not lg.segments:
                continue  # deleted since the list was taken
            self._load_checkpoint(os.path.dirname(lg.dir))
            t = self.clock() if now is None else now
            if not self.needs_cleaning(lg, max_offset, t):
                continue
            key = (lg.topic, lg.partition)
            plan = self.cleaner.plan(lg, self.first_dirty.get(key, 0), max_offset, t)
            if plan is None:
                continue
            if not await self._build(plan):
                continue
            stats = self.cleaner.swap(plan)
            if stats is None:
                continue
            self.first_dirty[key] = plan.end
            if plan.horizon is not None:
                self.horizons[key] = plan.horizon
            else:
                self.horizons.pop(key, None)
            self._save_checkpoint(os.path.dirname(lg.dir), [x for x, _ in logs])
            cleaned += 1
            self.cleanings += 1
            log.info(
                "%s-%d: compacted %d segments, %d of %d records kept, %d -> %d bytes",
                lg.topic,
                lg.partition,
                stats.segments,
                stats.records_kept,
                stats.records_read,
                stats.bytes_before,
                stats.bytes_after,
            )
        return cleaned
