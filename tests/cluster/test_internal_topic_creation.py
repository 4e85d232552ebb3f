"""Internal topics are created with their configured replication factor or not at all (issue 11,
chaos finding 1): while a broker is down, the first transactional producer gets
COORDINATOR_NOT_AVAILABLE (it retries) instead of a `__transaction_state` with fewer replicas
that stays under-replicated for good. Kafka: AutoTopicCreationManager / KafkaApis ("Number of
alive brokers 'N' does not meet the required replication factor 'R' for the transactions state
topic")."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

GROUP_KEY, TRANSACTION_KEY = 0, 1


def find_coordinator(bootstrap: str, key: str, key_type: int) -> int:
    with RawClient(bootstrap) as client:
        req = protocol.FindCoordinatorRequest(key=key, key_type=key_type)
        return client.request(req, 1).error_code


@pytest.mark.parametrize(
    ("topic", "key_type", "config"),
    [
        ("__transaction_state", TRANSACTION_KEY, "transaction.state.log.num.partitions"),
        ("__consumer_offsets", GROUP_KEY, "offsets.topic.num.partitions"),
    ],
)
def test_internal_topic_waits_for_enough_brokers(make_cluster, topic, key_type, config):
    cluster = make_cluster(3, config={config: "1"})
    cluster.kill(0)
    for _ in range(3):  # retried lookups while broker 0 is down: never created short
        assert find_coordinator(cluster.address(1), "x", key_type) == (
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
    assert cluster.call(lambda c: c.any_broker().topics.info(topic)) is None
    cluster.start_broker(0)
    deadline = time.monotonic() + 20
    while find_coordinator(cluster.address(1), "x", key_type) != ErrorCode.NONE:
        assert time.monotonic() < deadline, f"{topic} never became available"
        time.sleep(0.05)
    assert sorted(cluster.partition(topic, 0).replicas) == [0, 1, 2]


def test_transactional_producer_waits_for_the_broker_then_works(make_cluster):
    """The finding's own reproduction: init_transactions while broker 0 is down no longer
    creates the state topic with RF 2; once broker 0 is back it completes with RF 3."""
    cluster = make_cluster(
        3, config={"transaction.state.log.num.partitions": "1"}, topics={"t": (1, 3)}
    )
    cluster.kill(0)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "x"})
    with pytest.raises(ck.KafkaException):
        producer.init_transactions(1.0)  # COORDINATOR_NOT_AVAILABLE until broker 0 returns
    assert cluster.call(lambda c: c.any_broker().topics.info("__transaction_state")) is None
    cluster.start_broker(0)
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("t", b"v")
    producer.commit_transaction(20)
    assert sorted(cluster.partition("__transaction_state", 0).replicas) == [0, 1, 2]
