"""Transactions v2 (KIP-890 part 2) with the kafka-clients 4.4.0 producer
(compat_tests/java4/TxnV2.java), against an `odradek serve` process with transaction.version 2
finalized and against Apache Kafka 4.4 (which finalizes it on a new cluster), the same checks on
both: the feature in describeFeatures; the producer epoch bumped by every commit and abort (the
EndTxn v5 epoch bump, seen through describeTransactions); offsets committed inside a transaction
(TxnOffsetCommit v5, no AddOffsetsToTxn); a zombie producer fenced; a transaction open past its
timeout aborted by the coordinator and its commit refused; a read_committed consumer seeing the
committed records only, in order."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.java_harness import JavaPrograms, kafka_lib_classpath
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.kafka_tools import ToolBatch

SOURCES = Path(__file__).resolve().parents[1] / "java4"
# the coordinator looks for timed-out transactions this often (Kafka's default: 10 s)
ABORT_CHECK = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
SINGLE_NODE = {
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "offsets.topic.replication.factor": "1",
}


@pytest.fixture(scope="module")
def java4(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(
        tmp_path_factory.mktemp("java4-txn"), kafka_lib_classpath("4.4.0"), source_dir=SOURCES
    )


def odradek_process(tmp: Path, transaction_version: int) -> BrokerProcess:
    return BrokerProcess(
        tmp,
        overrides={
            "transaction.version": str(transaction_version),
            "group.initial.rebalance.delay.ms": "0",
            "transaction.state.log.num.partitions": "3",
            "offsets.topic.num.partitions": "3",
            **ABORT_CHECK,
        },
    )


@pytest.fixture(scope="module")
def odradek_tv2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = odradek_process(tmp_path_factory.mktemp("odradek-tv2"), 2).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def odradek_tv0(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = odradek_process(tmp_path_factory.mktemp("odradek-tv0"), 0).start()
    yield proc
    proc.stop()


@pytest.fixture(params=["odradek", "kafka-4.4"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "odradek":
        proc: BrokerProcess = request.getfixturevalue("odradek_tv2")
        return proc.bootstrap
    get: Callable[..., KafkaReference] = request.getfixturevalue("reference_kafka")
    return get("4.4", overrides={**ABORT_CHECK, **SINGLE_NODE}).bootstrap


def run_txn_v2(java4: JavaPrograms, bootstrap: str) -> tuple[list[str], str]:
    name = f"tv2-{uuid.uuid4().hex[:8]}"
    result = java4.run("TxnV2", bootstrap, name, name, f"{name}-g", timeout=240)
    explain = (
        f"TxnV2 exited {result.returncode}\n--- stdout ---\n{result.stdout}\n"
        f"--- stderr ---\n{result.stderr[-8000:]}"
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["DONE"], explain
    return lines, explain


def check_outcome(lines: list[str], explain: str) -> None:
    """Fencing, the timeout, what read_committed sees, the offsets: the same in v1 and v2."""
    assert "FENCED ProducerFencedException" in lines, explain
    assert any(ln in lines for ln in ("ABORTED PrepareAbort", "ABORTED CompleteAbort")), explain
    (timeout,) = [ln for ln in lines if ln.startswith("TIMEOUT ")]
    assert timeout != "TIMEOUT none", explain
    read = [ln.removeprefix("READ ") for ln in lines if ln.startswith("READ ")]
    per_part = {p: [v for v in read if v.startswith(f"{p}:")] for p in (0, 1)}
    assert per_part == {
        0: ["0:c1-0", "0:c1-2", "0:c2-0", "0:c2-2", "0:f-0"],
        1: ["1:c1-1", "1:c1-3", "1:c2-1", "1:c2-3", "1:f-1"],
    }, explain
    assert "GROUP 42" in lines, explain


def epochs_of(lines: list[str]) -> dict[str, tuple[int, str]]:
    return {
        ln.split()[1]: (int(ln.split()[2]), ln.split()[3]) for ln in lines if ln[:6] == "EPOCH "
    }


def test_transactions_v2_with_the_java_4_producer(java4: JavaPrograms, bootstrap: str) -> None:
    lines, explain = run_txn_v2(java4, bootstrap)
    assert "FEATURE transaction.version 2" in lines, explain
    epochs = epochs_of(lines)
    first = epochs["init"][0]
    # every EndTxn bumps the epoch (v1 keeps it): commit, abort, commit with offsets
    # (the markers may still be on their way: Prepare* or Complete*)
    assert {step: epoch for step, (epoch, _state) in epochs.items()} == {
        "init": first,
        "commit": first + 1,
        "abort": first + 2,
        "offsets": first + 3,
    }, explain
    assert epochs["init"][1] == "Empty", explain
    assert epochs["commit"][1] in ("PrepareCommit", "CompleteCommit"), explain
    assert epochs["abort"][1] in ("PrepareAbort", "CompleteAbort"), explain
    assert epochs["offsets"][1] in ("PrepareCommit", "CompleteCommit"), explain
    check_outcome(lines, explain)


def test_java_4_producer_uses_transactions_v1_when_v2_is_not_finalized(
    java4: JavaPrograms, odradek_tv0: BrokerProcess
) -> None:
    lines, explain = run_txn_v2(java4, odradek_tv0.bootstrap)
    assert "FEATURE transaction.version none" in lines, explain
    epochs = epochs_of(lines)
    assert len(set(epoch for epoch, _state in epochs.values())) == 1, explain  # no bump
    check_outcome(lines, explain)


def test_librdkafka_transactions_v1_beside_v2(odradek_tv2: BrokerProcess) -> None:
    """confluent-kafka (librdkafka, transactions v1: AddPartitionsToTxn, EndTxn below v5) on the
    broker that finalized transaction.version 2: commit and abort, read_committed."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"tv1-{uuid.uuid4().hex[:8]}"
    boot = odradek_tv2.bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": boot, "transactional.id": topic})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{outcome}-{i}".encode())
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the aborted records reach the log before the abort
            producer.abort_transaction(30)
    consumer = Consumer(
        {"bootstrap.servers": boot, "group.id": topic, "isolation.level": "read_committed"}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)
    finally:
        consumer.close()
    assert seen == [f"commit-{i}".encode() for i in (0, 1, 2, 0, 1, 2)]
    assert high == 12  # 9 records and 3 markers: nothing beyond


def kafka_features(bootstrap: str, *commands: tuple[str, ...]) -> list[str]:
    """Kafka 4.4's `kafka-features` tool (FeatureCommand), each of `commands` in turn in one
    JVM (ToolBatch); what each printed."""
    batch = ToolBatch()
    for args in commands:
        batch.add("kafka-features", "--bootstrap-server", bootstrap, *args)
    outs = []
    for run in batch.run():
        assert run.rc == 0, run
        outs.append(run.out + run.err)
    return outs


def test_kafka_features_upgrade_and_downgrade_switch_the_producer(
    java4: JavaPrograms, tmp_path: Path
) -> None:
    """`kafka-features upgrade --feature transaction.version=2` on a running broker: the next
    producer uses transactions v2; `downgrade ... =0`: the next one is back on v1."""
    proc = odradek_process(tmp_path, 0).start()
    try:
        level = re.compile(r"Feature: transaction.version\s.*FinalizedVersionLevel: (\d+)")
        before, _, after = kafka_features(
            proc.bootstrap,
            ("describe",),
            ("upgrade", "--feature", "transaction.version=2"),
            ("describe",),
        )
        assert level.findall(before) == ["0"]
        assert level.findall(after) == ["2"]
        lines, explain = run_txn_v2(java4, proc.bootstrap)
        epochs = [epoch for epoch, _state in epochs_of(lines).values()]
        assert epochs == [epochs[0] + i for i in range(4)], explain
        check_outcome(lines, explain)

        _, after = kafka_features(
            proc.bootstrap, ("downgrade", "--feature", "transaction.version=0"), ("describe",)
        )
        assert level.findall(after) == ["0"]
        lines, explain = run_txn_v2(java4, proc.bootstrap)
        assert len({epoch for epoch, _state in epochs_of(lines).values()}) == 1, explain
        check_outcome(lines, explain)
    finally:
        proc.stop()
