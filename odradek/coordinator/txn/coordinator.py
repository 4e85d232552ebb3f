"""The transaction coordinator's operations, as Kafka's TransactionCoordinator (its state,
the transactional-id map, the loaded partitions and their log, is `manager.TxnStateManager`).

It answers InitProducerId for transactional ids, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
(KIP-98), bumps epochs to fence zombies (KIP-360, KIP-588), aborts transactions older than their
timeout, expires idle transactional ids, and answers DescribeTransactions / ListTransactions
(KIP-664). A transactional id belongs to partition `abs(java_hashcode(id)) % partitions` of the
compacted `__transaction_state` topic, whose leader is its coordinator.

Every transition is appended to that partition before it takes effect (`manager.persist`);
loading a partition replays its records. Ending a transaction writes PrepareCommit/PrepareAbort,
then the markers to every partition of the transaction, then CompleteCommit/CompleteAbort; a
broker that dies in between finishes the job from the persisted Prepare state when it loads.

Each request is checked against the current producer id and epoch, and EndTxn and the produce
check demand exact equality, so a delayed or retried request from an older epoch can never end
or write into a later transaction; a retried EndTxn of a finished transaction with the same
result is answered NONE. Within one epoch (transactions v1, whose producer keeps its epoch) a
delayed EndTxn or Produce of an earlier transaction cannot be told from one of the current
transaction, and is taken for one, as by Kafka (KAFKA-17754: KIP-890 part 2's epoch bump on
every EndTxn v5 is the defence; compat_tests/reference/test_txn_delayed_messages.py).

The broker is reached only through `TxnHost` (`config.py`); this package never imports it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from odradek.clock import now_ms
from odradek.coordinator.txn.config import (
    STATE_TOPIC,
    TxnConfig,
    TxnDescription,
    TxnHost,
)
from odradek.coordinator.txn.manager import TxnStateManager
from odradek.coordinator.txn.state import (
    EXPIRABLE,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnState,
    epoch_exhausted,
)
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

MARKER_WAIT_S = 5.0  # EndTxn waits this long for markers, then answers and keeps trying
RETRY_BACKOFF_S = (0.02, 1.0)

# Marker results after which a partition needs no more attempts: written; topic deleted; the
# partition already saw a newer producer or coordinator epoch (the transaction is over there).
_MARKER_DONE = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)


class TransactionCoordinator:
    """The asyncio service: started after the logs load, stopped before they close."""

    def __init__(self, host: TxnHost, config: TxnConfig, clock: Callable[[], int] = now_ms) -> None:
        self.host = host
        self.config = config
        self.clock = clock
        self.manager = TxnStateManager(host, config, clock)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: list[asyncio.Task[Any]] = []

    @property
    def active(self) -> bool:
        return self.manager.active

    @property
    def txns(self) -> dict[str, TxnMetadata]:
        """Transactional id -> metadata, for the loaded state partitions."""
        return self.manager.txns

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self.manager.active = True
        count = self.host.state_partition_count()
        if count:
            for p in range(count):
                self.load_partition(p)
        self._timers = [
            asyncio.create_task(
                self._every(self.config.abort_interval_ms, self.abort_timed_out),
                name="txn-abort-timed-out",
            ),
            asyncio.create_task(
                self._every(self.config.expire_interval_ms, self.expire_transactional_ids),
                name="txn-expire",
            ),
        ]
        log.info("transaction coordinator started: %d transactional ids loaded", len(self.txns))

    async def stop(self) -> None:
        self.manager.active = False
        tasks = [*self._timers, *self._tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._clear()

    def abandon(self) -> None:
        """Unclean stop (a simulated kill -9): drop everything in memory, write nothing."""
        self.manager.active = False
        for task in [*self._timers, *self._tasks]:
            task.cancel()
        self._clear()

    def _clear(self) -> None:
        close = getattr(self.host, "close", None)
        if close is not None:
            close()
        self._timers.clear()
        self._tasks.clear()
        self.manager.clear()

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[int]]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator job %s failed", job.__name__)

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- partitions and loading -----------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int | None:
        return self.manager.partition_of(transactional_id)

    def ensure_state_topic(self) -> bool:
        """Create `__transaction_state` on first use (FindCoordinator, InitProducerId) and load
        any of its partitions not loaded yet."""
        count = self.manager.ensure_state_topic()
        if count is None:
            return False
        for p in range(count):
            if not self.manager.is_loaded(p):
                self.load_partition(p)
        return True

    def coordinator_node(self, transactional_id: str) -> int | None:
        """The broker coordinating a transactional id (FindCoordinator key type 1): the leader
        of its state partition, the topic created on first use. None when unknown."""
        if not self.ensure_state_topic():
            return None
        p = self.partition_of(transactional_id)
        return None if p is None else self.host.state_partition_leader(p)

    def load_partition(self, partition: int) -> int:
        """Replay one state partition (no await inside) and finish the transactions it left
        prepared; returns the ids loaded."""
        loaded = self.manager.load_partition(partition)
        if loaded is None:
            return 0
        for md in loaded:
            if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                commit = md.state == TxnState.PREPARE_COMMIT
                log.info(
                    "resuming %s of transactional id %s after load",
                    "commit" if commit else "abort",
                    md.transactional_id,
                )
                self._spawn(
                    self._write_markers_and_complete(md, commit),
                    f"txn-markers-{md.transactional_id}",
                )
        return len(loaded)

    def on_election(self, partition: int) -> None:
        """This broker now leads a state partition: load it (again, if the epoch changed)."""
        epoch = self.host.leader_epoch(partition)
        if (
            not self.active
            or epoch is None
            or self.manager.coordinator_epochs.get(partition) == epoch
        ):
            return
        self.on_resignation(partition)
        self.load_partition(partition)

    def on_resignation(self, partition: int) -> None:
        """Another broker leads a state partition now: forget its transactional ids."""
        if self.manager.unload_partition(partition):
            log.info("resigned as transaction coordinator for %s-%d", STATE_TOPIC, partition)

    # -- InitProducerId -------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer starting or recovering."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if not transactional_id:
            return (ErrorCode.INVALID_REQUEST, *fail)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return (ErrorCode.INVALID_TRANSACTION_TIMEOUT, *fail)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return (ErrorCode.INVALID_REQUEST, *fail)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if self.active and not self.ensure_state_topic():
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE, *fail)
        error = self.manager.owner_error(transactional_id)
        if error is not None:
            return (error, *fail)
        md = self.txns.get(transactional_id)
        if md is None:
            md = TxnMetadata(
                transactional_id, self.host.allocate_producer_id(), timeout_ms, self.clock()
            )
            self.manager.put(md)
        if md.pending is not None:
            return (ErrorCode.CONCURRENT_TRANSACTIONS, *fail)
        if expected is not None and not self._valid_expected(md, *expected):
            return (ErrorCode.PRODUCER_FENCED, *fail)
        if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return (ErrorCode.CONCURRENT_TRANSACTIONS, *fail)
        if md.state == TxnState.ONGOING:
            # fence the current producer: abort its transaction under a bumped epoch, and have
            # the new one retry (its retry bumps the epoch again, or rotates the producer id)
            log.info("InitProducerId for %s: aborting its ongoing transaction", transactional_id)
            error = await self._fence_and_abort(md)
            return (error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS, *fail)
        now = self.clock()
        if epoch_exhausted(md.producer_epoch) and (
            expected is None or expected[1] == md.producer_epoch
        ):
            transit = md.prepare_rotate_producer_id(
                self.host.allocate_producer_id(), timeout_ms, now, expected is not None
            )
        else:
            result = md.prepare_increment_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
            if isinstance(result, ErrorCode):
                return (result, *fail)
            transit = result
        error = await self.manager.persist(md, transit)
        if error != ErrorCode.NONE:
            return (error, *fail)
        log.info(
            "initialized transactional id %s: producer id %d, epoch %d",
            transactional_id,
            md.producer_id,
            md.producer_epoch,
        )
        return ErrorCode.NONE, md.producer_id, md.producer_epoch

    @staticmethod
    def _valid_expected(md: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: a producer recovering with its old id and epoch may bump, unless fenced."""
        return (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == md.producer_id
            or (producer_id == md.last_producer_id and epoch_exhausted(producer_epoch))
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode | None, TxnMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error = self.manager.owner_error(transactional_id)
        if error is not None:
            return error, None
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return None, md

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error or ErrorCode.UNKNOWN_SERVER_ERROR
        wanted = set(partitions)
        if md.pending is not None or md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if md.state == TxnState.ONGOING and wanted <= md.partitions:
            return ErrorCode.NONE
        if md.state == TxnState.DEAD:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return await self.manager.persist(md, md.prepare_add_partitions(wanted, self.clock()))

    async def add_partitions_anywhere(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> tuple[ErrorCode, bool]:
        """Transactions v2: a partition leader adds the partitions it is about to append to
        (or the offsets partition of a TxnOffsetCommit v5) to the transaction, here or with
        AddPartitionsToTxn v5 at the broker coordinating `transactional_id` (Kafka's
        AddPartitionsToTxnManager). (error, whether another broker answered)."""
        wanted = list(partitions)
        if self.manager.owner_error(transactional_id) != ErrorCode.NOT_COORDINATOR:
            return await self.add_partitions(
                transactional_id, producer_id, producer_epoch, wanted
            ), False
        p = self.partition_of(transactional_id)
        node = None if p is None else self.host.state_partition_leader(p)
        if node is None or node < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, True
        if node == self.host.node_id:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, True
        error = await self.host.add_partitions_at(
            node, transactional_id, producer_id, producer_epoch, wanted
        )
        return error, True

    async def verify_elsewhere(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode] | None:
        """Transactions v1 (KIP-890 part 1) for an id coordinated by another broker: are the
        partitions in the producer's ongoing transaction? Asked with AddPartitionsToTxn v5
        verify_only, as Kafka's AddPartitionsToTxnManager. None when this broker coordinates
        the id (or is not running): `check_append` decides at the append."""
        wanted = list(partitions)
        if self.manager.owner_error(transactional_id) != ErrorCode.NOT_COORDINATOR:
            return None
        p = self.partition_of(transactional_id)
        node = None if p is None else self.host.state_partition_leader(p)
        if node is None or node < 0:
            return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if node == self.host.node_id:
            return dict.fromkeys(wanted, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return await self.host.verify_partitions_at(
            node, transactional_id, producer_id, producer_epoch, wanted
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify_only (KIP-890): are they in the ongoing transaction?
        A partition that is not answers INVALID_TXN_STATE (v5 clients: TRANSACTION_ABORTABLE)."""
        wanted = list(partitions)
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return dict.fromkeys(wanted, error or ErrorCode.UNKNOWN_SERVER_ERROR)
        if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return dict.fromkeys(wanted, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {
            tp: ErrorCode.NONE if tp in md.partitions else ErrorCode.INVALID_TXN_STATE
            for tp in wanted
        }

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction. A missing
        transactional id is INVALID_REQUEST before the group is looked at, as in Kafka."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        tp = self.host.offsets_partition(group_id)
        if tp is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    def check_append(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        tp: TopicPartition,
    ) -> ErrorCode | None:
        """May this transactional batch be appended to `tp`? (Kafka's produce-time
        verification, KIP-890 part 1: the partition must be in the producer's ongoing
        transaction, with its current id and epoch.) None when it may.

        Ids coordinated by another broker are not verified here: the produce asked their
        coordinator first (`verify_elsewhere`, or the v2 add); the partition's own epoch checks
        still apply."""
        tid = transactional_id or self.manager.by_producer.get(producer_id)
        count = self.host.state_partition_count() or 0
        if tid is None and len(self.manager.coordinator_epochs) < count:
            return None  # the producer may belong to another coordinator
        p = None if tid is None else self.partition_of(tid)
        if p is not None and not self.manager.is_loaded(p):
            return None
        md = self.txns.get(tid) if tid else None
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        # as Kafka's verification, the pending state is not looked at: a partition in the
        # ongoing transaction may be appended to while another add of it is being written
        if md.state != TxnState.ONGOING or tp not in md.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return None

    # -- EndTxn ---------------------------------------------------------------------------------

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error or ErrorCode.UNKNOWN_SERVER_ERROR
        if md.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = md.state
        if state == TxnState.ONGOING:
            error = await self.manager.persist(md, md.prepare_end(commit, self.clock()))
            if error != ErrorCode.NONE:
                return error
            await self._finish(md, commit)
            return ErrorCode.NONE
        done, preparing = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        if state == done:
            return ErrorCode.NONE  # a retry of the request that ended it
        if state == preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        log.info(
            "EndTxn(%s) for %s in state %s",
            "commit" if commit else "abort",
            transactional_id,
            state.display,
        )
        return ErrorCode.INVALID_TXN_STATE

    async def end_txn_v2(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> tuple[ErrorCode, int, int]:
        """EndTxn v5 (transaction.version 2, KIP-890 part 2): (error, producer id, epoch).

        Ending an ongoing transaction bumps the producer epoch in its Prepare record, so the
        markers carry the new epoch and anything the producer still sends under the old one is
        fenced; the answer carries the epoch to use for the next transaction. A retry with the
        epoch from before the bump is answered with the current one. Aborting when nothing was
        added (the producer cannot know whether a produce added a partition) is answered NONE.
        When the bumped epoch leaves no more bumps, the ended transaction's id is replaced by a
        new producer id at epoch 0, which the answer carries (as Kafka's nextProducerId)."""
        md = self.txns.get(transactional_id) if transactional_id else None
        if md is not None and md.producer_id == producer_id and md.pending is None:
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            retried = (
                md.state == done
                and md.last_producer_epoch == producer_epoch
                and md.producer_epoch == producer_epoch + 1
            )
            if retried and self.manager.owner_error(transactional_id) is None:
                return ErrorCode.NONE, md.producer_id, md.producer_epoch
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error or ErrorCode.UNKNOWN_SERVER_ERROR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if md.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if md.state != TxnState.ONGOING:
            if not commit and md.state in (
                TxnState.EMPTY,
                TxnState.COMPLETE_COMMIT,
                TxnState.COMPLETE_ABORT,
            ):
                return ErrorCode.NONE, md.producer_id, md.producer_epoch
            code = await self.end_txn(transactional_id, producer_id, producer_epoch, commit)
            return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if md.producer_epoch >= MAX_EPOCH:
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = await self.manager.persist(md, md.prepare_end(commit, self.clock(), bump=True))
        if error != ErrorCode.NONE:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        pid, epoch = md.producer_id, md.producer_epoch
        await self._finish(md, commit)
        if epoch_exhausted(epoch) and md.producer_id == pid and md.pending is None:
            ended = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if md.state == ended:
                # the epochs of this producer id are used up: go on with a new id at epoch 0
                rotate = md.prepare_rotate_producer_id(
                    self.host.allocate_producer_id(), md.timeout_ms, self.clock(), False
                )
                if await self.manager.persist(md, rotate) == ErrorCode.NONE:
                    return ErrorCode.NONE, md.producer_id, md.producer_epoch
        return ErrorCode.NONE, pid, epoch

    async def _finish(self, md: TxnMetadata, commit: bool) -> None:
        """Markers and the Complete state, waited for a while; the rest goes on in background."""
        task = self._spawn(
            self._write_markers_and_complete(md, commit), f"txn-markers-{md.transactional_id}"
        )
        try:
            await asyncio.wait_for(asyncio.shield(task), MARKER_WAIT_S)
        except TimeoutError:
            log.warning(
                "markers of %s still being written after %.0fs", md.transactional_id, MARKER_WAIT_S
            )

    async def _fence_and_abort(self, md: TxnMetadata) -> ErrorCode:
        """Bump the epoch of an ongoing transaction and abort it (new producer, or timeout)."""
        md.bump_epoch_for_fence()
        error = await self.manager.persist(md, md.prepare_end(False, self.clock()))
        if error != ErrorCode.NONE:
            md.failed_fence = True
            return error
        md.failed_fence = False
        await self._finish(md, False)
        return ErrorCode.NONE

    async def _write_markers_and_complete(self, md: TxnMetadata, commit: bool) -> None:
        tid = md.transactional_id
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        pid, epoch = md.producer_id, md.producer_epoch

        def current() -> bool:
            return (
                self.txns.get(tid) is md
                and md.state == preparing
                and md.producer_id == pid
                and md.producer_epoch == epoch
            )

        coordinator_epoch = self.manager.coordinator_epoch(tid)
        backoff, max_backoff = RETRY_BACKOFF_S
        while md.partitions and current():
            results = await self.host.write_markers(
                pid, epoch, coordinator_epoch, commit, sorted(md.partitions)
            )
            for tp, error in results.items():
                if error in _MARKER_DONE:
                    if error != ErrorCode.NONE:
                        log.info("marker for %s on %s-%d not written: %s", tid, *tp, error.name)
                    md.partitions.discard(tp)
            if md.partitions:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, max_backoff)
        backoff = RETRY_BACKOFF_S[0]
        while current() and md.pending is None:
            error = await self.manager.persist(md, md.prepare_complete(self.clock()))
            if error in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR):
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff)

    # -- background: timeouts and expiration ---------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort every transaction open longer than its timeout; returns how many."""
        now = self.clock()
        count = 0
        for md in list(self.txns.values()):
            if (
                md.state == TxnState.ONGOING
                and md.pending is None
                and md.start_ms + md.timeout_ms < now
            ):
                log.info(
                    "aborting transaction of %s (producer id %d, epoch %d): open longer "
                    "than its timeout of %d ms",
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                    md.timeout_ms,
                )
                if await self._fence_and_abort(md) == ErrorCode.NONE:
                    count += 1
        return count

    async def expire_transactional_ids(self) -> int:
        """Remove ids idle longer than transactional.id.expiration.ms (a tombstone each)."""
        now = self.clock()
        count = 0
        for md in list(self.txns.values()):
            if (
                md.state in EXPIRABLE
                and md.pending is None
                and md.last_update_ms + self.config.id_expiration_ms <= now
            ):
                if await self.manager.persist(md, md.prepare_dead()) == ErrorCode.NONE:
                    self.manager.remove(md)
                    log.info("expired transactional id %s", md.transactional_id)
                    count += 1
        return count

    # -- admin (KIP-664) ------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error = self.manager.owner_error(transactional_id)
        if error is not None:
            return error, None
        md = self.txns.get(transactional_id)
        if md is None or md.state == TxnState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, TxnDescription(
            transactional_id,
            md.state.display,
            md.timeout_ms,
            md.start_ms,
            md.producer_id,
            md.producer_epoch,
            sorted(md.partitions),
        )

    def list_transactions(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1
    ) -> tuple[ErrorCode, list[str], list[tuple[str, int, str]]]:
        """(error, unknown state filters, [(transactional id, producer id, state)])."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        unknown = [s for s in states if TxnState.from_display(s) is None]
        wanted = {TxnState.from_display(s) for s in states} - {None}
        pids = set(producer_ids)
        now = self.clock()
        out = []
        for md in self.txns.values():
            if md.state == TxnState.DEAD:
                continue
            if states and md.state not in wanted:
                continue
            if pids and md.producer_id not in pids:
                continue
            if duration_ms >= 0 and (md.start_ms < 0 or now - md.start_ms < duration_ms):
                continue
            out.append((md.transactional_id, md.producer_id, md.state.display))
        return ErrorCode.NONE, unknown, sorted(out)
