"""Transactions v2 (KIP-890 part 2) on a three-broker odradek cluster, which finalizes
transaction.version 2 as a new Kafka 4.x cluster does: the feature agrees on every broker and an
UpdateFeatures answered by one reaches all; the kafka-clients 4.4.0 producer
(compat_tests/java4/TxnV2.java) commits, aborts, is fenced and times out with its partitions and
its transaction coordinator on different brokers (the partition leader adds the partition with
AddPartitionsToTxn v5 to the coordinator); a producer committing transaction after transaction
(compat_tests/java4/TxnV2Loop.java) goes on when its coordinator broker is killed under it, and
a read_committed consumer sees exactly the committed transactions; librdkafka (transactions v1)
works beside it."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.java_harness import JavaPrograms, kafka_lib_classpath
from compat_tests.reference.test_transactions_v2 import check_outcome, epochs_of
from odradek.coordinator.txn.config import partition_for
from odradek.testing.cluster import Cluster
from odradek.testing.raw import RawClient
from odradek.wire import protocol

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

SOURCES = Path(__file__).resolve().parent / "java4"
CONFIG = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
TXN_STATE_PARTITIONS = 3


@pytest.fixture(scope="module")
def java4(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(
        tmp_path_factory.mktemp("java4-txn-cluster"),
        kafka_lib_classpath("4.4.0"),
        source_dir=SOURCES,
    )


@pytest.fixture
def cluster(odradek_cluster: Any) -> Iterator[Cluster]:
    yield odradek_cluster(3, config=CONFIG)


BASE = {"group.version": 1, "streams.version": 1}  # finalized on a new cluster, as Kafka 4.4's


def finalized(address: str) -> tuple[dict[str, int], int]:
    with RawClient(address) as raw:
        resp = raw.request(
            protocol.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
        )
    levels = {f.name: f.max_version_level for f in resp.finalized_features}
    return levels, resp.finalized_features_epoch


def update_transaction_version(address: str, level: int) -> int:
    UF = protocol.UpdateFeaturesRequest
    req = UF(
        timeout_ms=5000,
        feature_updates=[
            UF.FeatureUpdateKey(
                feature="transaction.version",
                max_version_level=level,
                upgrade_type=1 if level else 2,
            )
        ],
        validate_only=False,
    )
    with RawClient(address) as raw:
        return int(raw.request(req, 1).error_code)


def test_transaction_version_is_the_clusters(cluster: Cluster) -> None:
    """Every broker reports the same finalized levels; a downgrade on broker 2 and an upgrade on
    broker 1 are seen by all three."""
    addresses = [cluster.address(n) for n in range(3)]
    assert {a: finalized(a)[0] for a in addresses} == dict.fromkeys(
        addresses, {**BASE, "transaction.version": 2}
    )
    assert update_transaction_version(addresses[2], 0) == 0
    assert {a: finalized(a)[0] for a in addresses} == dict.fromkeys(addresses, BASE)
    assert update_transaction_version(addresses[1], 2) == 0
    seen = {a: finalized(a) for a in addresses}
    assert len(set((tuple(sorted(lv.items())), ep) for lv, ep in seen.values())) == 1, seen
    assert seen[addresses[0]][0] == {**BASE, "transaction.version": 2}


def test_java_4_transactions_v2_across_brokers(java4: JavaPrograms, cluster: Cluster) -> None:
    """TxnV2.java: its partitions (two, on two brokers) and its coordinators spread over the
    cluster: every EndTxn bumps the epoch, fencing, the coordinator's timeout abort,
    read_committed sees the committed records only, offsets committed in a transaction."""
    name = f"tv2c-{uuid.uuid4().hex[:8]}"
    result = java4.run("TxnV2", cluster.bootstrap, name, name, f"{name}-g", timeout=240)
    explain = (
        f"TxnV2 exited {result.returncode}\n--- stdout ---\n{result.stdout}\n"
        f"--- stderr ---\n{result.stderr[-8000:]}"
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["DONE"], explain
    assert "FEATURE transaction.version 2" in lines, explain
    # two partitions on two brokers: at least one is not led by the transaction's coordinator
    leaders = {cluster.leader(name, 0), cluster.leader(name, 1)}
    assert len(leaders) == 2, leaders
    epochs = epochs_of(lines)
    first = epochs["init"][0]
    assert [epochs[s][0] for s in ("init", "commit", "abort", "offsets")] == [
        first + i for i in range(4)
    ], explain
    check_outcome(lines, explain)


def read_committed(bootstrap: str, topic: str, expected: int) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    seen: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + 60
        ends_at = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value().decode())
            if len(seen) >= expected:
                # anything beyond what was committed would follow at once: read on briefly
                ends_at = ends_at or time.monotonic() + 2
                if time.monotonic() > ends_at:
                    break
    finally:
        consumer.close()
    return seen


def test_coordinator_killed_under_a_committing_producer(
    java4: JavaPrograms, cluster: Cluster
) -> None:
    """TxnV2Loop.java commits 40 transactions in a row; after the 10th the broker coordinating
    its transactional id is killed (mid-transaction, the loop never pauses). The producer finds
    the new coordinator and goes on; read_committed sees each committed transaction's records
    once and nothing of an aborted attempt."""
    topic = f"tv2k-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2, 3)
    tid = f"{topic}-txn"
    count = 40
    classes = java4.compile("TxnV2Loop")
    cmd = [
        "java",
        *java4.jvm_args,
        "-cp",
        java4._cp(classes),
        "TxnV2Loop",
        cluster.bootstrap,
        topic,
        tid,
        str(count),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    lines: list[str] = []
    tenth = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("COMMITTED 9 "):
                tenth.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert tenth.wait(120), lines
        victim = cluster.leader("__transaction_state", partition_for(tid, TXN_STATE_PARTITIONS))
        cluster.kill(victim)
        proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
    stderr = proc.stderr.read() if proc.stderr else ""
    explain = "stdout:\n" + "\n".join(lines) + f"\nstderr:\n{stderr[-6000:]}"
    assert proc.returncode == 0 and lines[-1:] == ["DONE"], explain
    committed = [ln.split() for ln in lines if ln.startswith("COMMITTED ")]
    assert [int(i) for _c, i, _a in committed] == list(range(count)), explain
    expected = sorted(f"t{i}-a{a}-p{p}" for _c, i, a in committed for p in (0, 1))
    seen = read_committed(cluster.bootstrap, topic, len(expected))
    assert sorted(seen) == expected, explain
    # transactions v2 all along: every EndTxn v5 bumped the epoch, the new coordinator's too
    coordinator = cluster.leader("__transaction_state", partition_for(tid, TXN_STATE_PARTITIONS))
    with RawClient(cluster.address(coordinator)) as raw:
        (state,) = raw.request(
            protocol.DescribeTransactionsRequest(transactional_ids=[tid]), 0
        ).transaction_states
    assert state.error_code == 0 and state.producer_epoch >= count, state
    # per partition in transaction order
    for p in (0, 1):
        order = [int(v.split("-")[0][1:]) for v in seen if v.endswith(f"-p{p}")]
        assert order == sorted(order)


def test_librdkafka_transactions_v1_on_the_cluster(cluster: Cluster) -> None:
    """confluent-kafka (librdkafka speaks transactions v1 only) beside the finalized v2:
    commit, abort, commit; read_committed sees the committed records."""
    from confluent_kafka import Producer

    topic = f"tv1c-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    expected = []
    for n, outcome in enumerate(("commit", "abort", "commit")):
        producer.begin_transaction()
        for p in (0, 1):
            producer.produce(topic, f"t{n}-{outcome}-p{p}".encode(), partition=p)
        if outcome == "commit":
            producer.commit_transaction(30)
            expected += [f"t{n}-{outcome}-p{p}" for p in (0, 1)]
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    assert sorted(read_committed(cluster.bootstrap, topic, len(expected))) == sorted(expected)
