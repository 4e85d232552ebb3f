"""Kafka 4.4's kafka-reassign-partitions and kafka-leader-election against a three-broker
odradek cluster and a three-node Kafka cluster, outputs compared.

odradek's in-process cluster numbers its brokers 0, 1, 2 and the Kafka fixture 1, 2, 3: the
scenario names brokers by position ({0}, {1}, {2}) and odradek's broker ids in the outputs are
shifted by one before comparing.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka as ck
import confluent_kafka.admin  # noqa: F401  (AdminClient)

from compat_tests.reference.conftest import ReferencePool
from compat_tests.reference.kafka_tools import ToolBatch, normalise
from odradek.testing import Cluster
from odradek.testing.cluster import FAST_FAILOVER

WAIT_S = 60.0
_ID_LISTS = re.compile(
    r"((?:Leader|Replicas|Isr|Elr|LastKnownElr): |\"replicas\":\[|brokers )([\d,]*)"
)


def _shift_ids(text: str) -> str:
    """odradek's broker ids 0, 1, 2 as the Kafka fixture's 1, 2, 3 in the fields naming them."""
    return _ID_LISTS.sub(
        lambda m: m.group(1) + ",".join(str(int(x) + 1) for x in m.group(2).split(",") if x),
        text,
    )


def _comparable(text: str) -> str:
    """Without data-dir paths and Kafka's ELR-driven topic-level min.insync.replicas (KIP-966,
    docs/kafka-tools.md)."""
    text = re.sub(r'"log_dirs":\[[^\]]*\]', '"log_dirs":[<dirs>]', text)
    return re.sub(r"Configs: min\.insync\.replicas=\d+,?", "Configs: ", text)


def _produce(bootstrap: str, topic: str) -> None:
    """Ten records into partition 0 before it moves, acknowledged by both replicas."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    assert producer.flush(WAIT_S) == 0


def _wait_replicas(bootstrap: str, topic: str, replicas: list[int]) -> None:
    """Until partition 0's replica set is `replicas` with all of them in sync."""
    admin = ck.admin.AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = admin.describe_topics(ck.TopicCollection([topic]))[topic].result(30)
        part = desc.partitions[0]
        now = ([n.id for n in part.replicas], sorted(n.id for n in part.isr))
        if now == (replicas, sorted(replicas)):
            return
        assert time.monotonic() < deadline, (topic, now, replicas)
        time.sleep(0.2)


def _run(bootstraps: dict[str, str], ids: dict[str, list[int]], work: Path, topic: str):
    """The two phases against both sides; the outputs per side, in order. Each step is one
    JVM (ToolBatch) for both sides, the sides' commands in turn."""
    moves = {side: work / f"move-{side}.json" for side in bootstraps}
    for side, move in moves.items():
        b = ids[side]
        move.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": topic, "partition": 0, "replicas": [b[2], b[1]]}],
                }
            )
        )

    def both(commands: Callable[[str, list[int], Path], list[tuple[str, ...]]]) -> None:
        batch = ToolBatch()
        index: dict[str, list[int]] = {}
        for side, bootstrap in bootstraps.items():
            for tool, *args in commands(bootstrap, ids[side], moves[side]):
                index.setdefault(side, []).append(
                    batch.add(tool, "--bootstrap-server", bootstrap, *args)
                )
        done = batch.run()
        for side, at in index.items():
            runs.setdefault(side, []).extend(done[i] for i in at)

    runs: dict[str, list] = {}
    both(
        lambda _bootstrap, b, _move: [
            (
                "kafka-topics",
                "--create",
                "--topic",
                topic,
                "--replica-assignment",
                f"{b[0]}:{b[1]},{b[1]}:{b[2]}",
            )
        ]
    )
    for bootstrap in bootstraps.values():
        _produce(bootstrap, topic)
    both(
        lambda _bootstrap, _b, move: [
            ("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(move))
        ]
    )
    for side, bootstrap in bootstraps.items():
        b = ids[side]
        _wait_replicas(bootstrap, topic, [b[2], b[1]])
    both(
        lambda _bootstrap, _b, move: [
            ("kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(move)),
            (
                "kafka-leader-election",
                "--election-type",
                "preferred",
                "--topic",
                topic,
                "--partition",
                "0",
            ),
            ("kafka-topics", "--describe", "--topic", topic),
            (
                "kafka-console-consumer",
                "--topic",
                topic,
                "--partition",
                "0",
                "--offset",
                "earliest",
                "--max-messages",
                "10",
                "--timeout-ms",
                "30000",
            ),
        ]
    )
    return runs


def test_reassignment_and_leader_election_as_on_kafka(
    reference_pool: ReferencePool, tmp_path: Path
) -> None:
    kafka = reference_pool.get("4.4", nodes=3)
    topic = f"moves-{uuid.uuid4().hex[:8]}"
    with Cluster(3, config=FAST_FAILOVER, data_dir=str(tmp_path / "odradek")) as cluster:
        runs = _run(
            {"odradek": cluster.bootstrap, "kafka": kafka.bootstrap},
            {"odradek": [0, 1, 2], "kafka": [1, 2, 3]},
            tmp_path,
            topic,
        )
    mismatches = []
    for ours, theirs in zip(runs["odradek"], runs["kafka"], strict=True):
        o, k = _comparable(_shift_ids(normalise(ours.out))), _comparable(normalise(theirs.out))
        if (ours.rc, o) != (theirs.rc, k):
            mismatches.append(f"{ours}\n=== kafka ===\n{theirs}")
    assert not mismatches, "\n\n".join(mismatches)
    # the partition moved with its records, and the preferred replica leads it
    describe = runs["odradek"][4].out
    assert "Partition: 0\tLeader: 2\tReplicas: 2,1\tIsr: " in describe, describe
    assert runs["odradek"][5].out.splitlines() == [f"r{i}" for i in range(10)]
