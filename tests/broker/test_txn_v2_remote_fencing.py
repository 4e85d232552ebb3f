"""Transactions v2 on two brokers: a transactional Produce v12 to a partition led by a broker
that does not coordinate the transaction, under a producer epoch the coordinator has moved past
(a delayed Produce of the previous transaction, KAFKA-17754). The leader asks the coordinator
to add the partition (AddPartitionsToTxn v5), which answers PRODUCER_FENCED; as Kafka's
AddPartitionsToTxnManager, the produce answers INVALID_PRODUCER_EPOCH (what producers expect on
a produce, KIP-588), the same answer as when one broker is both leader and coordinator."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from odradek.coordinator.txn.config import STATE_TOPIC, partition_for
from odradek.testing import Cluster
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch
from tests.broker.test_transactions_v2 import init as init_tid

TOPIC = "t"
TID = "remote-fence"
CONFIG = {
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.version": 2,
}
P = protocol.ProduceRequest


def init(raw: RawClient) -> tuple[int, int]:
    return init_tid(raw, TID)


def produce(
    raw: RawClient, partition: int, pid: int, epoch: int, seq: int, version: int = 12
) -> Any:
    batch = build_batch(
        [(None, b"e%d" % epoch, [], int(time.time() * 1000))],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    data = [P.TopicProduceData.PartitionProduceData(index=partition, records=batch)]
    resp = raw.request(
        P(
            transactional_id=TID,
            acks=-1,
            timeout_ms=5000,
            topic_data=[P.TopicProduceData(name=TOPIC, partition_data=data)],
        ),
        version,
    )
    return resp.responses[0].partition_responses[0].error_code


def end(raw: RawClient, pid: int, epoch: int, commit: bool, version: int = 3) -> Any:
    return raw.request(
        protocol.EndTxnRequest(
            transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        version,
    )


def stable(cluster: Cluster, node: int, index: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of TOPIC-index on broker `node`."""

    def read(c: Any) -> tuple[int, int]:
        part = c.brokers[node].topics.get(TOPIC, index)
        return part.last_stable_offset, part.high_watermark

    return cluster.call(read)


@contextmanager
def two_brokers(
    config: dict[str, int],
) -> Iterator[tuple[Cluster, RawClient, RawClient, list[int], list[int]]]:
    """Two brokers, TOPIC's two partitions led one by each: (cluster, a client of the
    transaction's coordinator, a client of the other broker, the partitions the other leads,
    the ones the coordinator leads)."""
    with Cluster(brokers=2, topics={TOPIC: (2, 1)}, config=config) as cluster:
        with RawClient(cluster.address(0)) as raw:  # creates the state topic
            raw.request(protocol.FindCoordinatorRequest(key=TID, key_type=1), 2)
        cluster.wait_for_leader(STATE_TOPIC, partition_for(TID, 1))
        coordinator = cluster.leader(STATE_TOPIC, partition_for(TID, 1))
        remote = [p for p in range(2) if cluster.leader(TOPIC, p) != coordinator]
        local = [p for p in range(2) if cluster.leader(TOPIC, p) == coordinator]
        assert remote and local, "one partition led by each broker"
        with (
            RawClient(cluster.address(coordinator)) as coord,
            RawClient(cluster.address(cluster.leader(TOPIC, remote[0]))) as other,
        ):
            yield cluster, coord, other, remote, local


def test_stale_epoch_produce_via_a_remote_coordinator_is_invalid_producer_epoch() -> None:
    with two_brokers(CONFIG) as (cluster, coord, other, remote, local):
        pid, epoch = init(coord)
        assert produce(other, remote[0], pid, epoch, 0) == ErrorCode.NONE
        done = end(coord, pid, epoch, True, 5)
        assert (done.error_code, done.producer_epoch) == (0, epoch + 1)
        # T1's produce again, under T1's epoch: to the partition led elsewhere and to the
        # coordinator's own partition (which T1 never wrote to)
        assert produce(other, remote[0], pid, epoch, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert produce(coord, local[0], pid, epoch, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
        # the current epoch goes on with T2
        assert produce(other, remote[0], pid, epoch + 1, 0) == ErrorCode.NONE


def add_v3(raw: RawClient, partition: int, pid: int, epoch: int) -> int:
    Req = protocol.AddPartitionsToTxnRequest
    resp = raw.request(
        Req(
            v3_and_below_transactional_id=TID,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[Req.AddPartitionsToTxnTopic(name=TOPIC, partitions=[partition])],
        ),
        3,
    )
    return resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def test_v1_produce_to_a_partition_not_in_the_transaction_is_verified_remotely() -> None:
    """Transactions v1 (Produce v9): KIP-890 part 1 verification when the partition's leader is
    not the coordinator. A delayed Produce of an aborted transaction (its only copy), arriving
    while the next transaction does not have the partition, is refused INVALID_TXN_STATE as
    when one broker is both (Kafka asks the coordinator with AddPartitionsToTxn verify_only);
    written, it would open a transaction no coordinator knows and hold the partition's last
    stable offset back for good."""
    v1 = {**CONFIG, "transaction.version": 0}
    with two_brokers(v1) as (cluster, coord, other, remote, local):
        leader = cluster.leader(TOPIC, remote[0])
        pid, epoch = init(coord)
        # never added: refused, nothing written (TRANSACTION_ABORTABLE from v11 on)
        assert produce(other, remote[0], pid, epoch, 0, 9) == ErrorCode.INVALID_TXN_STATE
        assert produce(other, remote[0], pid, epoch, 0, 11) == ErrorCode.TRANSACTION_ABORTABLE
        # T1 adds the partition; its produce is delayed; T1 aborts
        assert add_v3(coord, remote[0], pid, epoch) == ErrorCode.NONE
        assert end(coord, pid, epoch, False).error_code == ErrorCode.NONE
        # T2 (same epoch) on the coordinator's own partition; T1's produce arrives
        assert add_v3(coord, local[0], pid, epoch) == ErrorCode.NONE
        assert produce(coord, local[0], pid, epoch, 0, 9) == ErrorCode.NONE
        assert produce(other, remote[0], pid, epoch, 0, 9) == ErrorCode.INVALID_TXN_STATE
        assert end(coord, pid, epoch, True).error_code == ErrorCode.NONE
        # nothing open on the remote partition: T1's abort marker and nothing after it
        assert stable(cluster, leader, remote[0]) == (1, 1)
