"""kafka-python over every security mode (tests/security/conftest.py MODES): an admin call
(CreateTopics, DescribeCluster), produce, consume in a group with a committed offset, and a
transaction read back read_committed, with `Broker.kafka_python_config()`."""

from __future__ import annotations

import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

WAIT_S = 30.0


def test_kafka_python(secure_broker) -> None:
    kw = secure_broker.kafka_python_config(user="alice")
    topic = f"kp-{uuid.uuid4().hex[:8]}"

    admin = KafkaAdminClient(**kw, request_timeout_ms=int(WAIT_S * 1000))
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        assert len(admin.describe_cluster()["brokers"]) == 1
    finally:
        admin.close()

    producer = KafkaProducer(**kw, acks="all")
    for i in range(5):
        producer.send(topic, b"plain-%d" % i, partition=0).get(timeout=WAIT_S)
    producer.close()

    txn = KafkaProducer(**kw, transactional_id=f"txn-{topic}")
    txn.init_transactions()
    txn.begin_transaction()
    for i in range(3):
        txn.send(topic, b"txn-%d" % i, partition=0)
    txn.commit_transaction()
    txn.close()

    want = [b"plain-%d" % i for i in range(5)] + [b"txn-%d" % i for i in range(3)]
    consumer = KafkaConsumer(
        topic,
        **kw,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(want) and (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            # one poll for all the time left (it returns once it has records): kafka-python
            # 3.0.12 drops a JoinGroup/SyncGroup round that completes between two polls and
            # starts another, so short polls at CI's load kept the group rebalancing all along
            for records in consumer.poll(timeout_ms=left_ms).values():
                got += [r.value for r in records]
        assert got == want, f"assigned {consumer.assignment()}"
        consumer.commit()
        # the position, past the transaction's commit marker once the consumer read it
        tp = TopicPartition(topic, 0)
        assert consumer.committed(tp) == consumer.position(tp) >= len(want)
    finally:
        consumer.close()
