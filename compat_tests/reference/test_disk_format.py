"""One on-disk format: Kafka 4.4 serves a log directory odradek wrote, and odradek one Kafka
wrote, after the one-command metadata conversion (log_dir_convert.py).

A real client writes the same workload to the source broker (keyed records with headers and
CreateTime timestamps over two partitions and two codecs, a committed and an aborted
transaction, a group's committed offsets), reads everything back (read_committed and
read_uncommitted) and the group's offsets; the source stops (cleanly or by SIGKILL), its
directory is converted, the other broker starts on it, and the same reads must give the same
records at the same offsets, the same timestamps and headers, the same transactional
visibility and the same committed offsets.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin
import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import ODRADEK_OVERRIDES
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.kafka_tools import ToolBatch
from compat_tests.reference.log_dir_convert import kafka_to_odradek, odradek_to_kafka

TOPIC, TXN_TOPIC, GROUP = "moved", "moved-txn", "moved-group"
# recent enough that producer state does not expire (producer.id.expiration.ms counts from
# the records' own timestamps), fixed for the whole run
BASE_TS = (int(time.time()) - 3600) * 1000
WAIT_S = 60.0
_NO_LEADER_YET = {
    ck.KafkaError.NOT_LEADER_FOR_PARTITION,
    ck.KafkaError.LEADER_NOT_AVAILABLE,
    ck.KafkaError._UNKNOWN_PARTITION,
}


def _admin_create(bootstrap: str) -> None:
    admin = ck.admin.AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [ck.admin.NewTopic(TOPIC, 2, 1), ck.admin.NewTopic(TXN_TOPIC, 1, 1)]
    )
    for f in futures.values():
        f.result(30)


def write_workload(bootstrap: str) -> None:
    _admin_create(bootstrap)
    for codec in ("none", "gzip"):
        p = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 5,
                "enable.idempotence": True,
            }
        )
        for i in range(20):
            p.produce(
                TOPIC,
                key=f"{codec}-k{i}".encode(),
                value=f"{codec}-v{i}".encode() * (i + 1),
                partition=i % 2,
                timestamp=BASE_TS + i * 1000,
                headers=[("h", f"{codec}{i}".encode()), ("n", None)],
            )
        assert p.flush(WAIT_S) == 0
    tp = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "moved-txn"})
    tp.init_transactions(WAIT_S)
    for commit, n in ((True, 3), (False, 2), (True, 1)):
        tp.begin_transaction()
        for i in range(n):
            tp.produce(TXN_TOPIC, key=b"t", value=f"{commit}-{i}".encode(), timestamp=BASE_TS + i)
        tp.flush(WAIT_S)
        if commit:
            tp.commit_transaction(WAIT_S)
        else:
            tp.abort_transaction(WAIT_S)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    c.commit(
        offsets=[
            ck.TopicPartition(TOPIC, 0, 7),
            ck.TopicPartition(TOPIC, 1, 11),
            ck.TopicPartition(TXN_TOPIC, 0, 4),
        ],
        asynchronous=False,
    )
    c.close()


def _end_offset(consumer: ck.Consumer, tp: ck.TopicPartition) -> int:
    """The partition's end offset, once it has a leader again (a restarted Kafka re-elects
    its leaders from the eligible replicas a moment after it registers)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=10)[1])
        except ck.KafkaException as exc:
            if exc.args[0].code() not in _NO_LEADER_YET or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_everything(bootstrap: str) -> dict[str, Any]:
    """Every record each isolation level sees, and the group's committed offsets."""
    seen: dict[str, Any] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        parts = [
            ck.TopicPartition(TOPIC, 0, 0),
            ck.TopicPartition(TOPIC, 1, 0),
            ck.TopicPartition(TXN_TOPIC, 0, 0),
        ]
        ends = {}
        for tp in parts:
            ends[(tp.topic, tp.partition)] = _end_offset(c, tp)
        c.assign(parts)
        got: list[tuple[Any, ...]] = []
        done: set[tuple[str, int]] = set()
        deadline = time.monotonic() + WAIT_S
        while len(done) < len(parts):
            assert time.monotonic() < deadline, (isolation, ends, got[-3:])
            # short: a partition ending in a transaction marker is only seen done by its
            # position, once a poll comes back empty
            msg = c.poll(0.1)
            if msg is None:
                pos = c.position(parts)
                done |= {
                    (p.topic, p.partition) for p in pos if p.offset >= ends[(p.topic, p.partition)]
                }
                continue
            assert msg.error() is None, msg.error()
            got.append(
                (
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.timestamp(),
                    msg.headers(),
                )
            )
            if msg.offset() + 1 >= ends[(msg.topic(), msg.partition())]:
                done.add((msg.topic(), msg.partition()))
        c.close()
        seen[isolation] = sorted(got)
        seen[f"{isolation} ends"] = ends
    admin = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    committed = admin.committed(
        [ck.TopicPartition(TOPIC, 0), ck.TopicPartition(TOPIC, 1), ck.TopicPartition(TXN_TOPIC, 0)],
        timeout=30,
    )
    admin.close()
    seen["committed"] = [(t.topic, t.partition, t.offset) for t in committed]
    return seen


def _check_expected(seen: dict[str, Any]) -> None:
    committed = [r for r in seen["read_committed"] if r[0] == TXN_TOPIC]
    assert [r[4] for r in committed] == [b"True-0", b"True-1", b"True-2", b"True-0"]
    assert len([r for r in seen["read_uncommitted"] if r[0] == TXN_TOPIC]) == 6
    assert len([r for r in seen["read_committed"] if r[0] == TOPIC]) == 40
    assert seen["committed"] == [(TOPIC, 0, 7), (TOPIC, 1, 11), (TXN_TOPIC, 0, 4)]


def _check_snapshots_read_by_kafka(data: Path) -> None:
    """Kafka's DumpLogSegments reads odradek's producer snapshots of partition 0: the two
    idempotent producers wrote sequences 0..9 there each, in epoch 0, no transaction open (the
    newest snapshot holds one or both of them, depending on when it was written)."""
    snapshots = sorted(data.glob(f"{TOPIC}-0/*.snapshot"))
    assert snapshots
    batch = ToolBatch()
    batch.add("kafka-dump-log", "--files", str(snapshots[-1]))
    (run,) = batch.run()
    entries = re.findall(
        r"producerId: (\d+) producerEpoch: (-?\d+) .*?currentTxnFirstOffset: (\S+) "
        r".*?lastSequence: (-?\d+) lastOffset: (-?\d+)",
        run.out,
    )
    assert run.rc == 0 and entries, run
    assert {(e[1], e[2], e[3]) for e in entries} == {("0", "OptionalLong.empty", "9")}, run


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_kafka_serves_what_odradek_wrote(stop: str, tmp_path: Path) -> None:
    odradek = BrokerProcess(tmp_path / "odradek", overrides=ODRADEK_OVERRIDES)
    odradek.start()
    try:
        write_workload(odradek.bootstrap)
        before = read_everything(odradek.bootstrap)
    finally:
        odradek.stop() if stop == "clean" else odradek.kill()
    _check_expected(before)
    if stop == "clean":  # written at a clean shutdown (and at segment rolls)
        _check_snapshots_read_by_kafka(Path(odradek.data_dir))
    kafka = odradek_to_kafka(odradek.data_dir, tmp_path / "kafka")
    kafka.start()
    try:
        after = read_everything(kafka.bootstrap)
    finally:
        logs = kafka.log_tail(4000)
        kafka.stop()
    assert after == before, logs


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_odradek_serves_what_kafka_wrote(stop: str, tmp_path: Path) -> None:
    kafka = KafkaReference(
        "4.4",
        tmp_path / "kafka",
        nodes=1,
        overrides={
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.num.partitions": "3",
        },
    )
    kafka.start()
    try:
        write_workload(kafka.bootstrap)
        before = read_everything(kafka.bootstrap)
    finally:
        kafka.stop() if stop == "clean" else kafka.kill()
    _check_expected(before)
    data = tmp_path / "odradek" / "data"
    kafka_to_odradek(kafka.nodes[0].data_dir, data)
    odradek = BrokerProcess(tmp_path / "odradek", overrides=ODRADEK_OVERRIDES)
    odradek.start()
    try:
        after = read_everything(odradek.bootstrap)
    finally:
        odradek.stop()
    assert after == before
    if stop == "clean":  # Kafka writes producer snapshots at its clean shutdown
        assert list(data.glob(f"{TOPIC}-0/*.snapshot"))
    assert "bad producer snapshot" not in odradek.log_path.read_text()
