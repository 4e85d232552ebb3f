"""`odradek leader-election` (kafka-leader-election.sh) in a subprocess against a 3-broker
in-process cluster: leadership moved away from preferred replicas by controlled shutdowns comes
back when asked, and every outcome (elected, not needed, failed) is reported."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.cluster import FAST_FAILOVER, Cluster
from tests.cli.cli_run import run_odradek

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(3, topics={"t": (3, 3)}, config=FAST_FAILOVER, data_dir=str(tmp_path)) as c:
        yield c


def cli(cluster: Cluster, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek("leader-election", *args, bootstrap=cluster.bootstrap, status=status)


def test_preferred_and_unclean_elections(cluster: Cluster, tmp_path: Path) -> None:
    preferred = {p: cluster.partition("t", p).replicas[0] for p in range(3)}
    assert sorted(preferred.values()) == [0, 1, 2]
    by_leader = {leader: p for p, leader in preferred.items()}
    moved = [by_leader[0], by_leader[1]]  # the partitions whose preferred leader we restart
    cluster.stop_broker(0)  # controlled shutdowns move every leadership to broker 2
    cluster.stop_broker(1)
    cluster.start_broker(0)
    cluster.start_broker(1)
    for p in range(3):
        cluster.wait_for_isr("t", p, size=3)
    assert [cluster.leader("t", p) for p in range(3)] == [2, 2, 2]

    first = moved[0]
    out = cli(cluster, "--election-type", "preferred", "--topic", "t", "--partition", str(first))
    assert out.stdout.splitlines() == [
        f"Successfully completed leader election (PREFERRED) for partitions t-{first}"
    ]
    assert cluster.leader("t", first) == preferred[first]
    out = cli(cluster, "--election-type", "PREFERRED", "--topic", "t", "--partition", str(first))
    assert out.stdout.splitlines() == [f"Valid replica already elected for partitions t-{first}"]

    # every partition: only the one still off its preferred leader moves, nothing else is listed
    second = moved[1]
    out = cli(cluster, "--election-type", "preferred", "--all-topic-partitions")
    assert out.stdout.splitlines() == [
        f"Successfully completed leader election (PREFERRED) for partitions t-{second}"
    ]
    assert [cluster.leader("t", p) for p in range(3)] == [preferred[p] for p in range(3)]

    # unclean on partitions that have a leader: nothing to do; a missing partition fails
    path = tmp_path / "partitions.json"
    path.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 2}]}))
    out = cli(cluster, "--election-type", "unclean", "--path-to-json-file", str(path))
    assert out.stdout.splitlines() == ["Valid replica already elected for partitions t-2"]
    proc = cli(
        cluster, "--election-type", "preferred", "--topic", "t", "--partition", "9", status=1
    )
    assert proc.stdout.startswith(
        "Error completing leader election (PREFERRED) for partition: t-9: "
        "UNKNOWN_TOPIC_OR_PARTITION"
    )
    assert proc.stderr.strip() == "odradek: 1 replica(s) could not be elected"
    proc = cli(cluster, "--election-type", "preferred", "--topic", "t", status=1)
    assert proc.stderr.strip() == "odradek: --topic needs --partition"
