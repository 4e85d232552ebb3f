"""Spark's Kafka access pattern against odradek, without the Spark jars.

`java/SparkAccessPattern.java` does with kafka-clients 3.9.1 what Spark's stock connector
(spark-sql-kafka-0-10) does: AdminClient describeCluster / listTopics / describeTopics and
listOffsets (earliest, latest, by timestamp; both isolation levels) on the driver, consumers that
assign one partition, seek and poll without joining a group on the executors, and an idempotent
producer in the sink. It checks every record itself; here we check that every check ran, then
read the topic back with another client (confluent-kafka) to see the same records.

The full Spark jobs live in spark_examples/ (their tests need the connector jars, marked `spark`).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from compat_tests.harness import BrokerProcess
from compat_tests.java_harness import JavaPrograms

PARTITIONS = 3
PER_BATCH = 150

EXPECTED_CHECKS = [
    "OK createTopic",
    "OK describeCluster",
    "OK listTopics",
    "OK describeTopics",
    "OK produce",
    "OK listOffsets batch1 earliest,latest read_uncommitted",
    "OK listOffsets batch1 earliest,latest read_committed",
    "OK read batch1 read_uncommitted nogroup",
    "OK read batch1 read_committed group",
    "OK availableRange",
    "OK listOffsets forTimestamp read_uncommitted",
    "OK listOffsets forTimestamp read_committed",
    "OK read byTimestamp",
    "OK listOffsets batch2 earliest,latest read_uncommitted",
    "OK listOffsets batch2 earliest,latest read_committed",
    "OK read batch2 read_committed group",
    "OK read all read_uncommitted nogroup",
    "DONE",
]


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # confluent-kafka requires one; assign() never joins it
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list[tuple] = []
    at_eof: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_eof.add(msg.partition())
                    if len(at_eof) == partitions and len(records) >= expected:
                        break
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            records.append(
                (msg.partition(), msg.offset(), msg.key(), msg.value(), dict(msg.headers() or []))
            )
    finally:
        consumer.close()
    return records


def test_spark_access_pattern(broker: BrokerProcess, java: JavaPrograms, topic_name: str) -> None:
    result = java.run(
        "SparkAccessPattern", broker.bootstrap, topic_name, str(PARTITIONS), str(PER_BATCH),
        timeout=180,
    )  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith(("OK", "FAIL", "DONE"))]
    failed = [line for line in lines if line.startswith("FAIL")]
    assert not failed and result.returncode == 0, (
        f"SparkAccessPattern exited {result.returncode}: {failed}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr[-5000:]}"
    )
    for want in EXPECTED_CHECKS:
        assert any(line.startswith(want) for line in lines), f"check {want!r} did not run: {lines}"
    assert f"records={2 * PER_BATCH}" in next(x for x in lines if x.startswith("OK read all"))

    # Another client sees the same records: every sequence number once, headers intact.
    records = _read_all(broker.bootstrap, topic_name, PARTITIONS, 2 * PER_BATCH)
    assert len(records) == 2 * PER_BATCH
    seqs = sorted(int(r[4]["seq"].decode().removeprefix("h")) for r in records)
    assert seqs == list(range(2 * PER_BATCH))
    for r in records:
        assert r[3] is not None and f'"seq":{r[4]["seq"].decode()[1:]},' in r[3].decode()
    for partition in range(PARTITIONS):
        offsets = [r[1] for r in records if r[0] == partition]
        assert offsets == list(range(len(offsets))), f"partition {partition} offsets {offsets}"


@pytest.mark.parametrize("partitions", [1])
def test_spark_access_pattern_single_partition(
    broker: BrokerProcess, java: JavaPrograms, topic_name: str, partitions: int
) -> None:
    result = java.run(
        "SparkAccessPattern", broker.bootstrap, topic_name, str(partitions), "40", timeout=180
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-5000:]}"
    assert result.stdout.rstrip().endswith("DONE")


def test_spark_read_committed_access_pattern(
    broker: BrokerProcess, java: JavaPrograms, topic_name: str
) -> None:
    """Spark's read_committed source over a transactional producer's topic: the last stable
    offset from listOffsets, and seek / poll / position() stepping over aborted records and
    transaction markers (SPARK-25005) to exactly the committed records."""
    result = java.run("SparkAccessPattern", broker.bootstrap, topic_name, "transactions", "5")
    lines = [line for line in result.stdout.splitlines() if line.startswith(("OK", "FAIL", "DONE"))]
    assert result.returncode == 0 and lines[-1:] == ["DONE"], (
        f"SparkAccessPattern exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr[-5000:]}"
    )
    assert "OK transactions 5 committed=15 aborted=10" in lines
    for label, count in [
        ("txn-committed read_committed group", 15),
        ("txn-all read_uncommitted nogroup", 25),
        ("txn-before-open read_committed group", 15),
        ("txn-after-commit read_committed group", 18),
    ]:
        assert f"OK read {label} records={count}" in lines, lines
    assert any(line.startswith("OK listOffsets latest open transaction") for line in lines)


def _run_checked(java: JavaPrograms, *args: str) -> list[str]:
    result = java.run("SparkAccessPattern", *args, timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("OK", "FAIL", "DONE"))]
    assert result.returncode == 0 and lines[-1:] == ["DONE"], (
        f"SparkAccessPattern {' '.join(args[1:])} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr[-5000:]}"
    )
    return lines


def test_spark_data_loss_access_pattern(
    broker: BrokerProcess, java: JavaPrograms, topic_name: str
) -> None:
    """After DeleteRecords: earliest and seekToBeginning give the log start; seeking outside the
    log gives OffsetOutOfRangeException with auto.offset.reset=none (Spark's failOnDataLoss)."""
    lines = _run_checked(java, broker.bootstrap, topic_name, "dataloss", "seek")
    assert "OK dataLoss seekToBeginning=10 outOfRange" in lines


# ListOffsets by timestamp must scan past batches below the log start offset and past
# transaction markers, as Kafka does: Spark's startingOffsetsByTimestamp relies on it.
def test_spark_timestamp_after_delete_records(
    broker: BrokerProcess, java: JavaPrograms, topic_name: str
) -> None:
    lines = _run_checked(java, broker.bootstrap, topic_name, "dataloss", "timestamp")
    assert "OK dataLoss forTimestamp=10" in lines


def test_spark_timestamp_over_transaction_markers(
    broker: BrokerProcess, java: JavaPrograms, topic_name: str
) -> None:
    lines = _run_checked(java, broker.bootstrap, topic_name, "markers")
    assert "OK forTimestamp over transaction markers" in lines
