"""A partition replica on this broker: its log plus leader epoch, high watermark, LSO and ISR.

Appends go through `append_records`, which validates idempotent sequences against the producer
state and writes the batches; long-polling fetches wait on `wait_for_data`, woken by appends.

A partition whose log dir went offline answers KAFKA_STORAGE_ERROR, as Kafka's
HostedPartition.Offline does, before any other check.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Protocol

from odradek.log.disk_faults import KafkaStorageError
from odradek.log.flusher import FlushRound
from odradek.log.log import Log
from odradek.log.producer_state import SequenceError
from odradek.log.validator import ValidatedBatches
from odradek.wire.errors import ErrorCode


class AppendVerifier(Protocol):
    """Checks a produce payload before it is appended: the transaction coordinator's
    produce-time verification (KIP-890 part 1), `txn_support.TxnAppendVerifier`."""

    def verify(
        self, part: Partition, validated: ValidatedBatches, transactional_id: str | None
    ) -> ErrorCode | None: ...


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_count: int = 0
    # the group fsync round (flush.messages / flush.ms, log/flusher.py) the produce answer
    # waits for; None when the append made no flush due
    flush: FlushRound | None = None


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        log: Log,
        node_id: int,
        replicas: list[int],
        leader: int,
        leader_epoch: int,
        isr: list[int],
        verifier: AppendVerifier | None = None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.replicas = replicas
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.verifier = verifier
        self.high_watermark = log.log_end_offset if self.is_leader else 0
        # the log end offset when this replica became leader in its current epoch (Kafka's
        # Partition.leaderEpochStartOffsetOpt); None as a follower or a standalone partition.
        # Until the high watermark reaches it, client ListOffsets answer OFFSET_NOT_AVAILABLE.
        self.leader_epoch_start_offset: int | None = None
        self._waiters: set[asyncio.Future[None]] = set()
        # waiting follower fetches: a high watermark move alone is no news to them (Kafka's
        # DelayedFetch of a follower reads to the log end), so `wake_high_watermark` skips them
        self._follower_waiters: set[asyncio.Future[None]] = set()
        self._flush_watched: FlushRound | None = None

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def offline(self) -> bool:
        return self.log.offline

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.log.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(first_unstable, self.high_watermark)

    @property
    def high_watermark_lagging(self) -> bool:
        """A new leader has not learned the high watermark yet: it is below the offset its
        leader epoch started at (it moves there with the followers' next fetches). Kafka
        refuses client ListOffsets then (OFFSET_NOT_AVAILABLE, retriable) rather than serve
        an end offset below what the previous leader served (KIP-320 era)."""
        start = self.leader_epoch_start_offset
        return start is not None and start > self.high_watermark

    def append_records(
        self,
        validated: ValidatedBatches,
        transactional_id: str | None = None,
        defer_flush: bool = False,
    ) -> AppendResult:
        """Append a validated produce payload as leader (one writer: no await inside).
        `defer_flush`: a flush the append makes due is group-committed off the loop; the
        result's `flush` is the round to wait for before answering (log/flusher.py)."""
        if self.log.offline:
            return _storage_error(self)
        if not self.is_leader:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self.verifier is not None:
            refused = self.verifier.verify(self, validated, transactional_id)
            if refused is not None:
                return AppendResult(refused)
        log = self.log
        try:
            for _pos, h in validated.batches:
                if h.producer_id >= 0 and h.base_sequence >= 0:
                    dup = log.producer_state.check(h)
                    if dup is not None:
                        if len(validated.batches) == 1:
                            return AppendResult(
                                ErrorCode.NONE, dup.first_offset, -1, log.log_start_offset
                            )
                        return AppendResult(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
        except SequenceError as exc:
            return AppendResult(exc.code, message=str(exc))
        try:
            info = log.append_as_leader(
                validated.buf,
                validated.batches,
                self.leader_epoch,
                validated.log_append_time,
                defer_flush,
            )
        except KafkaStorageError:
            self.wake()  # waiting fetches answer KAFKA_STORAGE_ERROR now
            return _storage_error(self)
        self.on_appended()
        pending = log.pending_flush if defer_flush else None
        if pending is not None and pending.future.done():
            pending = None
        if pending is not None and self._flush_watched is not pending:
            # the high watermark of a single replica moves past the data once it is synced
            self._flush_watched = pending
            pending.future.add_done_callback(lambda _f: self.on_appended())
        return AppendResult(
            ErrorCode.NONE,
            info.first_offset,
            info.log_append_time,
            log.log_start_offset,
            record_count=validated.record_count,
            flush=pending,
        )

    def on_appended(self) -> None:
        """Advance the high watermark (single replica: the log end) and wake waiting fetches."""
        if self.isr == [self.node_id] or len(self.replicas) <= 1:
            end, visible = self.log.log_end_offset, self.log.visible_end
            # below the log end while a group flush has yet to sync data due for it
            self.high_watermark = end if visible == end else max(self.high_watermark, visible)
        self.wake()

    def wake(self) -> None:
        if self._follower_waiters:
            followers, self._follower_waiters = self._follower_waiters, set()
            for fut in followers:
                if not fut.done():
                    fut.set_result(None)
        self.wake_high_watermark()

    def wake_high_watermark(self) -> None:
        """The high watermark moved (nothing else): wake consumers' fetches and acks=all
        produces, not the followers' fetches, which wait for records past the log end."""
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def add_waiter(self, fut: asyncio.Future[None], follower: bool = False) -> None:
        (self._follower_waiters if follower else self._waiters).add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)
        self._follower_waiters.discard(fut)

    def append_internal(self, batch: bytes | bytearray) -> AppendResult:
        """Append batches built by the broker itself (coordinator records, markers excluded)."""
        from odradek.wire.batch import iter_batches

        buf = bytearray(batch)
        validated = ValidatedBatches(buf, list(iter_batches(buf)), False)
        return self.append_records(validated)


def _storage_error(part: Partition) -> AppendResult:
    return AppendResult(
        ErrorCode.KAFKA_STORAGE_ERROR,
        message=f"Disk error when trying to access log file on the disk "
        f"(partition {part.topic}-{part.index} is offline)",
    )
