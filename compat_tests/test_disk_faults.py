"""A full or failing disk (issue 11), seen by real clients.

As Kafka (LogDirFailureChannel, ReplicaManager.handleLogDirFailure): an I/O error while writing a
log takes its log dir offline; producers and fetchers of its partitions get KAFKA_STORAGE_ERROR
(56); a failed write never leaves a torn batch behind; after space returns and a restart every
acknowledged record is read back, and recovery finds nothing to cut. In a cluster a broker whose
every log dir failed halts, and leadership moves to the other replicas.

Faults come from the fault hook (`fail_disk("ENOSPC")`, EIO on write or on fsync) and, for a
real full disk, from a 4 MiB tmpfs mounted under the broker process's data dir (needs root and
mount; skipped otherwise).
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, TopicPartition

from compat_tests.harness import BrokerProcess
from compat_tests.test_bad_input import fetch, produce
from odradek.testing import Broker, Cluster
from odradek.testing.cluster import FAST_FAILOVER
from odradek.testing.raw import RawClient
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

TOPIC = "disk"
DEADLINE_S = 30.0


def a_batch(value: bytes = b"x") -> bytes:
    return build_batch([(b"k", value, [], int(time.time() * 1000))])


def produce_acked(bootstrap: str, values: list[bytes], **conf: object) -> list[bytes]:
    """Produce `values`; returns those acknowledged (in order), failing on none."""
    acked: list[bytes] = []
    errors: list[KafkaError] = []

    def done(err: KafkaError | None, msg) -> None:
        if err is None:
            acked.append(msg.value())
        else:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **conf})
    for v in values:
        p.produce(TOPIC, v, partition=0, on_delivery=done)
        p.poll(0)
    assert p.flush(DEADLINE_S) == 0
    return acked


def produce_until_error(bootstrap: str, make_value, limit: int) -> tuple[list[bytes], KafkaError]:
    """One message at a time without retries until a delivery fails; (acked, the error)."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "retries": 0,
            "enable.idempotence": False,
            "linger.ms": 0,
            "message.timeout.ms": 10_000,
        }
    )
    acked: list[bytes] = []
    outcome: list[KafkaError | None] = []
    for i in range(limit):
        outcome.clear()
        value = make_value(i)
        p.produce(TOPIC, value, partition=0, on_delivery=lambda err, _m: outcome.append(err))
        assert p.flush(DEADLINE_S) == 0
        if outcome[0] is not None:
            return acked, outcome[0]
        acked.append(value)
    raise AssertionError(f"{limit} messages were all acknowledged: the disk never filled")


def read_values(bootstrap: str, topic: str = TOPIC) -> list[bytes]:
    """Every record of partition 0, from the beginning to the end offset."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        end = consumer.position(tp)
        consumer.seek_to_beginning(tp)
        out: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out += [r.value for r in records]
        return out
    finally:
        consumer.close()


def no_truncation(caplog: pytest.LogCaptureFixture) -> None:
    cut = [r.getMessage() for r in caplog.records if "truncat" in r.getMessage()]
    assert not cut, cut


# -- the fault hook on an in-process broker ------------------------------------------------------


@pytest.mark.parametrize("error", ["ENOSPC", "EIO"])
def test_write_failure_gives_storage_error_and_keeps_every_acked_record(error, caplog):
    caplog.set_level(logging.INFO)
    with Broker(topics={TOPIC: 1}) as broker:
        acked = produce_acked(broker.bootstrap, [b"before-%d" % i for i in range(50)])
        broker.fail_disk(error)
        with RawClient(broker.bootstrap) as raw:
            assert produce(raw, TOPIC, 0, a_batch()).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            # the dir is offline now: reads fail too, as on Kafka
            assert fetch(raw, TOPIC, 0, 0)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        _, err = produce_until_error(broker.bootstrap, lambda i: b"during-%d" % i, 1)
        assert err.code() == KafkaError.KAFKA_STORAGE_ERROR
        assert [r for r in caplog.records if "log dir is now offline" in r.getMessage()]

        caplog.clear()
        broker.fail_disk(None)  # space returns; the broker restarts, recovering its log
        no_truncation(caplog)
        assert read_values(broker.bootstrap) == acked
        acked += produce_acked(broker.bootstrap, [b"after"])
        assert read_values(broker.bootstrap) == acked


def test_eio_on_fsync_gives_storage_error_and_keeps_every_acked_record(caplog):
    caplog.set_level(logging.INFO)
    with Broker(topics={TOPIC: 1}, config={"log.flush.interval.messages": 1}) as broker:
        acked = produce_acked(broker.bootstrap, [b"synced-%d" % i for i in range(20)])
        broker.fail_disk("EIO", ops=("fsync",))
        with RawClient(broker.bootstrap) as raw:
            assert produce(raw, TOPIC, 0, a_batch()).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(raw, TOPIC, 0, a_batch()).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        caplog.clear()
        broker.fail_disk(None)
        no_truncation(caplog)
        got = read_values(broker.bootstrap)
        # the write whose fsync failed went to the file whole (as in Kafka): it may be there
        assert got[: len(acked)] == acked and len(got) in (len(acked), len(acked) + 1)


def test_clearing_a_fault_nothing_hit_needs_no_restart():
    with Broker(topics={TOPIC: 1}) as broker:
        port = broker.port
        broker.fail_disk("ENOSPC")
        broker.fail_disk(None)
        assert broker.port == port
        assert produce_acked(broker.bootstrap, [b"fine"]) == [b"fine"]


# -- a real full disk ----------------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path):
    """A 4 MiB tmpfs at tmp_path/data (the broker's data dir), unmounted afterwards."""
    data = tmp_path / "data"
    data.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(data)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield data
    finally:
        subprocess.run(["umount", "-l", str(data)], check=False)


def test_a_really_full_disk_gives_storage_error_and_loses_no_acked_record(tmp_path, small_fs):
    # one index entry per segment: index pages are sparse mmaps, and touching a new page on a
    # full tmpfs is SIGBUS (Kafka's preallocated indexes share this)
    proc = BrokerProcess(
        tmp_path,
        overrides={"log.index.interval.bytes": str(1 << 30), "auto.create.topics.enable": "true"},
    )
    proc.start()
    try:
        with RawClient(proc.bootstrap) as raw:
            from compat_tests.test_bad_input import create_topic

            assert create_topic(raw, TOPIC) == 0
        filler = os.urandom(20_000)
        acked, err = produce_until_error(proc.bootstrap, lambda i: b"%06d" % i + filler, 400)
        assert err.code() == KafkaError.KAFKA_STORAGE_ERROR, err
        assert len(acked) > 50
        with RawClient(proc.bootstrap) as raw:  # offline until restarted, even for tiny writes
            assert produce(raw, TOPIC, 0, a_batch()).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert proc.stop() == 0
        assert "log dir is now offline" in proc.log_text()

        # space returns: grow the filesystem, start again
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_fs)], check=True)
        since = proc.log_size()
        proc.start()
        assert "truncat" not in proc.log_text(since)
        got = read_values(proc.bootstrap)
        assert [v[:6] for v in got] == [v[:6] for v in acked] and got == acked
        more = produce_acked(proc.bootstrap, [b"after"])
        assert more == [b"after"]
    finally:
        proc.stop()


# -- a cluster: the broker whose disk failed halts, leadership moves ------------------------------


@pytest.mark.cluster
def test_cluster_leader_with_a_full_disk_halts_and_leadership_moves():
    with Cluster(brokers=3, topics={TOPIC: (1, 3)}, config=FAST_FAILOVER) as cluster:
        idempotent = {"enable.idempotence": True, "message.timeout.ms": 20_000}
        acked = produce_acked(cluster.bootstrap, [b"a%d" % i for i in range(30)], **idempotent)
        cluster.wait_for_isr(TOPIC, 0, size=3)
        old = cluster.leader(TOPIC)
        cluster.brokers[old].fail_disk("ENOSPC")
        # the next write on the old leader fails, it halts, another ISR member leads
        acked += produce_acked(cluster.bootstrap, [b"b%d" % i for i in range(30)], **idempotent)
        new = cluster.wait_for_leader(TOPIC, 0, not_on=old)
        assert new != old
        cluster.fail_disk(old, None)  # space returns: the halted broker starts again
        cluster.wait_for_isr(TOPIC, 0, size=3, timeout=30)
        cluster.wait_for_replication(TOPIC, 0)
        assert read_values(cluster.bootstrap) == acked


def test_a_transaction_marker_on_a_failed_disk_is_an_error_code_not_an_exception():
    from odradek.broker.transactions.markers import append_marker

    with Broker(topics={TOPIC: 1}) as broker:
        broker.fail_disk("EIO")

        def write_marker(server) -> int:
            return append_marker(server.topics.get(TOPIC, 0), 1000, 0, 0, True)

        assert broker.call(write_marker) == ErrorCode.KAFKA_STORAGE_ERROR  # the failing write
        assert broker.call(write_marker) == ErrorCode.KAFKA_STORAGE_ERROR  # offline since
