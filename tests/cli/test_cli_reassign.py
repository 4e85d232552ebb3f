"""`odradek topics reassign` (kafka-reassign-partitions.sh) in a subprocess against a 3-broker
in-process cluster: --generate proposes, --execute starts the moves and prints the rollback
file, --verify reports them until completed, --list and --cancel a move that cannot finish."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from odradek.testing.cluster import FAST_FAILOVER, Cluster
from tests.cli.cli_run import run_odradek

pytestmark = pytest.mark.cluster

DEADLINE_S = 30


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(3, topics={"r": (2, 2)}, config=FAST_FAILOVER, data_dir=str(tmp_path)) as c:
        yield c


def cli(cluster: Cluster, *args: str, status: int | None = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek("topics", "reassign", *args, bootstrap=cluster.bootstrap, status=status)


def test_generate_execute_verify(cluster: Cluster, tmp_path: Path) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(50):
        producer.send("r", b"%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "r"}], "version": 1}))
    out = cli(
        cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2"
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    current = json.loads(lines[1])
    assert [p["replicas"] for p in current["partitions"]] == [[0, 1], [1, 2]]
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert [p["replicas"] for p in proposed["partitions"]] == [[1, 2], [2, 1]]

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    out = cli(cluster, "--execute", "--reassignment-json-file", str(plan))
    lines = out.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[2]) == current
    assert lines[-1] == "Successfully started partition reassignments for r-0,r-1"

    deadline = time.monotonic() + DEADLINE_S
    while True:
        out = cli(cluster, "--verify", "--reassignment-json-file", str(plan), status=None)
        if out.returncode == 0:
            break
        assert "is still in progress." in out.stdout, (out.stdout, out.stderr)
        assert time.monotonic() < deadline, out.stdout
    assert out.stdout.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition r-0 is completed.",
        "Reassignment of partition r-1 is completed.",
    ]
    assert cluster.partition("r", 0).replicas == [1, 2]
    assert cluster.partition("r", 1).replicas == [2, 1]
    cluster.wait_for_replication("r", 0)
    assert cluster.log_end_offset(2, "r", 0) == 25
    assert cluster.log_end_offset(0, "r", 0) == -1
    assert cli(cluster, "--list").stdout == "No partition reassignments found.\n"


def moves(replicas: list[int]) -> dict:
    return {"version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": replicas}]}


def test_list_and_cancel(cluster: Cluster, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": [0, 1, 2]}]}
        )
    )
    cluster.cut_off_peers(2)  # broker 2 cannot catch up: the move stays in progress
    cli(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert cli(cluster, "--list").stdout.splitlines() == [
        "Current partition reassignments:",
        "r-0: replicas: 0,1,2. adding: 2. removing: .",
    ]
    out = cli(cluster, "--verify", "--reassignment-json-file", str(plan), status=1)
    assert "Reassignment of partition r-0 is still in progress." in out.stdout
    out = cli(cluster, "--cancel", "--reassignment-json-file", str(plan))
    assert out.stdout == "Successfully cancelled partition reassignments for: r-0\n"
    assert cluster.partition("r", 0).replicas == [0, 1]
    out = cli(cluster, "--cancel", "--reassignment-json-file", str(plan))
    assert out.stdout == "None of the specified partition reassignments are active.\n"
    cluster.heal()
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": [0, 9]}]}
        )
    )
    out = cli(cluster, "--execute", "--reassignment-json-file", str(bad), status=1)
    assert "r-0: INVALID_REPLICATION_ASSIGNMENT" in out.stderr, out.stderr
    out = cli(cluster, "--execute", status=1)
    assert "--reassignment-json-file is required" in out.stderr
