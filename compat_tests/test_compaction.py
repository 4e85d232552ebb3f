"""Log compaction seen by real clients: a compacted topic keeps the last value of every key at
its original offset, fetches step over the gaps, and `__consumer_offsets` (compacted too) still
restores every committed offset after a restart."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from compat_tests.harness import unique_name

pytestmark = pytest.mark.compat

CLEANER = {
    "log.cleaner.backoff.ms": "200",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": "2048",
}
WAIT_S = 30.0


def read_all(bootstrap: str, topic: str, partition: int = 0) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out = []
    deadline = time.monotonic() + WAIT_S
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=200).values():
            out += recs
    consumer.close()
    return out


def test_compacted_topic_keeps_last_value_per_key(fresh_broker) -> None:
    broker = fresh_broker(CLEANER)
    topic = unique_name("compacted")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics(
        [
            NewTopic(
                topic,
                1,
                1,
                topic_configs={
                    "cleanup.policy": "compact",
                    "segment.bytes": "1024",
                    "min.cleanable.dirty.ratio": "0.01",
                    "delete.retention.ms": "100",
                },
            )
        ]
    )
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    latest = {}
    for version in range(10):
        for k in range(20):
            md = producer.send(
                topic, key=f"key-{k}".encode(), value=f"value-{k}-{version}".encode()
            ).get(10)
            latest[f"key-{k}"] = (md.offset, f"value-{k}-{version}")
    deleted = producer.send(topic, key=b"key-0", value=None).get(10).offset
    # fill a few more segments so everything above is in sealed segments
    for i in range(40):
        producer.send(topic, key=b"filler", value=f"f-{i}".encode()).get(10)
    producer.close()
    written = 10 * 20 + 1 + 40

    def grouped(records: list) -> dict[str, list]:
        by_key: dict[str, list] = {}
        for r in records:
            by_key.setdefault(r.key.decode(), []).append(r)
        return by_key

    deadline = time.monotonic() + WAIT_S
    records = read_all(broker.bootstrap, topic)
    while (
        any(len(v) > 1 for k, v in grouped(records).items() if k != "filler")
        and time.monotonic() < deadline
    ):
        time.sleep(0.3)  # the cleaner runs on its own schedule: poll its result
        records = read_all(broker.bootstrap, topic)
    assert len(records) < written / 2, f"not compacted: {len(records)} of {written} records"
    by_key = grouped(records)
    for k in range(1, 20):
        (only,) = by_key[f"key-{k}"]
        assert (only.offset, only.value.decode()) == latest[f"key-{k}"]
    # the tombstone outlives the record it deletes until delete.retention.ms, then goes too
    assert [r.offset for r in by_key.get("key-0", []) if r.value is not None] == []
    deadline = time.monotonic() + WAIT_S
    while "key-0" in {r.key.decode() for r in records} and time.monotonic() < deadline:
        time.sleep(0.3)
        records = read_all(broker.bootstrap, topic)
    assert deleted not in [r.offset for r in records]
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets)


def test_compacted_offsets_topic_restores_commits(fresh_broker) -> None:
    broker = fresh_broker(CLEANER)
    topic = unique_name("commits")
    group = unique_name("compacting-group")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 4, 1)])
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False
    )
    tps = [TopicPartition(topic, p) for p in range(4)]
    consumer.assign(tps)
    for i in range(60):
        consumer.commit({tp: OffsetAndMetadata(i * 10 + tp.partition, f"m{i}", -1) for tp in tps})
    consumer.close()
    expected = {p: 590 + p for p in range(4)}
    deadline = time.monotonic() + WAIT_S
    stored = read_all(broker.bootstrap, "__consumer_offsets")
    while len(stored) > 60 and time.monotonic() < deadline:
        time.sleep(0.3)
        stored = read_all(broker.bootstrap, "__consumer_offsets")
    assert len(stored) < 60 * 4, "__consumer_offsets was not compacted"
    for hard in (False, True):
        broker.restart(hard=hard)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        offsets = admin.list_group_offsets({group: None})[group]
        admin.close()
        assert {tp.partition: om.offset for tp, om in offsets.items()} == expected
        assert {om.metadata for om in offsets.values()} == {"m59"}
