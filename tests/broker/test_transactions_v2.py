"""Transactions v2 (KIP-890 part 2) on the wire, with transaction.version 2 finalized: a
transactional Produce v12 adds its partitions to the transaction itself (no AddPartitionsToTxn;
v11, a v1 producer, still must add them first), EndTxn v5 bumps the producer epoch and answers it,
a retried EndTxn v5 under the old epoch gets the same answer, the old epoch is fenced afterwards;
and a broker that dies between the bumped PrepareCommit and the markers finishes the commit under
the new epoch when it restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.coordinator.txn.state import TxnState
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

TOPIC = "t"
CONFIG = {"transaction.state.log.num.partitions": 3, "transaction.version": 2}
P = protocol.ProduceRequest


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(topics={TOPIC: 2}, config=CONFIG) as b:
        yield b


def init(raw: RawClient, tid: str) -> tuple[int, int]:
    """InitProducerId, retried while the coordinator's state topic is being created."""
    deadline = time.monotonic() + 15
    while True:
        resp = raw.request(
            protocol.InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout_ms=60000,
                producer_id=-1,
                producer_epoch=-1,
            ),
            4,
        )
        if resp.error_code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            break
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.05)
    assert resp.error_code == 0, resp
    return resp.producer_id, resp.producer_epoch


def produce(raw: RawClient, tid: str, pid: int, epoch: int, seq: int, version: int) -> list[int]:
    """One transactional record to each partition; the partitions' error codes."""
    data = [
        P.TopicProduceData.PartitionProduceData(
            index=i,
            records=build_batch(
                [(None, b"v%d-%d" % (epoch, i), [], int(time.time() * 1000))],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                transactional=True,
            ),
        )
        for i in (0, 1)
    ]
    resp = raw.request(
        P(
            transactional_id=tid,
            acks=-1,
            timeout_ms=5000,
            topic_data=[P.TopicProduceData(name=TOPIC, partition_data=data)],
        ),
        version,
    )
    return [p.error_code for p in resp.responses[0].partition_responses]


def end(raw: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> Any:
    return raw.request(
        protocol.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        5,
    )


def stable(broker: Broker, index: int) -> tuple[int, int]:
    return broker.call(
        lambda s: (
            s.topics.get(TOPIC, index).last_stable_offset,
            s.topics.get(TOPIC, index).high_watermark,
        )
    )


def test_produce_adds_partitions_and_end_txn_bumps_the_epoch(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as raw:
        pid, epoch = init(raw, "v2")
        # a v1 producer (Produce v11) must have added the partitions first
        assert produce(raw, "v2", pid, epoch, 0, 11) == [ErrorCode.TRANSACTION_ABORTABLE] * 2
        assert produce(raw, "v2", pid, epoch, 0, 12) == [0, 0]
        done = end(raw, "v2", pid, epoch, True)
        assert (done.error_code, done.producer_id, done.producer_epoch) == (0, pid, epoch + 1)
        assert [stable(broker, i) for i in (0, 1)] == [(2, 2), (2, 2)]  # record + marker
        # the retry of that EndTxn (its answer lost) gets the same answer
        again = end(raw, "v2", pid, epoch, True)
        assert (again.error_code, again.producer_epoch) == (0, epoch + 1)
        # the old epoch is fenced; the new one writes the next transaction from sequence 0
        assert produce(raw, "v2", pid, epoch, 1, 12) != [0, 0]
        assert end(raw, "v2", pid, epoch, False).error_code == ErrorCode.PRODUCER_FENCED
        assert produce(raw, "v2", pid, epoch + 1, 0, 12) == [0, 0]
        aborted = end(raw, "v2", pid, epoch + 1, False)
        assert (aborted.error_code, aborted.producer_epoch) == (0, epoch + 2)
        assert [stable(broker, i) for i in (0, 1)] == [(4, 4), (4, 4)]
        # aborting with nothing in the transaction: nothing to do, same epoch
        empty = end(raw, "v2", pid, epoch + 2, False)
        assert (empty.error_code, empty.producer_epoch) == (0, epoch + 2)


def test_crash_after_the_bumped_prepare_commit_is_finished_on_restart() -> None:
    with Broker(topics={TOPIC: 2}, config=CONFIG) as broker:
        with RawClient(broker.bootstrap) as raw:
            pid, epoch = init(raw, "c2")
            assert produce(raw, "c2", pid, epoch, 0, 12) == [0, 0]

        async def prepare_only(server: Any) -> ErrorCode:
            # what EndTxn v5 persists first; the broker "dies" before writing any marker
            coord = server.txn_coordinator
            md = coord.txns["c2"]
            return await coord.manager.persist(md, md.prepare_end(True, coord.clock(), bump=True))

        assert broker.call(prepare_only) == ErrorCode.NONE
        broker.restart(abrupt=True)
        deadline = time.monotonic() + 15
        while [stable(broker, i) for i in (0, 1)] != [(2, 2), (2, 2)]:
            assert time.monotonic() < deadline, "markers not written after the restart"
            time.sleep(0.05)
        md = broker.call(lambda s: s.txn_coordinator.txns["c2"])
        assert (md.state, md.producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch + 1)
        with RawClient(broker.bootstrap) as raw:  # the producer goes on under the new epoch
            assert produce(raw, "c2", pid, epoch + 1, 0, 12) == [0, 0]


def test_end_txn_v5_moves_to_a_new_producer_id_when_epochs_run_out(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as raw:
        pid, _epoch = init(raw, "x2")
        last = 32765  # two bumps left (32767 is the largest epoch)

        def near_the_end(server: Any) -> None:
            server.txn_coordinator.txns["x2"].producer_epoch = last

        broker.call(near_the_end)
        assert produce(raw, "x2", pid, last, 0, 12) == [0, 0]
        done = end(raw, "x2", pid, last, True)
        assert (done.error_code, done.producer_id, done.producer_epoch) != (0, pid, last + 1)
        assert done.error_code == 0 and done.producer_id != pid and done.producer_epoch == 0
        # the new id writes and commits the next transaction
        assert produce(raw, "x2", done.producer_id, 0, 0, 12) == [0, 0]
        again = end(raw, "x2", done.producer_id, 0, True)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (
            0,
            done.producer_id,
            1,
        )
        assert [stable(broker, i) for i in (0, 1)] == [(4, 4), (4, 4)]


def test_produce_while_the_last_commit_is_being_completed_is_retried(broker: Broker) -> None:
    """EndTxn v5 answers once PrepareCommit is written; the producer's next transaction may
    reach a leader while the markers of the last one are still going out. Its partitions cannot
    join yet (CONCURRENT_TRANSACTIONS at the coordinator): the produce answers the retriable
    NOT_ENOUGH_REPLICAS, as Kafka's ReplicaManager does whichever broker coordinates, not the
    fatal INVALID_TXN_STATE that would kill a Kafka Streams thread (seen on three brokers,
    where markers to other leaders take longer)."""
    with RawClient(broker.bootstrap) as raw:
        pid, epoch = init(raw, "p2")
        assert produce(raw, "p2", pid, epoch, 0, 12) == [0, 0]

        async def prepare_only(server: Any) -> ErrorCode:
            coord = server.txn_coordinator
            md = coord.txns["p2"]
            return await coord.manager.persist(md, md.prepare_end(True, coord.clock(), bump=True))

        assert broker.call(prepare_only) == ErrorCode.NONE
        retriable = [ErrorCode.NOT_ENOUGH_REPLICAS] * 2
        assert produce(raw, "p2", pid, epoch + 1, 0, 12) == retriable

        async def complete(server: Any) -> None:
            coord = server.txn_coordinator
            await coord._finish(coord.txns["p2"], True)

        broker.call(complete)
        assert produce(raw, "p2", pid, epoch + 1, 0, 12) == [0, 0]


def test_produce_to_a_partition_in_the_transaction_while_another_add_is_written(
    broker: Broker,
) -> None:
    """A partition already in the ongoing transaction verifies while another add of the same
    transaction is being written to the state log (TxnOffsetCommit's offsets partition, or a
    produce to another leader), as Kafka's verification, which does not look at the pending
    state: refused with INVALID_TXN_STATE, a Kafka Streams thread died (three instances on
    three brokers)."""
    with RawClient(broker.bootstrap) as raw:
        pid, epoch = init(raw, "p3")
        assert produce(raw, "p3", pid, epoch, 0, 12) == [0, 0]

        async def start_another_add(server: Any) -> None:
            coord = server.txn_coordinator
            md = coord.txns["p3"]
            md.prepare_add_partitions({("__consumer_offsets", 0)}, coord.clock())

        broker.call(start_another_add)
        try:
            assert produce(raw, "p3", pid, epoch, 1, 12) == [0, 0]
        finally:

            async def abandon(server: Any) -> None:
                server.txn_coordinator.txns["p3"].abandon()

            broker.call(abandon)
