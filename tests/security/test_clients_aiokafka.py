"""aiokafka over every security mode (tests/security/conftest.py MODES): an admin call
(CreateTopics, DescribeCluster), produce, consume in a group with a committed offset, and a
transaction read back read_committed, with `Broker.aiokafka_config()`."""

from __future__ import annotations

import asyncio
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

WAIT_S = 30.0
WANT = [b"plain-%d" % i for i in range(5)] + [b"txn-%d" % i for i in range(3)]


async def round_trip(broker, topic: str) -> None:
    kw = broker.aiokafka_config(user="bob")
    admin = AIOKafkaAdminClient(**kw, request_timeout_ms=int(WAIT_S * 1000))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        cluster = await admin.describe_cluster()
        assert len(cluster["brokers"]) == 1
    finally:
        await admin.close()

    producer = AIOKafkaProducer(**kw, acks="all")
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, b"plain-%d" % i, partition=0)
    finally:
        await producer.stop()

    txn = AIOKafkaProducer(**kw, transactional_id=f"txn-{topic}")
    await txn.start()
    try:
        async with txn.transaction():
            for i in range(3):
                await txn.send(topic, b"txn-%d" % i, partition=0)
    finally:
        await txn.stop()

    consumer = AIOKafkaConsumer(
        topic,
        **kw,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(WANT) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                got += [r.value for r in records]
        # checked before position(), which raises for a partition the group never assigned
        assert got == WANT, f"assigned {consumer.assignment()}"
        await consumer.commit()
        tp = TopicPartition(topic, 0)
        assert await consumer.committed(tp) == await consumer.position(tp) >= len(WANT)
    finally:
        await consumer.stop()


def test_aiokafka(secure_broker) -> None:
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    asyncio.run(asyncio.wait_for(round_trip(secure_broker, topic), 2 * WAIT_S))
