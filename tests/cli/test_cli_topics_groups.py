"""`odradek topics describe` (offsets, sizes, under-replicated / unavailable reports) and
`odradek groups` (members, state, lag, delete-offsets, reset-offsets by duration, from a file,
export), driven as a user would: the CLI in a subprocess against real brokers and a real
kafka-python consumer group."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from odradek.testing import Broker
from odradek.testing.cluster import FAST_FAILOVER, Cluster
from odradek.testing.polling import poll_until
from tests.cli.cli_run import run_odradek

_names = itertools.count()
REPORTS = (
    "--under-replicated-partitions",
    "--unavailable-partitions",
    "--under-min-isr-partitions",
    "--at-min-isr-partitions",
)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:50]}-{next(_names)}"


def cli(bootstrap: str, *args: str, status: int | None = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek(*args, bootstrap=bootstrap, status=status)


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
    for flag in REPORTS[:3]:
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
        cli(
            cluster.bootstrap,
            "topics",
            "create",
            "strict",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
            "--config",
            "min.insync.replicas=2",
        )
        cluster.wait_for_isr("strict", 0, size=2)
        for flag in REPORTS[:3]:
            assert cli(cluster.bootstrap, "topics", "describe", flag).stdout == ""
        at_min = cli(cluster.bootstrap, "topics", "describe", "strict", "--at-min-isr-partitions")
        assert [r[:2] for r in rows(at_min.stdout)[1:]] == [["strict", "0"]]

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

        # strict-0 (replicas 0,1, min.insync.replicas=2) lost an ISR member: below its minimum
        under_min = cli(bootstrap, "topics", "describe", "--under-min-isr-partitions", "--json")
        assert ("strict", 0) in [(r["topic"], r["partition"]) for r in json.loads(under_min.stdout)]
        at_min = cli(bootstrap, "topics", "describe", "dup", "strict", "--at-min-isr-partitions")
        assert [r[:2] for r in rows(at_min.stdout)[1:]] == [["dup", "0"], ["dup", "2"]]

        # the full describe still answers, with no offsets for the leaderless partition
        doc = json.loads(cli(bootstrap, "topics", "describe", "solo", "dup", "--json").stdout)
        by = {(t["name"], p["partition"]): p for t in doc for p in t["partitions"]}
        assert by[("solo", 0)]["high_watermark"] is None
        assert by[("dup", 0)]["high_watermark"] == 4 and by[("dup", 0)]["size_bytes"] > 0

        cluster.start_broker(0)
        cluster.wait_for_isr("dup", 0, size=2)
        cluster.wait_for_isr("dup", 2, size=2)
        cluster.wait_for_isr("strict", 0, size=2)
        cluster.wait_for_leader("solo", 0)
        for flag in REPORTS[:3]:
            assert cli(cluster.bootstrap, "topics", "describe", flag).stdout == ""


# -- groups -------------------------------------------------------------------------------------


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> KafkaConsumer:
    """A live kafka-python member of `group` that consumed and committed `count` records."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="cli-tester",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = poll_until(consumer, lambda got: len(got) >= count, 30, max_records=count)
    assert len(got) == count, f"assigned {consumer.assignment()}"
    consumer.commit()
    return consumer


def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in found.items() if om.offset >= 0}


@pytest.mark.usefixtures("kafka_python_metadata_refresh")
def test_groups_describe_members_state_lag_and_delete_offsets(broker: Broker, name: str) -> None:
    topic, group, b = name, name + "-g", broker.bootstrap
    cli(b, "topics", "create", topic, "--partitions", "2")
    produce(b, topic, {0: 5, 1: 5})
    consumer = consume_and_commit(b, topic, group, 6)
    try:
        desc = json.loads(cli(b, "groups", "describe", group, "--json").stdout)
        [member] = desc["members"]
        assert desc["total_lag"] == 4 and desc["coordinator"]["id"] == 0
        host, port = b.split(":")
        assert (desc["coordinator"]["host"], str(desc["coordinator"]["port"])) == (host, port)

        verbose = rows(
            cli(b, "groups", "describe", "--group", group, "--members", "--verbose").stdout
        )
        assert verbose == [
            [
                "GROUP",
                "CONSUMER-ID",
                "GROUP-INSTANCE-ID",
                "HOST",
                "CLIENT-ID",
                "#PARTITIONS",
                "ASSIGNMENT",
            ],
            [group, member["member_id"], "-", member["host"], "cli-tester", "2", f"{topic}(0,1)"],
        ]
        members = rows(cli(b, "groups", "describe", group, "--members").stdout)
        assert members[1] == [group, member["member_id"], member["host"], "cli-tester", "2"]

        state = rows(cli(b, "groups", "describe", group, "--state").stdout)
        assert state == [
            ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [group, f"{b} (0)", "range", "Stable", "1"],
        ]

        offsets = cli(b, "groups", "describe", group, "--offsets").stdout.strip().splitlines()
        assert offsets[-1] == "Total lag: 4"
        table = rows("\n".join(offsets[:-1]))
        assert table[0][:6] == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
        ]
        assert sum(int(r[5]) for r in table[1:]) == 4
        assert "Total lag: 4" in cli(b, "groups", "describe", group).stdout

        # a live member subscribed to the topic keeps its offsets, as in Kafka
        busy = cli(b, "groups", "delete-offsets", "--group", group, "--topic", topic, status=1)
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in busy.stderr and len(busy.stderr.splitlines()) == 1
        assert committed(b, group) == {
            p["partition"]: p["current_offset"] for p in desc["partitions"]
        }
    finally:
        consumer.close()

    before = committed(b, group)
    out = cli(b, "groups", "delete-offsets", "--group", group, "--topic", f"{topic}:0").stdout
    assert rows(out) == [["TOPIC", "PARTITION", "STATUS"], [topic, "0", "Successful"]]
    assert committed(b, group) == {1: before[1]}
    doc = json.loads(cli(b, "groups", "delete-offsets", group, "--topic", topic, "--json").stdout)
    assert doc["partitions"] == [
        {"topic": topic, "partition": 0, "error": None},
        {"topic": topic, "partition": 1, "error": None},
    ]
    assert committed(b, group) == {}
    idle = cli(b, "groups", "describe", group, "--members").stdout
    assert idle.strip() == f"Consumer group '{group}' has no active members."

    missing = cli(
        b, "groups", "delete-offsets", "--group", name + "-nope", "--topic", topic, status=1
    )
    assert "does not exist" in missing.stderr and len(missing.stderr.splitlines()) == 1


@pytest.mark.usefixtures("kafka_python_metadata_refresh")
def test_groups_reset_offsets_by_duration_export_and_from_file(
    broker: Broker, name: str, tmp_path: Path
) -> None:
    topic, group, b = name, name + "-g", broker.bootstrap
    cli(b, "topics", "create", topic, "--partitions", "2")
    now_ms = int(time.time() * 1000)
    producer = KafkaProducer(bootstrap_servers=b)
    for partition in (0, 1):
        for i in range(10):
            # offsets 0-4 written two hours ago, 5-9 now (CreateTime)
            stamp = now_ms - 2 * 3600 * 1000 if i < 5 else now_ms
            producer.send(topic, value=b"%d" % i, partition=partition, timestamp_ms=stamp)
    producer.flush(10)
    producer.close()
    consume_and_commit(b, topic, group, 20).close()
    assert committed(b, group) == {0: 10, 1: 10}

    dry = cli(
        b, "groups", "reset-offsets", "--group", group, "--all-topics", "--by-duration", "PT1H"
    )
    assert rows(dry.stdout)[1:] == [[group, topic, "0", "10", "5"], [group, topic, "1", "10", "5"]]
    assert "Dry run" in dry.stderr
    assert committed(b, group) == {0: 10, 1: 10}  # --dry-run is the default

    plan = tmp_path / "plan.csv"
    exported = cli(
        b, "groups", "reset-offsets", group, "--topic", topic, "--by-duration", "PT1H", "--export"
    )
    assert exported.stdout == f"{topic},0,5\n{topic},1,5\n"
    explicit = cli(
        b, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--dry-run"
    )
    assert explicit.stderr == "" and rows(explicit.stdout)[1][-1] == "0"
    plan.write_text(exported.stdout)

    cli(b, "groups", "reset-offsets", group, "--all-topics", "--by-duration", "P1D", "--execute")
    assert committed(b, group) == {0: 0, 1: 0}

    cli(b, "groups", "reset-offsets", group, "--from-file", str(plan), "--execute")
    assert committed(b, group) == {0: 5, 1: 5}

    # kafka-consumer-groups.sh's several-group form: only this group's lines count
    multi = tmp_path / "multi.csv"
    multi.write_text(f"other,{topic},0,1\n{group},{topic},1,7\n\n")
    out = cli(b, "groups", "reset-offsets", group, "--from-file", str(multi), "--execute")
    assert rows(out.stdout)[1:] == [[group, topic, "1", "5", "7"]]
    assert committed(b, group) == {0: 5, 1: 7}

    # a consumer of the group resumes where the reset put it
    consumer = KafkaConsumer(topic, bootstrap_servers=b, group_id=group, enable_auto_commit=False)
    try:
        got = poll_until(consumer, lambda got: len({r.partition for r in got}) == 2, 30)
        first: dict[int, int] = {}
        for r in got:
            first.setdefault(r.partition, r.offset)
        assert first == {0: 5, 1: 7}
    finally:
        consumer.close()

    bad = tmp_path / "bad.csv"
    bad.write_text(f"{topic},zero,5\n")
    err = cli(b, "groups", "reset-offsets", group, "--from-file", str(bad), status=1).stderr
    assert f"{bad}:1" in err and len(err.splitlines()) == 1
    err = cli(
        b, "groups", "reset-offsets", group, "--all-topics", "--by-duration", "1 hour", status=1
    ).stderr
    assert "ISO 8601 duration" in err and len(err.splitlines()) == 1
    assert committed(b, group) == {0: 5, 1: 7}
