"""Transaction metadata and its state machine, as Kafka's TransactionMetadata (KIP-98, KIP-360).

A transactional id moves through:

    Empty -> Ongoing -> PrepareCommit -> CompleteCommit -> Ongoing ...
                     -> PrepareAbort  -> CompleteAbort  -> Ongoing ...
    Empty / CompleteCommit / CompleteAbort -> Dead (transactional.id.expiration.ms)

A change is prepared as a `TxnTransit` (the target, which is what gets written to
`__transaction_state`) while `pending` blocks any other change; only once the record is appended
does `complete` apply it. A failed append calls `abandon`. Loading replays values straight into
metadata. PrepareEpochFence is never persisted: fencing bumps the epoch and goes to PrepareAbort.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from odradek.coordinator.txn.records import TxnLogValue
from odradek.wire.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name DescribeTransactions / ListTransactions report ("PrepareCommit", ...)."""
        return _NAMES[self]

    @classmethod
    def from_display(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

_ENDED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
EXPIRABLE = _ENDED
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: _ENDED,
    TxnState.ONGOING: _ENDED | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: _ENDED,
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


def epoch_exhausted(epoch: int) -> bool:
    """True when no more epoch bumps fit in an int16 (one is kept back for fencing)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True, frozen=True)
class TxnTransit:
    """The target of a transition: exactly what is written to __transaction_state."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int

    def to_value(self) -> TxnLogValue:
        parts: dict[str, list[int]] | None = None
        if self.state != TxnState.EMPTY:
            parts = {}
            for topic, idx in sorted(self.partitions):
                parts.setdefault(topic, []).append(idx)
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            int(self.state),
            parts,
            self.last_update_ms,
            self.start_ms,
        )


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    timeout_ms: int
    last_update_ms: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    pending: TxnState | None = None
    # a fence bumped the epoch in memory but its PrepareAbort was not written: do not bump again
    failed_fence: bool = False

    @classmethod
    def from_value(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        state = TxnState(v.status)
        parts: set[TopicPartition] = set()
        if state != TxnState.EMPTY and v.partitions:
            parts = {(t, i) for t, ids in v.partitions.items() for i in ids}
        return cls(
            transactional_id,
            v.producer_id,
            v.timeout_ms,
            v.last_update_ms,
            producer_epoch=v.producer_epoch,
            last_producer_id=v.previous_producer_id,
            state=state,
            partitions=parts,
            start_ms=v.start_ms,
        )

    # -- preparing ------------------------------------------------------------------------------

    def _prepare(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
        now: int | None = None,
    ) -> TxnTransit:
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: preparing {state.display} while "
                f"{self.pending.display} is pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.display} -> "
                f"{state.display} is not a legal transition"
            )
        self.pending = state
        return TxnTransit(
            self.producer_id if producer_id is None else producer_id,
            self.last_producer_id,
            self.producer_epoch if producer_epoch is None else producer_epoch,
            self.last_producer_epoch if last_epoch is None else last_epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms,
            state,
            frozenset(self.partitions) if partitions is None else partitions,
            self.start_ms if start_ms is None else start_ms,
            self.last_update_ms if now is None else now,
        )

    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId on an ended transaction: bump the epoch (KIP-360 retries keep it)."""
        if epoch_exhausted(self.producer_epoch):
            raise IllegalTransition(f"{self.transactional_id}: producer epoch exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose answer the producer never got: answer the same epoch
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(
            TxnState.EMPTY,
            producer_epoch=epoch,
            last_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now=now,
        )

    def prepare_rotate_producer_id(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epoch is exhausted: continue with a fresh producer id at epoch 0."""
        transit = self._prepare(
            TxnState.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now=now,
        )
        return transit

    def prepare_add_partitions(self, added: set[TopicPartition], now: int) -> TxnTransit:
        start = now if self.state in _ENDED else self.start_ms
        return self._prepare(
            TxnState.ONGOING, partitions=frozenset(self.partitions | added), start_ms=start, now=now
        )

    def prepare_end(self, commit: bool, now: int, bump: bool = False) -> TxnTransit:
        """PrepareCommit / PrepareAbort; `bump` (transaction.version 2, KIP-890 part 2) writes
        it under the next producer epoch, remembering the current one for retries."""
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if bump:
            return self._prepare(
                state,
                producer_epoch=self.producer_epoch + 1,
                last_epoch=self.producer_epoch,
                now=now,
            )
        return self._prepare(state, now=now)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = (
            TxnState.COMPLETE_COMMIT
            if self.state == TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        return self._prepare(state, partitions=frozenset(), now=now)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, partitions=frozenset())

    def bump_epoch_for_fence(self) -> None:
        """Fencing (a new producer, or a timeout): bump the epoch in memory, before PrepareAbort
        is written, so the old producer is refused at once; a failed write keeps the bump."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence past epoch {MAX_EPOCH}")
        if not self.failed_fence:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    # -- completing -----------------------------------------------------------------------------

    def complete(self, t: TxnTransit) -> None:
        """Apply a transit whose record has been appended."""
        if self.pending != t.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {t.state.display} but "
                f"{self.pending} is pending"
            )
        if t.producer_id != self.producer_id:
            self.last_producer_id = self.producer_id
        self.producer_id = t.producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.timeout_ms = t.timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.start_ms = t.start_ms
        self.last_update_ms = t.last_update_ms
        self.pending = None
        if t.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            self.failed_fence = False

    def abandon(self) -> None:
        """The append of the pending transit failed: nothing changes."""
        self.pending = None
