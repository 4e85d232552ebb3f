"""The transaction coordinator over a fake broker: transitions are persisted before they act,
markers go to every partition, fencing, timeouts, expiration, reloading, and KAFKA-17754 (a
stale or retried EndTxn from an older epoch never ends a later transaction)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from odradek.coordinator.txn import records as rec
from odradek.coordinator.txn.config import TxnConfig, partition_for
from odradek.coordinator.txn.coordinator import TransactionCoordinator
from odradek.coordinator.txn.state import TopicPartition, TxnState
from odradek.wire.errors import ErrorCode

E = ErrorCode
TP0, TP1 = ("t", 0), ("t", 1)
OFFSETS_TP = ("__consumer_offsets", 7)
HOUR = 3_600_000


class FakeHost:
    """A broker with an in-memory state topic; markers are recorded, failures injectable."""

    def __init__(self, partitions: int = 3) -> None:
        self.partitions = partitions
        self.created = False
        self.logs: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.markers: list[tuple[int, int, bool, TopicPartition]] = []
        self.marker_errors: dict[TopicPartition, ErrorCode] = {}
        self.fail_appends = 0
        self.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS  # what a failed append answers
        self.isr_delay_ms = 0  # how long the ISR takes to have an appended record
        self.append_timeouts: list[int] = []  # how long each append was told to wait
        self.next_pid = 1000
        self.epoch = 0

    def state_partition_count(self) -> int | None:
        return self.partitions if self.created else None

    def create_state_topic(self, config: TxnConfig) -> None:
        self.created = True
        self.logs = {p: [] for p in range(self.partitions)}

    def leader_epoch(self, partition: int) -> int | None:
        return self.epoch if self.created else None

    def state_partition_leader(self, partition: int) -> int | None:
        return 0 if self.created else None

    def read_state(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        return iter(list(self.logs.get(partition, [])))

    async def append_state(
        self, partition: int, key: bytes, value: bytes | None, timeout_ms: int
    ) -> ErrorCode:
        await asyncio.sleep(0)
        self.append_timeouts.append(timeout_ms)
        if self.fail_appends:
            self.fail_appends -= 1
            return self.fail_with
        self.logs[partition].append((key, value))
        # acks=all: in the leader's log, but the ISR has it only after isr_delay_ms
        return ErrorCode.REQUEST_TIMED_OUT if timeout_ms < self.isr_delay_ms else ErrorCode.NONE

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        await asyncio.sleep(0)
        out = {}
        for tp in partitions:
            error = self.marker_errors.get(tp, ErrorCode.NONE)
            if error == ErrorCode.NONE:
                self.markers.append((producer_id, producer_epoch, commit, tp))
            out[tp] = error
        return out

    def allocate_producer_id(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def offsets_partition(self, group_id: str) -> TopicPartition | None:
        return OFFSETS_TP

    def states(self, tid: str) -> list[str]:
        """Every state persisted for a transactional id, in order ("<tombstone>" for None)."""
        p = partition_for(tid, self.partitions)
        out = []
        for key, value in self.logs.get(p, []):
            if rec.decode_key(key) == tid:
                out.append(
                    "<tombstone>"
                    if value is None
                    else TxnState(rec.decode_value(value).status).display
                )
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def run(test: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an async test body with a fresh coordinator (intervals long: jobs run by hand)."""

    def wrapper(**kwargs: Any) -> Any:
        async def body() -> Any:
            host = FakeHost()
            clock = Clock()
            coord = TransactionCoordinator(host, CONFIG, clock)
            await coord.start()
            try:
                return await test(coord=coord, host=host, clock=clock, **kwargs)
            finally:
                await coord.stop()

        return asyncio.run(body())

    wrapper.__name__ = test.__name__
    sig = inspect.signature(test)
    wrapper.__signature__ = sig.replace(
        parameters=[  # type: ignore[attr-defined]
            p for name, p in sig.parameters.items() if name not in ("coord", "host", "clock")
        ]
    )
    return wrapper


CONFIG = TxnConfig(
    num_partitions=3,
    max_timeout_ms=HOUR,
    id_expiration_ms=10 * HOUR,
    abort_interval_ms=HOUR,
    expire_interval_ms=HOUR,
)


async def begin(
    coord: TransactionCoordinator, tid: str = "tx", *parts: TopicPartition, timeout_ms: int = 60000
) -> tuple[int, int]:
    error, pid, epoch = await coord.init_producer_id(tid, timeout_ms)
    assert error == E.NONE
    assert await coord.add_partitions(tid, pid, epoch, parts or [TP0]) == E.NONE
    return pid, epoch


async def restart(
    coord: TransactionCoordinator, host: FakeHost, clock: Clock
) -> TransactionCoordinator:
    coord.abandon()
    fresh = TransactionCoordinator(host, CONFIG, clock)
    await fresh.start()
    return fresh


# -- InitProducerId ----------------------------------------------------------------------------


@run
async def test_init_creates_state_topic_and_persists_empty(coord, host, clock) -> None:
    error, pid, epoch = await coord.init_producer_id("tx", 60000)
    assert (error, epoch) == (E.NONE, 0) and host.created
    assert host.states("tx") == ["Empty"]
    error, pid2, epoch2 = await coord.init_producer_id("tx", 60000)
    assert (error, pid2, epoch2) == (E.NONE, pid, 1)


@pytest.mark.parametrize(
    "tid,timeout,expected",
    [
        ("", 1000, E.INVALID_REQUEST),
        ("tx", 0, E.INVALID_TRANSACTION_TIMEOUT),
        ("tx", HOUR + 1, E.INVALID_TRANSACTION_TIMEOUT),
    ],
)
@run
async def test_init_validation(coord, host, clock, tid, timeout, expected) -> None:
    assert (await coord.init_producer_id(tid, timeout))[0] == expected


@run
async def test_init_with_unknown_expected_producer_is_fenced(coord, host, clock) -> None:
    await coord.init_producer_id("tx", 60000)
    assert (await coord.init_producer_id("tx", 60000, 42, 0))[0] == E.PRODUCER_FENCED


@run
async def test_init_with_half_given_producer_is_invalid(coord, host, clock) -> None:
    assert (await coord.init_producer_id("tx", 60000, 42, -1))[0] == E.INVALID_REQUEST


@run
async def test_second_producer_fences_ongoing_transaction(coord, host, clock) -> None:
    pid, epoch = await begin(coord, "tx", TP0, TP1)
    # the new producer is told to retry while the old transaction is aborted under epoch+1
    assert (await coord.init_producer_id("tx", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    assert host.markers == [(pid, epoch + 1, False, TP0), (pid, epoch + 1, False, TP1)]
    assert host.states("tx")[-2:] == ["PrepareAbort", "CompleteAbort"]
    error, pid2, epoch2 = await coord.init_producer_id("tx", 60000)
    assert (error, pid2, epoch2) == (E.NONE, pid, epoch + 2)
    # the old producer is fenced everywhere
    assert await coord.add_partitions("tx", pid, epoch, [TP0]) == E.PRODUCER_FENCED
    assert await coord.end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert coord.check_append("tx", pid, epoch, TP0) == E.INVALID_PRODUCER_EPOCH


@run
async def test_failed_fence_write_does_not_bump_twice(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    host.fail_appends = 1
    assert (await coord.init_producer_id("tx", 60000))[0] == E.COORDINATOR_NOT_AVAILABLE
    assert coord.txns["tx"].producer_epoch == epoch + 1  # the old producer is already out
    assert (await coord.init_producer_id("tx", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    assert host.markers[-1] == (pid, epoch + 1, False, TP0)
    assert (await coord.init_producer_id("tx", 60000))[1:] == (pid, epoch + 2)


@run
async def test_exhausted_epoch_rotates_producer_id(coord, host, clock) -> None:
    error, pid, _ = await coord.init_producer_id("tx", 60000)
    coord.txns["tx"].producer_epoch = 32766
    error, pid2, epoch2 = await coord.init_producer_id("tx", 60000)
    assert error == E.NONE and pid2 != pid and epoch2 == 0
    assert coord.check_append("tx", pid, 32766, TP0) == E.INVALID_PRODUCER_ID_MAPPING


@run
async def test_kip360_bump_with_current_epoch(coord, host, clock) -> None:
    error, pid, epoch = await coord.init_producer_id("tx", 60000)
    error, pid2, epoch2 = await coord.init_producer_id("tx", 60000, pid, epoch)
    assert (error, pid2, epoch2) == (E.NONE, pid, epoch + 1)


# -- AddPartitions / AddOffsets / produce check ------------------------------------------------


@run
async def test_add_partitions_checks_producer(coord, host, clock) -> None:
    error, pid, epoch = await coord.init_producer_id("tx", 60000)
    assert await coord.add_partitions("nope", pid, epoch, [TP0]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await coord.add_partitions("tx", pid + 1, epoch, [TP0]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await coord.add_partitions("tx", pid, epoch + 1, [TP0]) == E.PRODUCER_FENCED
    assert await coord.add_partitions("tx", pid, epoch, [TP0]) == E.NONE
    persisted = len(host.states("tx"))
    assert await coord.add_partitions("tx", pid, epoch, [TP0]) == E.NONE
    assert len(host.states("tx")) == persisted  # already in: nothing to write


@run
async def test_produce_check_needs_partition_in_ongoing_txn(coord, host, clock) -> None:
    error, pid, epoch = await coord.init_producer_id("tx", 60000)
    assert coord.check_append("tx", pid, epoch, TP0) == E.INVALID_TXN_STATE
    await coord.add_partitions("tx", pid, epoch, [TP0])
    assert coord.check_append("tx", pid, epoch, TP0) is None
    assert coord.check_append(None, pid, epoch, TP0) is None  # found by producer id
    assert coord.check_append("tx", pid, epoch, TP1) == E.INVALID_TXN_STATE
    assert coord.check_append("tx", pid, epoch - 1, TP0) == E.INVALID_PRODUCER_EPOCH
    await coord.end_txn("tx", pid, epoch, True)
    assert coord.check_append("tx", pid, epoch, TP0) == E.INVALID_TXN_STATE


@run
async def test_verify_only(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    assert coord.verify_partitions("tx", pid, epoch, [TP0, TP1]) == {
        TP0: E.NONE,
        TP1: E.INVALID_TXN_STATE,
    }
    assert coord.verify_partitions("tx", pid, epoch + 1, [TP0]) == {TP0: E.PRODUCER_FENCED}
    host.marker_errors[TP0] = E.NOT_LEADER_OR_FOLLOWER  # stays in PrepareCommit
    task = asyncio.ensure_future(coord.end_txn("tx", pid, epoch, True))
    for _ in range(50):
        await asyncio.sleep(0)
    assert coord.verify_partitions("tx", pid, epoch, [TP0]) == {TP0: E.CONCURRENT_TRANSACTIONS}
    host.marker_errors.clear()
    assert await task == E.NONE


@run
async def test_add_offsets_adds_the_groups_offsets_partition(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    assert await coord.add_offsets("tx", pid, epoch, "group") == E.NONE
    assert coord.txns["tx"].partitions == {TP0, OFFSETS_TP}
    assert await coord.add_offsets("tx", pid, epoch, "") == E.INVALID_GROUP_ID


# -- EndTxn ------------------------------------------------------------------------------------


@run
async def test_commit_writes_prepare_markers_complete_in_order(coord, host, clock) -> None:
    pid, epoch = await begin(coord, "tx", TP0, TP1)
    assert await coord.end_txn("tx", pid, epoch, True) == E.NONE
    assert host.states("tx") == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert sorted(host.markers) == [(pid, epoch, True, TP0), (pid, epoch, True, TP1)]
    assert coord.txns["tx"].partitions == set()


@run
async def test_retried_end_txn_is_idempotent(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    assert await coord.end_txn("tx", pid, epoch, True) == E.NONE
    written = len(host.states("tx"))
    assert await coord.end_txn("tx", pid, epoch, True) == E.NONE
    assert len(host.states("tx")) == written and len(host.markers) == 1
    # the opposite result for a finished transaction is an error, and changes nothing
    assert await coord.end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE
    assert coord.txns["tx"].state == TxnState.COMPLETE_COMMIT


@run
async def test_end_txn_without_transaction_is_invalid(coord, host, clock) -> None:
    error, pid, epoch = await coord.init_producer_id("tx", 60000)
    assert await coord.end_txn("tx", pid, epoch, True) == E.INVALID_TXN_STATE


@run
async def test_stale_end_txn_never_completes_newer_transaction(coord, host, clock) -> None:
    """KAFKA-17754: an EndTxn of an older epoch arriving during a newer transaction."""
    pid, old_epoch = await begin(coord)
    # the producer restarts (new epoch) and opens a new transaction
    assert (await coord.init_producer_id("tx", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    error, pid2, new_epoch = await coord.init_producer_id("tx", 60000)
    assert pid2 == pid and new_epoch == old_epoch + 2
    assert await coord.add_partitions("tx", pid, new_epoch, [TP1]) == E.NONE
    markers = list(host.markers)
    for committed in (True, False):
        assert await coord.end_txn("tx", pid, old_epoch, committed) == E.PRODUCER_FENCED
        assert await coord.end_txn("tx", pid, old_epoch + 1, committed) == E.PRODUCER_FENCED
    md = coord.txns["tx"]
    assert (md.state, md.partitions, md.producer_epoch) == (TxnState.ONGOING, {TP1}, new_epoch)
    assert host.markers == markers
    assert await coord.end_txn("tx", pid, new_epoch, True) == E.NONE
    assert host.markers[-1] == (pid, new_epoch, True, TP1)


@run
async def test_stale_end_txn_after_timeout_abort_is_fenced(coord, host, clock) -> None:
    pid, epoch = await begin(coord, timeout_ms=1000)
    clock.now += 1001
    assert await coord.abort_timed_out() == 1
    # the late commit of the aborted transaction must not commit anything
    assert await coord.end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert coord.txns["tx"].state == TxnState.COMPLETE_ABORT
    assert [m[2] for m in host.markers] == [False]


@run
async def test_end_txn_while_another_transition_is_pending(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    host.marker_errors[TP0] = E.NOT_LEADER_OR_FOLLOWER  # markers keep failing
    task = asyncio.ensure_future(coord.end_txn("tx", pid, epoch, True))
    for _ in range(50):
        await asyncio.sleep(0)
        if coord.txns["tx"].state == TxnState.PREPARE_COMMIT:
            break
    assert await coord.end_txn("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert await coord.end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE
    assert await coord.add_partitions("tx", pid, epoch, [TP1]) == E.CONCURRENT_TRANSACTIONS
    assert (await coord.init_producer_id("tx", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    del host.marker_errors[TP0]  # the partition is back: the background retry finishes
    assert await task == E.NONE
    for _ in range(200):
        if coord.txns["tx"].state == TxnState.COMPLETE_COMMIT:
            break
        await asyncio.sleep(0.01)
    assert coord.txns["tx"].state == TxnState.COMPLETE_COMMIT


@run
async def test_failed_append_changes_nothing(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    host.fail_appends = 1
    assert await coord.end_txn("tx", pid, epoch, True) == E.COORDINATOR_NOT_AVAILABLE
    md = coord.txns["tx"]
    assert (md.state, md.pending, host.markers) == (TxnState.ONGOING, None, [])
    assert await coord.end_txn("tx", pid, epoch, True) == E.NONE


APPEND_ERRORS = [
    # as TransactionStateManager.appendTransactionToLog maps them
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    # and every other error passes through as it is
    (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
    (E.INVALID_RECORD, E.INVALID_RECORD),
    (E.INVALID_TIMESTAMP, E.INVALID_TIMESTAMP),
]


@pytest.mark.parametrize(
    "append,client", APPEND_ERRORS, ids=[f"{a.name}-{c.name}" for a, c in APPEND_ERRORS]
)
@run
async def test_failed_append_answers_as_kafka_maps_it(coord, host, clock, append, client) -> None:
    pid, epoch = await begin(coord)
    host.fail_appends, host.fail_with = 1, append
    assert await coord.end_txn("tx", pid, epoch, True) == client
    assert coord.txns["tx"].state == TxnState.ONGOING


@run
async def test_append_waits_for_the_isr_up_to_the_transaction_timeout(coord, host, clock) -> None:
    """As Kafka's appendTransactionToLog (timeout: the new metadata's txnTimeoutMs): with an
    ISR that takes 10 s to have a record, a transaction with a 60 s timeout commits, one with
    a 2 s timeout is answered COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT) and stays open."""
    pid, epoch = await begin(coord, "long", timeout_ms=60_000)
    pid2, epoch2 = await begin(coord, "short", timeout_ms=2_000)
    host.isr_delay_ms = 10_000
    host.append_timeouts.clear()
    assert await coord.end_txn("long", pid, epoch, True) == E.NONE
    assert coord.txns["long"].state == TxnState.COMPLETE_COMMIT
    assert host.append_timeouts == [60_000, 60_000]  # PrepareCommit, CompleteCommit
    assert await coord.end_txn("short", pid2, epoch2, True) == E.COORDINATOR_NOT_AVAILABLE
    assert coord.txns["short"].state == TxnState.ONGOING
    # a new timeout is the one the InitProducerId transition waits for
    host.append_timeouts.clear()
    assert (await coord.init_producer_id("long", 30_000))[0] == E.NONE
    assert host.append_timeouts == [30_000]


@run
async def test_tombstone_append_waits_for_the_request_timeout(coord, host, clock) -> None:
    pid, epoch = await begin(coord, timeout_ms=1_000)
    await coord.end_txn("tx", pid, epoch, True)
    clock.now += 10 * HOUR
    host.append_timeouts.clear()
    assert await coord.expire_transactional_ids() == 1
    assert host.append_timeouts == [30_000]  # Kafka's request.timeout.ms default


@run
async def test_markers_to_deleted_topic_are_dropped(coord, host, clock) -> None:
    pid, epoch = await begin(coord, "tx", TP0, TP1)
    host.marker_errors[TP1] = E.UNKNOWN_TOPIC_OR_PARTITION
    assert await coord.end_txn("tx", pid, epoch, False) == E.NONE
    assert coord.txns["tx"].state == TxnState.COMPLETE_ABORT


# -- timeouts and expiration -------------------------------------------------------------------


@run
async def test_timeout_aborts_and_bumps_epoch(coord, host, clock) -> None:
    pid, epoch = await begin(coord, timeout_ms=5000)
    clock.now += 5000
    assert await coord.abort_timed_out() == 0
    clock.now += 1
    assert await coord.abort_timed_out() == 1
    md = coord.txns["tx"]
    assert (md.state, md.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert host.markers == [(pid, epoch + 1, False, TP0)]
    assert await coord.add_partitions("tx", pid, epoch, [TP0]) == E.PRODUCER_FENCED


@run
async def test_expiration_writes_tombstone_and_forgets(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    clock.now += 20 * HOUR
    assert await coord.expire_transactional_ids() == 0  # ongoing ids never expire
    await coord.end_txn("tx", pid, epoch, True)
    clock.now += 10 * HOUR
    assert await coord.expire_transactional_ids() == 1
    assert host.states("tx")[-1] == "<tombstone>" and "tx" not in coord.txns
    assert await coord.add_partitions("tx", pid, epoch, [TP0]) == E.INVALID_PRODUCER_ID_MAPPING
    error, pid2, epoch2 = await coord.init_producer_id("tx", 60000)
    assert error == E.NONE and pid2 != pid and epoch2 == 0
    coord = await restart(coord, host, clock)
    assert coord.txns["tx"].producer_id == pid2


# -- loading -----------------------------------------------------------------------------------


@run
async def test_reload_keeps_ongoing_transaction(coord, host, clock) -> None:
    pid, epoch = await begin(coord, "tx", TP0, TP1)
    coord = await restart(coord, host, clock)
    md = coord.txns["tx"]
    assert (md.state, md.partitions, md.producer_epoch) == (TxnState.ONGOING, {TP0, TP1}, epoch)
    assert await coord.end_txn("tx", pid, epoch, True) == E.NONE
    await coord.stop()


@pytest.mark.parametrize("commit", [True, False])
@run
async def test_reload_finishes_prepared_transaction(coord, host, clock, commit) -> None:
    pid, epoch = await begin(coord, "tx", TP0, TP1)
    host.marker_errors = {TP0: E.NOT_LEADER_OR_FOLLOWER, TP1: E.NOT_LEADER_OR_FOLLOWER}
    task = asyncio.ensure_future(coord.end_txn("tx", pid, epoch, commit))
    for _ in range(50):
        await asyncio.sleep(0)
        if coord.txns["tx"].state != TxnState.ONGOING:
            break
    task.cancel()
    coord = await restart(coord, host, clock)  # dies after PrepareX was written
    host.marker_errors = {}
    for _ in range(200):
        if coord.txns["tx"].state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            break
        await asyncio.sleep(0.01)
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    assert coord.txns["tx"].state == done
    assert sorted(host.markers) == [(pid, epoch, commit, TP0), (pid, epoch, commit, TP1)]
    await coord.stop()


@run
async def test_unknown_records_are_skipped_when_loading(coord, host, clock) -> None:
    await coord.init_producer_id("tx", 60000)
    p = partition_for("tx", 3)
    host.logs[p].append((b"\x00\x05garbage", b"\x00\x00"))
    host.logs[p].append((rec.encode_key("bad"), b"\x00\x09"))
    coord = await restart(coord, host, clock)
    assert set(coord.txns) == {"tx"}
    await coord.stop()


# -- admin -------------------------------------------------------------------------------------


@run
async def test_describe_and_list(coord, host, clock) -> None:
    pid, epoch = await begin(coord, "a", TP0)
    await coord.init_producer_id("b", 60000)
    error, desc = coord.describe("a")
    assert error == E.NONE and desc.state == "Ongoing" and desc.partitions == [TP0]
    assert coord.describe("zzz")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    error, unknown, found = coord.list_transactions(["Ongoing", "Bogus"], [])
    assert (error, unknown, [f[0] for f in found]) == (E.NONE, ["Bogus"], ["a"])
    assert [f[0] for f in coord.list_transactions([], [pid])[2]] == ["a"]
    clock.now += 500
    assert [f[0] for f in coord.list_transactions([], [], 400)[2]] == ["a"]
    assert coord.list_transactions([], [], 600)[2] == []


def test_partition_for_matches_java_hashcode() -> None:
    # "tx1".hashCode() == 115245 in Java
    assert partition_for("tx1", 50) == 115245 % 50
    assert partition_for("", 50) == 0
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE


@run
async def test_resignation_forgets_ids_and_election_reloads_them(coord, host, clock) -> None:
    pid, epoch = await begin(coord)
    p = partition_for("tx", 3)
    coord.on_resignation(p)
    assert "tx" not in coord.txns
    assert await coord.add_partitions("tx", pid, epoch, [TP1]) == E.NOT_COORDINATOR
    assert coord.check_append("tx", pid, epoch, TP0) is None  # another broker's to verify
    host.epoch = 1  # a new leader epoch of the state partition
    coord.on_election(p)
    assert coord.txns["tx"].state == TxnState.ONGOING
    assert coord.coordinator_node("tx") == 0
    assert await coord.end_txn("tx", pid, epoch, True) == E.NONE
