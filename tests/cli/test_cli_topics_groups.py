"""`odradek topics describe` (offsets, sizes, under-replicated / unavailable reports) and
`odradek groups` (members, state, lag, delete-offsets, reset-offsets by duration, from a file,
export), driven as a user would: the CLI in a subprocess against real brokers and a real
kafka-python consumer group."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

from odradek.testing import Broker
from odradek.testing.cluster import FAST_FAILOVER, Cluster

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 60
_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:50]}-{next(_names)}"


def cli(bootstrap: str, *args: str, status: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": bootstrap}
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        text=True,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        env=env,
        cwd=REPO,
    )
    if status is not None:
        assert proc.returncode == status, (proc.stdout, proc.stderr)
    return proc


def rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], size: int = 100) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(topic, value=b"%05d" % i + b"x" * (size - 5), partition=partition)
    producer.flush(10)
    producer.close()


# -- topics describe ----------------------------------------------------------------------------


def test_topics_describe_shows_offsets_epoch_and_size(broker: Broker, name: str) -> None:
    cli(broker.bootstrap, "topics", "create", name, "--partitions", "2")
    produce(broker.bootstrap, name, {0: 7, 1: 3})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.delete_records({TopicPartition(name, 0): 2})
        [dirs] = admin.describe_log_dirs([name])
        on_disk = {
            p["partition_index"]: p["partition_size"]
            for d in dirs["log_dirs"]
            for t in d["topics"]
            if t["name"] == name
            for p in t["partitions"]
        }
    finally:
        admin.close()
    assert on_disk[0] > on_disk[1] > 0

    doc = json.loads(cli(broker.bootstrap, "topics", "describe", name, "--json").stdout)
    got = [
        (p["partition"], p["leader"], p["leader_epoch"], p["log_start_offset"])
        + (p["high_watermark"], p["size_bytes"])
        for p in doc["partitions"]
    ]
    assert got == [(0, 0, 0, 2, 7, on_disk[0]), (1, 0, 0, 0, 3, on_disk[1])]

    text = cli(broker.bootstrap, "topics", "describe", name).stdout
    table = rows("\n".join(text.strip().splitlines()[1:]))
    assert table == [
        [
            "PARTITION",
            "LEADER",
            "EPOCH",
            "REPLICAS",
            "ISR",
            "OFFLINE",
            "LOG-START-OFFSET",
            "HIGH-WATERMARK",
            "SIZE",
        ],
        ["0", "0", "0", "0", "0", "-", "2", "7", str(on_disk[0])],
        ["1", "0", "0", "0", "0", "-", "0", "3", str(on_disk[1])],
    ]
    # a healthy single broker has nothing to report
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert cli(broker.bootstrap, "topics", "describe", name, flag).stdout == ""
    both = cli(
        broker.bootstrap,
        "topics",
        "describe",
        "--under-replicated-partitions",
        "--unavailable-partitions",
        status=2,
    )
    assert "not allowed with" in both.stderr


def test_topics_describe_reports_under_replicated_and_unavailable_partitions() -> None:
    # placement is round robin: solo-p lives on broker p; dup-0 on 0,1; dup-1 on 1,2; dup-2 on 2,0
    topics = {"solo": (3, 1), "dup": (3, 2)}
    with Cluster(brokers=3, topics=topics, config=FAST_FAILOVER) as cluster:
        produce(cluster.bootstrap, "dup", {0: 4, 1: 4, 2: 4})
        for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
            assert cli(cluster.bootstrap, "topics", "describe", flag).stdout == ""

        cluster.kill(0)
        cluster.wait_for_isr("dup", 0, members={1})
        cluster.wait_for_isr("dup", 2, members={2})
        bootstrap = cluster.bootstrap

        under = json.loads(
            cli(bootstrap, "topics", "describe", "--under-replicated-partitions", "--json").stdout
        )
        assert [
            (r["topic"], r["partition"], r["replicas"], r["isr"])
            for r in under
            if r["topic"] == "dup"
        ] == [("dup", 0, [0, 1], [1]), ("dup", 2, [2, 0], [2])]
        assert ("solo", 1) not in [(r["topic"], r["partition"]) for r in under]
        text = cli(bootstrap, "topics", "describe", "dup", "--under-replicated-partitions")
        assert rows(text.stdout) == [
            ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            ["dup", "0", "1", "1", "0,1", "1", "0"],
            ["dup", "2", "2", "0", "2,0", "2", "0"],
        ]

        text = cli(bootstrap, "topics", "describe", "--unavailable-partitions")
        assert rows(text.stdout) == [
            ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            ["solo", "0", "none", "0", "0", "-", "0"],
        ]

        # the full describe still answers, with no offsets for the leaderless partition
        doc = json.loads(cli(bootstrap, "topics", "describe", "solo", "dup", "--json").stdout)
        by = {(t["name"], p["partition"]): p for t in doc for p in t["partitions"]}
        assert by[("solo", 0)]["high_watermark"] is None
        assert by[("dup", 0)]["high_watermark"] == 4 and by[("dup", 0)]["size_bytes"] > 0

        cluster.start_broker(0)
        cluster.wait_for_isr("dup", 0, size=2)
        cluster.wait_for_isr("dup", 2, size=2)
        cluster.wait_for_leader("solo", 0)
        for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
            assert cli(cluster.bootstrap, "topics", "describe", flag).stdout == ""
