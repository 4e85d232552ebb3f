"""Batches of repetitive JSON log lines inflating to 200 MB, from real clients, are accepted and
read back (the produce path's record walk streams them; docs/notes.md, "Produce-time
validation streams compressed batches").

One codec per client here, each batch tens to hundreds of times its compressed size:
confluent-kafka with zstd, kafka-python with lz4. Every codec is covered in-process by
tests/log/test_validator_streaming.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.test_bad_input import NONE, create_topic
from odradek.testing.log_lines import json_log_values
from odradek.testing.raw import RawClient

pytestmark = pytest.mark.compat

TOTAL = 200_000_000
# room for the compressed batch (1-2 MB); 16x this is far below what the batch inflates to
TOPIC_MAX = 4 << 20
WAIT_S = 120.0


def values() -> Iterator[bytes]:
    return json_log_values(TOTAL)


def expected() -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    for v in values():
        h.update(v)
        n += 1
    return n, h.hexdigest()


def make_topic(broker: BrokerProcess) -> str:
    topic = unique_name("jsonlogs")
    with RawClient(broker.bootstrap) as c:
        configs = {"max.message.bytes": str(TOPIC_MAX)}
        assert create_topic(c, topic, configs=configs) == NONE
    return topic


def test_confluent_kafka_zstd_batch_inflating_to_200_mb(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = make_topic(broker)
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "compression.type": "zstd",
            "linger.ms": 60_000,  # one batch: flush() sends it
            "batch.size": 2_000_000_000,
            "batch.num.messages": 1_000_000,
            "message.max.bytes": 1_000_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )

    def report(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for v in values():
        producer.produce(topic, v, partition=0, on_delivery=report)
    assert producer.flush(WAIT_S) == 0
    assert errors == []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("g"),
            "enable.auto.commit": False,
            "receive.message.max.bytes": 2_000_000_000,
            "fetch.max.bytes": 100_000_000,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        count, digest = expected()
        h = hashlib.sha256()
        got = 0
        while got < count:
            msg = consumer.poll(WAIT_S)
            assert msg is not None, f"{got} of {count} records read"
            assert msg.error() is None, msg.error()
            assert msg.offset() == got
            h.update(msg.value())
            got += 1
        assert h.hexdigest() == digest
    finally:
        consumer.close()


def test_kafka_python_lz4_batch_inflating_to_200_mb(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = make_topic(broker)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type="lz4",
        linger_ms=60_000,
        batch_size=TOTAL + 10_000_000,
        max_request_size=TOTAL + 10_000_000,
    )
    try:
        futures = [producer.send(topic, v, partition=0) for v in values()]
        producer.flush(WAIT_S)
        offsets = [f.get(timeout=WAIT_S).offset for f in futures]
        assert offsets == list(range(len(offsets)))
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        fetch_max_bytes=100_000_000,
        max_partition_fetch_bytes=100_000_000,
        consumer_timeout_ms=int(WAIT_S * 1000),
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        count, digest = expected()
        h = hashlib.sha256()
        got = 0
        for msg in consumer:
            assert msg.offset == got
            h.update(msg.value)
            got += 1
            if got == count:
                break
        assert got == count
        assert h.hexdigest() == digest
    finally:
        consumer.close()
