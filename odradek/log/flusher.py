"""Group commit for `flush.messages` / `flush.ms`: one fsync round serves every
produce waiting for it, across partitions, and the fsyncs run off the event loop.

When a produce's append makes a log due for a flush (Log._write with `defer_flush`), the log
asks the flusher of the running event loop instead of calling fsync itself. The flusher
collects every log that asked, and as soon as no round is under way it starts one: on the loop
it takes a duplicate descriptor of each such log's segments written since its last sync (the
open-files LRU may close a segment's own descriptor meanwhile), then fsyncs them all in a worker
thread; back on the loop it records each log's synced offset and resolves the round's future,
which the waiting produce requests (and the partitions' high watermarks) were holding on. Logs
that ask while a round runs go into the next one, so under load each round serves every batch
written during the previous round's fsync: one fsync per log per round, not one per batch.

An fsync that fails takes the log's dir offline on the loop (LogDir.fail), as a synchronous
flush does, and the produce requests waiting on that log answer KAFKA_STORAGE_ERROR.

A successful round also moves each log's recovery point to what it synced (Log.note_synced), as
Kafka's flush does: the recovery-point checkpoint (written every 60 s and at shutdown) then tells
an unclean start that the segments below it need no scan. Indexes are not fsync'd by a round:
the active segment's are always rebuilt by an unclean start (it is past any recovery point), and
a sealed segment's were fsync'd when it was sealed (its `.txnindex` too, if an abort was indexed).

A roll asks for a round too, whatever the flush settings (Kafka's UnifiedLog.roll schedules a
flush up to the new segment): it syncs the roll's producer snapshot first, then the sealed
segment, and moves the recovery point to the new segment; nothing waits on it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from odradek.log.disk_faults import FSYNC, KafkaStorageError

if TYPE_CHECKING:
    from odradek.log.disk_faults import LogDir
    from odradek.log.segment import LogSegment

log = logging.getLogger(__name__)

# One thread: rounds never overlap, and the thread only waits on the disk.
# (checkpoints.write_soon queues its fsyncs here too: FIFO, so a round that syncs batches of a new
# leader epoch runs after the fsync of the leader-epoch checkpoint written before them)
FSYNC_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="odradek-fsync")
_FLUSHERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GroupFlusher] = (
    weakref.WeakKeyDictionary()
)


class FlushedLog(Protocol):
    """A partition's log as a flush round syncs it (`log/log.py` Log)."""

    @property
    def dir(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def log_dir(self) -> LogDir | None: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def truncations(self) -> int: ...
    def unsynced_segments(self) -> list[LogSegment]: ...
    def take_unsynced_snapshot(self) -> str | None: ...
    def note_synced(self, upto: int, truncations: int) -> None: ...


@dataclass(slots=True)
class FlushRound:
    """One fsync round: the logs it syncs and, once done, the ones that failed."""

    future: asyncio.Future[None]
    logs: dict[FlushedLog, None] = field(default_factory=dict)
    failed: dict[FlushedLog, KafkaStorageError] = field(default_factory=dict)

    def error_for(self, lg: FlushedLog) -> KafkaStorageError | None:
        return self.failed.get(lg)


@dataclass(slots=True)
class _Job:
    log: FlushedLog
    upto: int  # the log end offset the round makes durable
    truncations: int  # the log's truncation count when the round began
    fds: list[int]
    injected: OSError | None = None
    error: OSError | None = None


def for_running_loop() -> GroupFlusher | None:
    """The flusher of the event loop running in this thread; None outside a loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    flusher = _FLUSHERS.get(loop)
    if flusher is None:
        flusher = _FLUSHERS[loop] = GroupFlusher(loop)
    return flusher


class GroupFlusher:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._next: FlushRound | None = None  # collecting logs while a round runs
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0  # completed rounds (tests, bench)
        self.synced_logs = 0  # log fsync jobs done over all rounds

    def request(self, lg: FlushedLog) -> FlushRound:
        """`lg` has appended data due for a flush: the round that will sync it."""
        nxt = self._next
        if nxt is None:
            nxt = self._next = FlushRound(self._loop.create_future())
        nxt.logs[lg] = None
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._run(), name="odradek-group-flush")
        return nxt

    async def _run(self) -> None:
        while self._next is not None:
            rnd, self._next = self._next, None
            jobs = [job for lg in rnd.logs if (job := _job_for(lg)) is not None]
            try:
                if jobs:
                    await self._loop.run_in_executor(FSYNC_EXECUTOR, _sync_all, jobs)
            except BaseException:
                for job in jobs:
                    _close_fds(job.fds)
                if not rnd.future.done():
                    rnd.future.cancel()
                raise
            for job in jobs:
                lg = job.log
                exc = job.injected or job.error
                if exc is None:  # synced offset and recovery point move (not past a truncation)
                    lg.note_synced(job.upto, job.truncations)
                    continue
                ld = lg.log_dir
                if ld is None:
                    log.error("%s-%d: fsync failed: %s", lg.topic, lg.partition, exc)
                    rnd.failed[lg] = KafkaStorageError(lg.dir, exc.strerror or str(exc))
                else:
                    rnd.failed[lg] = ld.fail(exc)
            self.rounds += 1
            self.synced_logs += len(jobs)
            if not rnd.future.done():
                rnd.future.set_result(None)


def _job_for(lg: FlushedLog) -> _Job | None:
    """On the loop: duplicates of the descriptors of `lg`'s segments written since its last
    sync (a roll may have left data in the previous segment too)."""
    ld = lg.log_dir
    upto, cuts = lg.log_end_offset, lg.truncations
    if ld is not None and ld.offline:
        return _Job(lg, upto, cuts, [], error=OSError(0, ld.reason or "log dir offline"))
    fds: list[int] = []
    try:
        snapshot = lg.take_unsynced_snapshot()
        if snapshot is not None:  # first, as Kafka's roll: flushProducerStateSnapshot
            try:
                fds.append(os.open(snapshot, os.O_RDONLY | os.O_CLOEXEC))
            except FileNotFoundError:  # replaced by a later one, or truncated away
                pass
        for seg in lg.unsynced_segments():
            f = seg.file  # held while duplicating
            fds.append(os.dup(f.fileno()))
    except OSError as exc:
        _close_fds(fds)
        return _Job(lg, upto, cuts, [], error=exc)
    injected = None
    if ld is not None and ld.fsync_errno is not None:
        injected = ld.injected_error(FSYNC)
    return _Job(lg, upto, cuts, fds, injected=injected)


def _sync_all(jobs: list[_Job]) -> None:
    """In the worker thread: fsync every job's descriptors, then close them."""
    for job in jobs:
        try:
            if job.injected is None and job.error is None:
                for fd in job.fds:
                    os.fsync(fd)
        except OSError as exc:
            job.error = exc
        finally:
            _close_fds(job.fds)
            job.fds = []


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
