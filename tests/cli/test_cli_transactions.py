"""`odradek transactions` (kafka-transactions.sh) in a subprocess against a real broker: a
transaction left open by a real transactional producer is listed, described, found in the
partition's producer state and aborted by its start offset, which lets read_committed consumers
past it."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from odradek.testing import Broker
from tests.cli.cli_run import run_odradek

_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


def cli(broker: Broker, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek("transactions", *args, bootstrap=broker.bootstrap, status=status)


def rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def last_stable_offset(broker: Broker, tp: TopicPartition) -> int:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    try:
        return consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


@pytest.fixture
def hanging(broker: Broker) -> Iterator[tuple[str, str, int]]:
    """(topic, transactional id, producer id): 3 plain records in partition 1, then an open
    transaction of one record there that nobody commits."""
    n = next(_names)
    topic, tid = f"txn-topic-{n}", f"txn-id-{n}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    finally:
        admin.close()
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(3):
        plain.send(topic, b"plain-%d" % i, partition=1)
    plain.flush(30)
    plain.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"in-transaction", partition=1)
    producer.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        pid = admin.describe_transactions([tid])[tid].producer_id
    finally:
        admin.close()
    try:
        yield topic, tid, pid
    finally:
        producer.close(timeout=0)


def test_list_describe_and_abort_a_hanging_transaction(
    broker: Broker, hanging: tuple[str, str, int]
) -> None:
    topic, tid, pid = hanging
    tp = TopicPartition(topic, 1)
    assert last_stable_offset(broker, tp) == 3  # held back by the open transaction

    listed = rows(cli(broker, "list").stdout)
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [tid, "0", str(pid), "Ongoing"] in listed

    described = rows(cli(broker, "describe", "--transactional-id", tid).stdout)
    assert described[0][:5] == [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
    ]
    assert described[1][:5] == ["0", tid, str(pid), "0", "Ongoing"]
    assert described[1][-1] == f"{topic}-1"
    doc = json.loads(cli(broker, "describe", "--transactional-id", tid, "--json").stdout)
    assert doc["topic_partitions"] == [f"{topic}-1"] and doc["transaction_duration_ms"] >= 0

    producers = json.loads(
        cli(broker, "describe-producers", "--topic", topic, "--partition", "1", "--json").stdout
    )
    mine = [p for p in producers if p["producer_id"] == pid]
    assert len(mine) == 1 and mine[0]["current_transaction_start_offset"] == 3

    proc = cli(
        broker, "abort", "--topic", topic, "--partition", "1", "--start-offset", "2", status=1
    )
    assert proc.stderr.strip() == (
        f"odradek: Could not find any open transactions starting at offset 2 on partition {topic}-1"
    )
    assert last_stable_offset(broker, tp) == 3

    out = cli(broker, "abort", "--topic", topic, "--partition", "1", "--start-offset", "3").stdout
    assert (
        out.strip()
        == f"Aborted the transaction of producer {pid} (epoch 0) on partition {topic}-1."
    )
    # the abort marker ends the transaction on the partition: read_committed reads past it
    assert last_stable_offset(broker, tp) == 5
    after = rows(cli(broker, "describe-producers", "--topic", topic, "--partition", "1").stdout)
    assert [row for row in after if row[0] == str(pid)][0][-1] == "None"


def test_transaction_errors(broker: Broker) -> None:
    proc = cli(broker, "describe", "--transactional-id", "no-such-id", status=1)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in lines[0]
    proc = cli(broker, "abort", "--topic", "t", "--partition", "0", status=1)
    assert "give either --start-offset or --producer-id" in proc.stderr
    proc = cli(
        broker, "describe-producers", "--topic", "no-such-topic", "--partition", "0", status=1
    )
    assert "UNKNOWN_TOPIC_OR_PARTITION" in proc.stderr and len(proc.stderr.splitlines()) == 1
