"""Moving a replica between the data dirs of one broker, as Kafka's AlterReplicaLogDirs does.

A future log (`<topic>-<partition>.<id>-future` in the destination dir) copies the current log
batch by batch, offsets, epochs, producer state and transaction markers included (Kafka's
ReplicaAlterLogDirsThread fetching from the local replica). Meanwhile the partition keeps
serving from its current log. Once the future log has caught up, the swap happens without an
await (so no append, fetch or follower write falls in between): the last batches are copied,
the future dir is renamed to `<topic>-<partition>`, reopened as the partition's log, and the
old dir is renamed to `....<id>-delete` and removed a little later (readers still sending from
its files keep their descriptors, as Kafka's file.delete.delay.ms). A move cut short by a stop
leaves a `-future` dir that the next start removes: the replica stays in its old dir.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.log.cleaner import WORK_DIR
from odradek.log.log import Log, read_partition_metadata, write_partition_metadata
from odradek.wire.batch import iter_batches

if TYPE_CHECKING:
    from odradek.log.manager import LogManager

log = logging.getLogger(__name__)

COPY_CHUNK_BYTES = 4 * 1024 * 1024  # copied per turn before letting others run
# bytes per second a move may copy (Kafka's replica.alter.log.dirs.io.max.bytes.per.second);
# None: unthrottled. Read at every turn; tests slow a move down with it to watch it run.
COPY_RATE_BYTES_PER_S: float | None = None
THROTTLE_POLL_S = 0.05
DELETE_DELAY_S = 5.0


class FutureReplica:
    """One replica's move to `dest`: `run()` copies and swaps; `future` is the log being built."""

    def __init__(self, logs: LogManager, topic: str, partition: int, dest: str) -> None:
        self.logs = logs
        self.key = (topic, partition)
        self.dest = dest
        src = logs.logs[self.key]
        name = f"{topic}-{partition}.{uuid.uuid4().hex}-future"
        path = os.path.join(dest, name)
        start = src.segments[0].base_offset
        self.future = Log(
            path,
            topic,
            partition,
            src.config,
            recovery_point=start,
            log_start_offset=start,
            log_dir=logs.log_dirs[dest],
        )
        topic_id = read_partition_metadata(src.dir)
        if topic_id is not None:
            write_partition_metadata(path, topic_id)
        self.cancelled = False
        self.done = False

    @property
    def source(self) -> Log:
        return self.logs.logs[self.key]

    @property
    def offset_lag(self) -> int:
        return max(self.source.log_end_offset - self.future.log_end_offset, 0)

    def _copy(self, budget: int | None) -> int:
        """Copy batches from the current log's end of the future log on (`budget` bytes, or
        everything when None)."""
        src, fut = self.source, self.future
        self._reconcile(src, fut)
        copied = 0
        for b in src.batches(fut.log_end_offset):
            if b.last_offset < fut.log_end_offset:
                continue
            buf = b.read()
            fut.append_as_follower(buf, list(iter_batches(buf)))
            copied += len(buf)
            if budget is not None and copied >= budget:
                break
        return copied

    @staticmethod
    def _reconcile(src: Log, fut: Log) -> None:
        """Cut the future log back where the current one diverged from it (a follower's
        truncation after a leader change, as Kafka's Partition.truncateTo cuts the future
        replica too): past its end, or past the end of the future's last epoch there."""
        end = min(fut.log_end_offset, src.log_end_offset)
        epoch = fut.epochs.latest_epoch
        if epoch >= 0:
            found, epoch_end = src.epochs.end_offset_for(epoch, src.log_end_offset)
            if found != epoch or epoch_end < end:
                end = min(end, max(epoch_end, fut.segments[0].base_offset))
        if end < fut.log_end_offset:
            log.info("%s-%d: future replica cut back to %d", src.topic, src.partition, end)
            fut.truncate_to(end)

    async def run(self, on_swap: Callable[[Log], None]) -> None:
        """Copy until caught up, then swap; `on_swap(new log)` points the partition at it."""
        try:
            began, copied = time.monotonic(), 0
            while not self.cancelled and self.key in self.logs.logs and not self.source.offline:
                if self.offset_lag > 0:
                    budget = COPY_CHUNK_BYTES
                    rate = COPY_RATE_BYTES_PER_S
                    if rate is not None:
                        allowed = int(rate * (time.monotonic() - began)) - copied
                        if allowed <= 0:
                            await asyncio.sleep(THROTTLE_POLL_S)
                            continue
                        budget = min(budget, allowed)
                    n = self._copy(budget)
                    if n:
                        copied += n
                        await asyncio.sleep(0)
                        continue
                # caught up (or nothing left to copy): swap, unless a compaction is under way
                if not self._cleaning():
                    break
                await asyncio.sleep(THROTTLE_POLL_S)
            if self.cancelled or self.key not in self.logs.logs or self.source.offline:
                # an offline current dir keeps its replica offline until a restart, as Kafka
                if self.logs.moves.get(self.key) is self:
                    del self.logs.moves[self.key]
                self.abort()
                return
            self._swap(on_swap)
        except Exception:
            # an I/O error takes its dir offline (disk_faults.py); the replica stays where it was
            log.exception("moving %s-%d to %s failed", *self.key, self.dest)
            if self.logs.moves.get(self.key) is self:
                del self.logs.moves[self.key]
            self.abort()

    def _cleaning(self) -> bool:
        """The log cleaner is rewriting segments of the current log (its work dir exists):
        the swap waits for it, as Kafka pauses cleaning of a partition whose replica moves."""
        return os.path.isdir(os.path.join(self.source.dir, WORK_DIR))

    def _swap(self, on_swap: Callable[[Log], None]) -> None:
        src = self.source
        self._copy(None)  # no await from here on
        src.flush()
        self.future.close()
        final = os.path.join(self.dest, f"{self.key[0]}-{self.key[1]}")
        os.rename(self.future.dir, final)
        new = Log(
            final,
            self.key[0],
            self.key[1],
            src.config,
            recovery_point=self.future.log_end_offset,
            log_start_offset=src.log_start_offset,
            log_dir=self.logs.log_dirs[self.dest],
        )
        gone = f"{src.dir}.{uuid.uuid4().hex}-delete"
        os.rename(src.dir, gone)
        src.moved_to(gone)
        self.logs.replace(self.key, new, self.dest)
        on_swap(new)
        # both dirs' recovery points and log start offsets now say where the replica is (a
        # crash next would otherwise lose a DeleteRecords' start offset), as Kafka after a swap
        self.logs.checkpoint()
        self.done = True
        log.info("%s-%d moved to %s", *self.key, self.dest)

        def remove() -> None:
            _release(src)
            shutil.rmtree(gone, ignore_errors=True)

        try:
            asyncio.get_running_loop().call_later(DELETE_DELAY_S, remove)
        except RuntimeError:
            remove()

    def abort(self) -> None:
        """Drop the future log (a newer move, a topic deletion, a stop)."""
        if self.cancelled:
            return
        self.cancelled = True
        if not self.done:
            _release(self.future)
            shutil.rmtree(self.future.dir, ignore_errors=True)


def _release(lg: Log) -> None:
    for seg in lg.segments:
        seg.release()
