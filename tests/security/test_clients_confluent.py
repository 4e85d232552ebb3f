"""confluent-kafka (librdkafka) over every security mode (tests/security/conftest.py MODES):
an admin call (CreateTopics, then the topic in Metadata), produce, consume in a group with a
committed offset, and a transaction read back read_committed, with the settings
`Broker.client_config()` gives."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

WAIT_S = 30.0


def consume(conf: dict[str, Any], topic: str, want: int, **extra: Any) -> list[bytes]:
    consumer = ck.Consumer(
        {**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            got.append(msg.value())
        if got:
            consumer.commit(asynchronous=False)
            committed = consumer.committed([ck.TopicPartition(topic, 0)], timeout=WAIT_S)
            # the position: after the last record, or past the transaction's marker
            assert committed[0].offset in (want, want + 1)
    finally:
        consumer.close()
    return got


def test_confluent_kafka(secure_broker) -> None:
    conf = secure_broker.client_config(user="alice")
    topic = f"ck-{uuid.uuid4().hex[:8]}"

    admin = AdminClient(conf)
    (future,) = admin.create_topics([NewTopic(topic, 1, 1)]).values()
    future.result(WAIT_S)
    assert topic in admin.list_topics(timeout=WAIT_S).topics

    producer = ck.Producer({**conf, "acks": "all"})
    for i in range(5):
        producer.produce(topic, value=b"plain-%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0

    txn = ck.Producer({**conf, "transactional.id": f"txn-{topic}"})
    txn.init_transactions(WAIT_S)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, value=b"txn-%d" % i, partition=0)
    txn.commit_transaction(WAIT_S)

    want = [b"plain-%d" % i for i in range(5)] + [b"txn-%d" % i for i in range(3)]
    got = consume(
        conf, topic, len(want), **{"group.id": f"g-{topic}", "isolation.level": "read_committed"}
    )
    assert got == want
