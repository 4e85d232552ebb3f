"""Plain Kafka client helpers (confluent-kafka) around the Spark and Flink jobs.

The generator fills input topics with them and the tests read output topics back with them, so
what a job wrote is checked by a client other than the engine that wrote it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer saw it (or as a producer's delivery report acknowledged it)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Create `topic`; an existing topic is left as it is."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)])
    try:
        futures[topic].result(timeout=WAIT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, int | None, int | None]],
    *,
    config: dict[str, object] | None = None,
) -> list[Record]:
    """Send (key, value, timestamp ms or None, partition or None) records with an idempotent
    producer; return what the broker acknowledged, in send order. Raises unless all were
    delivered. Partition None leaves the choice to the producer's partitioner (by key)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
         **(config or {})}
    )  # fmt: skip
    acked: dict[int, Record] = {}
    errors: list[str] = []

    def report(index: int):  # noqa: ANN202 - a delivery callback
        def on_delivery(err: KafkaError | None, msg) -> None:  # noqa: ANN001
            if err is not None:
                errors.append(f"record {index}: {err}")
                return
            acked[index] = Record(
                msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(),
                msg.value(),
            )  # fmt: skip

        return on_delivery

    count = 0
    for count, (key, value, ts, partition) in enumerate(records, start=1):
        kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": report(count - 1)}
        if ts is not None:
            kwargs["timestamp"] = ts
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        producer.poll(0)
    left = producer.flush(WAIT_S)
    if left or errors or len(acked) != count:
        raise RuntimeError(f"produce to {topic}: {left} undelivered, errors {errors[:5]}")
    return [acked[i] for i in range(count)]


def produce_transactions(
    bootstrap: str,
    topic: str,
    transactions: Sequence[tuple[bool, Sequence[tuple[bytes | None, bytes]]]],
    transactional_id: str,
) -> None:
    """Run one transaction per (commit?, records) item: commit it, or abort it after its
    records reached the log (flushed), so read_uncommitted readers do see aborted records."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(WAIT_S)
    for commit, records in transactions:
        producer.begin_transaction()
        for key, value in records:
            producer.produce(topic, key=key, value=value)
        if producer.flush(WAIT_S):
            raise RuntimeError(f"transactional produce to {topic} not delivered")
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            producer.abort_transaction(WAIT_S)


def read_all(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = WAIT_S,
    isolation_level: str = "read_committed",
) -> list[Record]:
    """Every record in `topic` from the beginning, until each partition is at its end (and at
    least `expected` records arrived); bounded by `timeout` seconds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"spark-examples-reader-{time.monotonic_ns()}",  # never joined: assign()
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation_level,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=WAIT_S).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"topic {topic}: {meta.error}")
        partitions = sorted(meta.partitions)
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Record] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {topic}: {err}")
                at_end.add(msg.partition())
                if len(at_end) == len(partitions) and len(records) >= (expected or 0):
                    break
                continue
            at_end.discard(msg.partition())
            records.append(
                Record(
                    msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(),
                    msg.value(), tuple(msg.headers() or ()),
                )
            )  # fmt: skip
        else:
            raise TimeoutError(
                f"read {len(records)} records from {topic} in {timeout}s, wanted {expected}"
            )
        return records
    finally:
        consumer.close()


def partitions(bootstrap: str, topic: str) -> list[int]:
    """The partition ids of `topic`, sorted."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=WAIT_S).topics[topic]
    if meta.error is not None:
        raise RuntimeError(f"topic {topic}: {meta.error}")
    return sorted(meta.partitions)
