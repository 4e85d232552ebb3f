"""Retention and compaction results, odradek against Apache Kafka 4.4, on brokers whose
retention check and cleaner run every few hundred milliseconds.

Records carry timestamps from 2023 (TS0), a second apart, so a segment of them is past any time
retention at once, and each append rolls the segment before it: a segment's age counts from its
first batch's timestamp to the incoming batch's (Kafka's LogSegment.timeWaitedForRoll). What is
compared is what a consumer reading from the beginning sees once the log has settled: the first
offset and every record left, by offset, key and value.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import ODRADEK_OVERRIDES, ReferencePool
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference

TS0 = 1_700_000_000_000
FAST = {"log.retention.check.interval.ms": "300", "log.cleaner.backoff.ms": "200"}
# Kafka waits log.initial.task.delay.ms (30 s) before its first retention check
KAFKA_FAST = {**FAST, "log.initial.task.delay.ms": "0"}


@pytest.fixture(scope="module")
def fast_odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("odradek-fast"), overrides={**ODRADEK_OVERRIDES, **FAST}
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def fast_kafka(reference_pool: ReferencePool) -> Iterator[KafkaReference]:
    cluster = reference_pool.get("4.4", overrides=KAFKA_FAST)
    yield cluster
    reference_pool.release(cluster)


def fresh(label: str) -> str:
    return f"ref_{label}_{uuid.uuid4().hex[:8]}"


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 from its first offset up to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": fresh("r"), "auto.offset.reset": "error"}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 15)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 15
        while (not got or got[-1][0] < high - 1) and high > low:
            assert time.monotonic() < deadline, (got, low, high)
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.key(), msg.value()))
        return got
    finally:
        consumer.close()


def settle(
    bootstrap: str, topic: str, done: Callable[[list], bool], wait_s: float = 40
) -> list[tuple[int, bytes | None, bytes | None]]:
    """The log once `done(records)` holds and five retention/cleaner intervals (1.5 s) pass
    without a change: retention and cleaning go segment by segment (bounded: then as it is)."""
    deadline = time.monotonic() + wait_s
    last: list[tuple[int, bytes | None, bytes | None]] | None = None
    since = time.monotonic()
    while True:
        try:
            records = read_all(bootstrap, topic)
        except AssertionError:  # the log start moved while it was read: read again
            records = []
        if records != last:
            last, since = records, time.monotonic()
        elif done(records) and time.monotonic() - since >= 1.5:
            return records
        if time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], first: int = 0
) -> None:
    """Record i of the topic gets timestamp TS0 + i seconds (more than segment.ms apart)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, (key, value) in enumerate(records, start=first):
        producer.produce(topic, key=key, value=value, timestamp=TS0 + 1000 * i)
        assert producer.flush(30) == 0  # one batch per record: each can start a segment


def create(bootstrap: str, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def test_time_retention_deletes_expired_segments(
    fast_odradek: BrokerProcess, fast_kafka: KafkaReference
) -> None:
    def scenario(bootstrap: str) -> object:
        topic = fresh("ret")
        create(bootstrap, topic, **{"retention.ms": "1000", "segment.ms": "100"})
        produce(bootstrap, topic, [(b"k", f"old{i}".encode()) for i in range(3)])
        # a record stamped 30 minutes ahead rolls the old segment and stays (Kafka 4.x takes
        # timestamps up to an hour ahead; a current one would expire during the test)
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(
            topic, key=b"k", value=b"new", timestamp=int(time.time() * 1000) + 1_800_000
        )
        assert producer.flush(30) == 0
        return settle(bootstrap, topic, lambda rs: bool(rs) and rs[0][0] > 0)

    ours = scenario(fast_odradek.bootstrap)
    theirs = scenario(fast_kafka.bootstrap)
    Checker("4.4").check("retention.ms of old records", ours, theirs)


def test_compaction_keeps_the_last_value_per_key_and_tombstones(
    fast_odradek: BrokerProcess, fast_kafka: KafkaReference
) -> None:
    def cleaned(records: list) -> bool:
        keys = [k for _, k, _ in records[:-1]]  # the active segment is never cleaned
        return bool(records) and records[0][0] > 0 and len(keys) == len(set(keys))

    def scenario(bootstrap: str) -> object:
        topic = fresh("cmp")
        create(
            bootstrap,
            topic,
            **{
                "cleanup.policy": "compact",
                "segment.ms": "100",
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "86400000",
                "retention.ms": "-1",
            },
        )
        produce(
            bootstrap,
            topic,
            [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"a", b"4"), (b"b", b"5"), (b"c", None)],
        )
        produce(bootstrap, topic, [(b"z", b"last")], first=6)
        return settle(bootstrap, topic, cleaned)

    ours = scenario(fast_odradek.bootstrap)
    theirs = scenario(fast_kafka.bootstrap)
    Checker("4.4").check("compaction with a tombstone", ours, theirs)
