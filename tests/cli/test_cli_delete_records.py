"""`odradek delete-records` (kafka-delete-records.sh) in a subprocess against a real broker; the
new log start offsets checked with a kafka-python consumer."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from odradek.testing import Broker
from tests.cli.cli_run import run_odradek

_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


@pytest.fixture
def topic(broker: Broker, request: pytest.FixtureRequest) -> str:
    """A two-partition topic with 10 records in each partition."""
    name = f"{request.node.name[:40]}-{next(_names)}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics({name: {"num_partitions": 2, "replication_factor": 1}})
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(10):
            for p in (0, 1):
                producer.send(name, b"v%d" % i, partition=p)
        producer.flush(30)
    finally:
        producer.close()
    return name


def cli(broker: Broker, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek(*args, bootstrap=broker.bootstrap, status=status)


def start_offsets(broker: Broker, topic: str) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        found = consumer.beginning_offsets(tps)
        return [found[tp] for tp in tps]
    finally:
        consumer.close()


def test_delete_records_by_option_and_json_file(broker: Broker, topic: str, tmp_path: Path) -> None:
    out = cli(broker, "delete-records", "--topic", topic, "--partition", "0", "--offset", "4")
    assert out.stdout.splitlines() == [
        "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 4",
    ]
    assert start_offsets(broker, topic) == [4, 0]

    # Kafka's JSON file; offset -1 is the high watermark: everything goes
    spec = {
        "partitions": [
            {"topic": topic, "partition": 0, "offset": 6},
            {"topic": topic, "partition": 1, "offset": -1},
        ],
        "version": 1,
    }
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps(spec))
    out = cli(broker, "delete-records", "--offset-json-file", str(path), "--json")
    assert json.loads(out.stdout) == [
        {"topic": topic, "partition": 0, "offset": 6, "low_watermark": 6},
        {"topic": topic, "partition": 1, "offset": -1, "low_watermark": 10},
    ]
    assert start_offsets(broker, topic) == [6, 10]

    # no --partition: every partition of the topic; an offset below the start changes nothing
    out = cli(broker, "delete-records", "--topic", topic, "--offset", "5").stdout
    assert f"partition: {topic}-0\tlow_watermark: 6" in out.splitlines()
    assert f"partition: {topic}-1\tlow_watermark: 10" in out.splitlines()


def test_delete_records_errors(broker: Broker, topic: str, tmp_path: Path) -> None:
    proc = cli(
        broker, "delete-records", "--topic", topic, "--partition", "1", "--offset", "11", status=1
    )
    assert f"partition: {topic}-1\terror: OFFSET_OUT_OF_RANGE" in proc.stdout
    assert proc.stderr.strip() == "odradek: deleting records failed for 1 of 1 partitions"
    assert start_offsets(broker, topic) == [0, 0]

    path = tmp_path / "dup.json"
    dup = {"topic": topic, "partition": 0, "offset": 1}
    path.write_text(json.dumps({"partitions": [dup, dup], "version": 1}))
    proc = cli(broker, "delete-records", "--offset-json-file", str(path), status=1)
    assert "duplicate topic partitions" in proc.stderr
    proc = cli(broker, "delete-records", "--topic", topic, status=1)
    assert "give --topic and --offset" in proc.stderr
    proc = cli(broker, "delete-records", "--topic", topic + "-missing", "--offset", "1", status=1)
    assert "does not exist" in proc.stderr
    assert start_offsets(broker, topic) == [0, 0]
