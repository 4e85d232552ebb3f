"""Transactions in a three-broker cluster: FindCoordinator points at the leader of the id's
`__transaction_state` partition, markers reach partitions led elsewhere (WriteTxnMarkers), and
when the coordinator's broker dies the new leader of the state partition takes over the open
transaction from the replicated state."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.coordinator.txn.config import STATE_TOPIC, partition_for
from odradek.testing import Cluster

pytestmark = pytest.mark.cluster

TOPIC = "t"
# __consumer_offsets at RF 2: it is first needed by the reader after a broker is killed, and at
# Kafka's RF 3 it cannot be created with two brokers alive, so the reader's close waited out
# librdkafka's 45 s session timeout looking for its group coordinator (as it would on Kafka)
CONFIG = {
    "transaction.state.log.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.replication.factor": 2,
}


def read_committed(bootstrap: str, expected: int, partitions: int = 3) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "r",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    out: list[bytes] = []
    eof: set[int] = set()
    try:
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while (len(eof) < partitions or len(out) < expected) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    return out


def send(p: Producer, prefix: str) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(6)]
    for i, v in enumerate(values):
        p.produce(TOPIC, value=v, partition=i % 3)
    assert p.flush(20) == 0
    return values


def test_transactions_across_brokers_survive_the_coordinator_dying() -> None:
    with Cluster(brokers=3, topics={TOPIC: (3, 3)}, config=CONFIG) as cluster:
        leaders = {cluster.leader(TOPIC, p) for p in range(3)}
        assert len(leaders) > 1  # markers must go to other brokers too
        tid = "cluster-tx"
        p = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": tid,
                "retry.backoff.ms": 50,
            }
        )
        p.init_transactions(30)
        p.begin_transaction()
        committed = send(p, "c")
        p.commit_transaction(30)
        p.begin_transaction()
        send(p, "x")
        p.abort_transaction(30)
        p.begin_transaction()
        committed += send(p, "open")

        state_partition = partition_for(tid, 3)
        coordinator = cluster.leader(STATE_TOPIC, state_partition)
        cluster.wait_for_isr(STATE_TOPIC, state_partition, size=3)
        cluster.kill(coordinator)
        cluster.wait_for_leader(STATE_TOPIC, state_partition)
        assert cluster.leader(STATE_TOPIC, state_partition) != coordinator
        p.commit_transaction(60)  # the new coordinator finishes the transaction

        got = read_committed(cluster.bootstrap, len(committed))
        assert sorted(got) == sorted(committed)
