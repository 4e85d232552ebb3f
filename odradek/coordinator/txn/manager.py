"""The transaction state manager, as Kafka's TransactionStateManager: the transactional-id map,
the `__transaction_state` partitions this broker has loaded (with their coordinator epochs), and
the log behind them.

It loads a state partition by replaying its records (the latest value of each id wins, a
tombstone removes it), forgets a partition's ids when another broker leads it, answers whether
this broker coordinates an id, and persists a transition: the record is appended first and
applied to memory only once the append succeeded (`persist`). It knows nothing of the requests;
`coordinator.TransactionCoordinator` is the operations on top of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.coordinator.txn import records as rec
from odradek.coordinator.txn.config import STATE_TOPIC, TxnConfig, TxnHost, partition_for
from odradek.coordinator.txn.state import TxnMetadata, TxnState, TxnTransit
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.coordinator.txn.coordinator")

# How long an append of a tombstone for an expired transactional id waits for the ISR: Kafka's
# request.timeout.ms default (its TransactionConfig.requestTimeoutMs); every other transition
# waits up to its transaction timeout, as appendTransactionToLog does.
TOMBSTONE_TIMEOUT_MS = 30_000

# What a failed append becomes for the client, as TransactionStateManager.appendTransactionToLog
# maps it; any other error is passed through as it is.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,  # the client retries
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def append_error(error: ErrorCode) -> ErrorCode:
    """The client's error for a failed `__transaction_state` append."""
    return _APPEND_ERRORS.get(error, error)


class TxnStateManager:
    """Transactional ids by id and by producer id, for the loaded state partitions."""

    def __init__(self, host: TxnHost, config: TxnConfig, clock: Callable[[], int]) -> None:
        self.host = host
        self.config = config
        self.clock = clock
        self.txns: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, str] = {}
        self.coordinator_epochs: dict[int, int] = {}  # loaded state partitions
        self.active = False

    # -- the map --------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    def put(self, md: TxnMetadata) -> None:
        self.txns[md.transactional_id] = md
        self.by_producer[md.producer_id] = md.transactional_id

    def remove(self, md: TxnMetadata) -> None:
        """Forget an expired id (its tombstone is written)."""
        self.txns.pop(md.transactional_id, None)
        if self.by_producer.get(md.producer_id) == md.transactional_id:
            del self.by_producer[md.producer_id]

    def clear(self) -> None:
        self.txns.clear()
        self.by_producer.clear()
        self.coordinator_epochs.clear()

    # -- partitions -----------------------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int | None:
        count = self.host.state_partition_count()
        return None if not count else partition_for(transactional_id, count)

    def ensure_state_topic(self) -> int | None:
        """Create `__transaction_state` on first use; its partition count, None without it."""
        count = self.host.state_partition_count()
        if not count:
            try:
                self.host.create_state_topic(self.config)
            except Exception as exc:  # another creator won, or the cluster is too small
                log.warning("cannot create %s: %s", STATE_TOPIC, exc)
            count = self.host.state_partition_count()
        return count or None

    def is_loaded(self, partition: int) -> bool:
        return partition in self.coordinator_epochs

    def owner_error(self, transactional_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR unless this broker leads and has loaded the id's partition."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        p = self.partition_of(transactional_id)
        if p is None or p not in self.coordinator_epochs:
            return ErrorCode.NOT_COORDINATOR
        if self.host.leader_epoch(p) != self.coordinator_epochs[p]:
            return ErrorCode.NOT_COORDINATOR
        return None

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch of the id's state partition as loaded here (-1: not loaded)."""
        p = self.partition_of(transactional_id)
        return self.coordinator_epochs.get(p, -1) if p is not None else -1

    # -- loading --------------------------------------------------------------------------------

    def load_partition(self, partition: int) -> list[TxnMetadata] | None:
        """Replay one state partition (no await inside): the ids it loaded, None when this
        broker does not lead it. Unreadable records are logged and skipped."""
        epoch = self.host.leader_epoch(partition)
        if epoch is None:
            return None
        latest: dict[str, rec.TxnLogValue | None] = {}
        for key, value in self.host.read_state(partition):
            if key is None:
                continue
            try:
                tid = rec.decode_key(key)
                if tid is None:
                    continue
                latest[tid] = None if value is None else rec.decode_value(value)
            except ValueError as exc:  # RecordFormatError: skip, keep loading
                log.warning("%s-%d: skipping unreadable record: %s", STATE_TOPIC, partition, exc)
        self.coordinator_epochs[partition] = epoch
        loaded = []
        for tid, stored in latest.items():
            if stored is None or stored.status == TxnState.DEAD:
                continue
            try:
                md = TxnMetadata.from_value(tid, stored)
            except ValueError:
                log.warning(
                    "%s-%d: %s has unknown state %d", STATE_TOPIC, partition, tid, stored.status
                )
                continue
            self.put(md)
            loaded.append(md)
        if loaded:
            log.info("loaded %s-%d: %d transactional ids", STATE_TOPIC, partition, len(loaded))
        return loaded

    def unload_partition(self, partition: int) -> bool:
        """Another broker leads a state partition now: forget its ids. False if not loaded."""
        if self.coordinator_epochs.pop(partition, None) is None:
            return False
        count = self.host.state_partition_count() or 0
        for tid in [t for t in self.txns if count and partition_for(t, count) == partition]:
            md = self.txns.pop(tid)
            if self.by_producer.get(md.producer_id) == tid:
                del self.by_producer[md.producer_id]
        return True

    # -- persisting -----------------------------------------------------------------------------

    async def persist(self, md: TxnMetadata, transit: TxnTransit) -> ErrorCode:
        """Append the transit's record, then apply it; on failure nothing changes. The append
        waits for the ISR up to the transition's transaction timeout (a tombstone: up to
        TOMBSTONE_TIMEOUT_MS), as Kafka's appendTransactionToLog."""
        tid = md.transactional_id
        p = self.partition_of(tid)
        if p is None:
            md.abandon()
            return ErrorCode.NOT_COORDINATOR
        value = None if transit.state == TxnState.DEAD else rec.encode_value(transit.to_value())
        epoch = self.coordinator_epochs.get(p)
        timeout_ms = TOMBSTONE_TIMEOUT_MS if value is None else transit.timeout_ms
        try:
            error = ErrorCode(
                await self.host.append_state(p, rec.encode_key(tid), value, timeout_ms)
            )
        except asyncio.CancelledError:
            md.abandon()
            raise
        except Exception:
            log.exception("append to %s-%d for %s failed", STATE_TOPIC, p, tid)
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        if error != ErrorCode.NONE:
            md.abandon()
            log.warning(
                "append of %s for transactional id %s failed: %s",
                transit.state.display,
                tid,
                error.name,
            )
            return append_error(error)
        if self.coordinator_epochs.get(p) != epoch or self.txns.get(tid) is not md:
            md.abandon()  # the partition moved to another coordinator meanwhile
            return ErrorCode.NOT_COORDINATOR
        old_pid = md.producer_id
        md.complete(transit)
        if old_pid != md.producer_id and self.by_producer.get(old_pid) == tid:
            del self.by_producer[old_pid]
        self.by_producer[md.producer_id] = tid
        return ErrorCode.NONE
