"""Share group offsets (KIP-932's DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) through `odradek groups`, as kafka-share-groups.sh drives them: the CLI in
a subprocess against a real broker, confluent-kafka's ShareConsumer showing what a consumer of
the group then receives."""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from kafka import KafkaProducer

from odradek.testing import Broker
from odradek.testing.cluster import Cluster
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from tests.cli.cli_run import run_odradek

WAIT_S = 30.0
_names = itertools.count()
CONFIG = {
    "group.share.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.num.partitions": "2",
    "offsets.topic.num.partitions": "2",
}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config=CONFIG) as b:
        yield b


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{next(_names)}"


def cli(bootstrap: str, *args: str, status: int | None = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek(*args, bootstrap=bootstrap, status=status)


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for p in range(partitions):
        for i in range(per_partition):
            producer.send(topic, value=b"%d-%d" % (p, i), partition=p)
    producer.flush(10)
    producer.close()


def offsets(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[Any, Any]]:
    out = json.loads(cli(bootstrap, "groups", "describe", group, "--json").stdout)
    assert out["type"] == "share", out
    return {(r["topic"], r["partition"]): (r["start_offset"], r["lag"]) for r in out["partitions"]}


def consume(bootstrap: str, group: str, topic: str, count: int, hold: Any = None) -> list[str]:
    """A share consumer of the group accepts records until it has `count` (each
    acknowledgement committed), then leaves; `hold(consumer)` runs while it is a member."""
    c = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    got: list[str] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(got) < count:
            assert time.monotonic() < deadline, f"timed out with {got}"
            msgs = list(c.poll(0.5))
            for m in msgs:
                assert m.error() is None, m.error()
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                got.append(f"{m.partition()}:{m.offset()}")
            if msgs:
                c.commit_sync(WAIT_S)
        if hold is not None:
            hold(c)
    finally:
        c.close()
    return sorted(got)


def test_reset_describe_and_delete_share_group_offsets(broker: Broker, name: str) -> None:
    topic, group = name, f"{name}-g"
    cli(broker.bootstrap, "topics", "create", topic, "--partitions", "2")
    produce(broker.bootstrap, topic, 5, 2)
    # a new share group starts at the log end; reset to the earliest first (no member yet)
    out = cli(
        broker.bootstrap,
        "groups",
        "reset-offsets",
        "--share",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    ).stdout
    assert "NEW-OFFSET" in out
    assert offsets(broker.bootstrap, group) == {(topic, 0): (0, 5), (topic, 1): (0, 5)}

    def refused_while_member(_c: Any) -> None:
        proc = cli(
            broker.bootstrap,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-latest",
            "--execute",
            status=1,
        )
        assert "inactive" in proc.stderr, proc.stderr
        # the broker itself refuses too (NON_EMPTY_GROUP), whatever the tool checks
        A: Any = protocol.request_class(91)
        T = A.AlterShareGroupOffsetsRequestTopic
        req = A(
            group_id=group,
            topics=[
                T(
                    topic_name=topic,
                    partitions=[
                        T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)
                    ],
                )
            ],
        )
        with RawClient(broker.bootstrap) as raw:
            _cid, data = raw.encode(req, 0)
            raw.send(data)
            resp = protocol.response_class(91).decode(raw.read_frame(), version=0, header=True)
        assert resp.error_code == 68  # NON_EMPTY_GROUP

    got = consume(broker.bootstrap, group, topic, 10, hold=refused_while_member)
    assert got == sorted(f"{p}:{i}" for p in (0, 1) for i in range(5))
    assert offsets(broker.bootstrap, group) == {(topic, 0): (5, 0), (topic, 1): (5, 0)}
    text = cli(broker.bootstrap, "groups", "describe", group, "--offsets").stdout
    assert "START-OFFSET" in text and "Total lag: 0" in text

    # back to offset 2 of partition 0: those three records are delivered again
    cli(
        broker.bootstrap,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:0",
        "--to-offset",
        "2",
        "--execute",
    )
    assert offsets(broker.bootstrap, group)[(topic, 0)] == (2, 3)
    assert consume(broker.bootstrap, group, topic, 3) == ["0:2", "0:3", "0:4"]

    proc = cli(broker.bootstrap, "groups", "delete-offsets", group, "--topic", topic)
    assert "Successful" in proc.stdout
    assert offsets(broker.bootstrap, group) == {}
    proc = cli(broker.bootstrap, "groups", "delete-offsets", group, "--topic", topic, status=1)
    assert "no offset information" in proc.stderr

    # DeleteGroups deletes an empty share group and its state
    cli(broker.bootstrap, "groups", "reset-offsets", group, "--share", "--topic", topic,
        "--to-earliest", "--execute")  # fmt: skip
    assert "Deleted" in cli(broker.bootstrap, "groups", "delete", group).stdout
    assert "does not exist" in cli(broker.bootstrap, "groups", "describe", group, status=1).stderr


def test_altered_share_offsets_survive_a_restart(tmp_path: Path) -> None:
    with Broker(config=CONFIG, data_dir=str(tmp_path)) as b:
        topic, group = "t", "g"
        cli(b.bootstrap, "topics", "create", topic)
        produce(b.bootstrap, topic, 6, 1)
        cli(
            b.bootstrap,
            "groups",
            "reset-offsets",
            "--share",
            group,
            "--topic",
            topic,
            "--to-offset",
            "4",
            "--execute",
        )
        b.restart()
        assert offsets(b.bootstrap, group) == {(topic, 0): (4, 2)}
        assert consume(b.bootstrap, group, topic, 2) == ["0:4", "0:5"]


@pytest.mark.cluster
def test_reset_reaches_partition_leaders_on_other_brokers() -> None:
    """On three brokers the group's coordinator, the partitions' leaders and their state
    partitions' leaders differ: partition leaders that served the group before the reset read
    the new start offsets when the next member comes."""
    with Cluster(3, config=CONFIG) as cluster:
        cluster.create_topic("ct", 3, 1)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, linger_ms=5)
        for p in range(3):
            for _ in range(4):
                producer.send("ct", value=b"x", partition=p)
        producer.flush(10)
        producer.close()
        cli(cluster.bootstrap, "groups", "reset-offsets", "--share", "cg", "--topic", "ct",
            "--to-earliest", "--execute")  # fmt: skip
        assert len(consume(cluster.bootstrap, "cg", "ct", 12)) == 12
        cli(cluster.bootstrap, "groups", "reset-offsets", "cg", "--topic", "ct", "--to-offset",
            "2", "--execute")  # fmt: skip
        # lag from each partition's leader, wherever it is
        assert offsets(cluster.bootstrap, "cg") == {("ct", p): (2, 2) for p in range(3)}
        got = consume(cluster.bootstrap, "cg", "ct", 6)
        assert got == [f"{p}:{o}" for p in range(3) for o in (2, 3)]
