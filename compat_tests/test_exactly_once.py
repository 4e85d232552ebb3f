"""Exactly-once end to end: a consume-transform-produce process killed with SIGKILL again and
again still copies every input record exactly once; a broker killed with SIGKILL in the middle
of transactions loses no committed record and shows no aborted one after it restarts."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from compat_tests.harness import create_topics, wait_for

REPO = Path(__file__).resolve().parents[1]
TXN_BROKER = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
END = b"__end__"


def produce_plain(
    bootstrap: str, topic: str, values: list[bytes], partitions: int = 3, key: bytes | None = None
) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, key=key, value=v, partition=i % partitions)
    assert p.flush(30) == 0


def read_topic(
    bootstrap: str, topic: str, isolation: str, partitions: int = 3, timeout: float = 30.0
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) up to an END record on every partition (written last)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-reader",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    out = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"only partitions {ended} of {topic} ended"
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            if m.key() == END:
                ended.add(m.partition())
            else:
                out.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return out


# -- the consume-transform-produce loop killed again and again ---------------------------------


class Worker:
    """compat_tests/eos_copy_worker.py in a child process, its events read by a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compat_tests.eos_copy_worker", *args],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(
            target=lambda: self.stderr.extend(self.proc.stderr or []), daemon=True
        ).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                pass
        self.events.put({"e": "exit"})

    def next_event(self, deadline: float) -> dict[str, Any]:
        remaining = deadline - time.monotonic()
        try:
            event = self.events.get(timeout=max(remaining, 0.01))
        except queue.Empty:
            raise AssertionError(
                "worker went quiet; stderr:\n" + "".join(self.stderr[-30:])
            ) from None
        if event["e"] == "exit":
            raise AssertionError("worker exited; stderr:\n" + "".join(self.stderr[-30:]))
        return event

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def test_copy_loop_killed_repeatedly_copies_each_record_once(broker, topic_name: str) -> None:
    src, dst, group = topic_name, topic_name + "-out", topic_name + "-g"
    create_topics(broker.bootstrap, src, dst)
    args = [
        "--bootstrap",
        broker.bootstrap,
        "--input",
        src,
        "--output",
        dst,
        "--group",
        group,
        "--transactional-id",
        topic_name + "-copier",
        "--batch",
        "7",
    ]
    chunk, incarnations = 150, 5
    inputs: list[bytes] = []
    kills = {"mid-transaction": 0, "after-commit": 0}
    for inc in range(incarnations + 1):
        if inc < incarnations:
            new = [b"r%d-%d" % (inc, i) for i in range(chunk)]
            produce_plain(broker.bootstrap, src, new)
            inputs += new
        # even incarnations die inside an open transaction whose records are in the log; odd
        # ones right after a commit (wherever the kill lands); the last one finishes the copy
        hold = ["--hold-after", str(1 + inc % 3)] if inc < incarnations and inc % 2 == 0 else []
        worker = Worker(*args, *hold)
        try:
            deadline = time.monotonic() + 60
            committed = 0
            while True:
                event = worker.next_event(deadline)
                if event["e"] == "idle" and event["position"] == len(inputs):
                    break  # caught up before the planned kill
                if event["e"] == "holding":
                    kills["mid-transaction"] += 1
                    break
                if event["e"] == "committed":
                    committed += 1
                    if inc < incarnations and inc % 2 == 1 and committed >= 2:
                        kills["after-commit"] += 1
                        break
        finally:
            worker.kill()
    assert kills == {"mid-transaction": 3, "after-commit": 2}

    produce_plain(broker.bootstrap, dst, [b"-"] * 3, key=END)
    copied = read_topic(broker.bootstrap, dst, "read_committed")
    counts = Counter(v for _p, _o, v in copied)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"copied more than once: {sorted(duplicates)[:10]}"
    assert set(counts) == {b"copy:" + v for v in inputs}
    # each output partition holds its input partition's records in the input order
    for p in range(3):
        assert [v for q, _o, v in copied if q == p] == [
            b"copy:" + v for i, v in enumerate(inputs) if i % 3 == p
        ]
    everything = read_topic(broker.bootstrap, dst, "read_uncommitted")
    assert len(everything) >= len(inputs)  # aborted attempts are there, just never read


# -- the broker killed in the middle of transactions -------------------------------------------


def test_broker_kill_mid_transactions_keeps_committed_and_hides_aborted(
    fresh_broker, topic_name: str
) -> None:
    broker = fresh_broker(TXN_BROKER)
    create_topics(broker.bootstrap, topic_name)

    def txn_producer(tid: str, timeout_ms: int = 60000) -> Producer:
        p = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "transactional.id": tid,
                "transaction.timeout.ms": timeout_ms,
                "retry.backoff.ms": 20,
            }
        )
        p.init_transactions(30)
        return p

    def send(p: Producer, prefix: str, n: int = 9) -> list[bytes]:
        values = [f"{prefix}-{i}".encode() for i in range(n)]
        for i, v in enumerate(values):
            p.produce(topic_name, value=v, partition=i % 3)
        assert p.flush(30) == 0
        return values

    finisher = txn_producer(topic_name + "-finisher")
    orphan = txn_producer(topic_name + "-orphan", timeout_ms=3000)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for rnd in range(3):
        finisher.begin_transaction()
        committed += send(finisher, f"c{rnd}")
        finisher.commit_transaction(30)
        finisher.begin_transaction()
        aborted += send(finisher, f"x{rnd}")
        finisher.abort_transaction(30)
    finisher.begin_transaction()
    open_values = send(finisher, "open")  # Ongoing when the broker dies; finished after
    orphan.begin_transaction()
    orphan_values = send(orphan, "orphan")  # Ongoing, its producer never returns: timed out

    broker.kill()
    broker.start()

    # committed data is all there; read_committed stops at the open transactions: per
    # partition 6 transactions of 3 records and their 6 markers come before them
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    probe = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    try:
        tps = [KTP(topic_name, p) for p in range(3)]
        assert probe.end_offsets(tps) == dict.fromkeys(tps, 6 * 3 + 6)
    finally:
        probe.close()

    finisher.commit_transaction(60)  # the restarted coordinator completes it
    wait_for(
        lambda: _orphan_aborted(broker.bootstrap, topic_name + "-orphan"),
        timeout=30,
        message="the orphaned transaction was not aborted after its timeout",
    )
    produce_plain(broker.bootstrap, topic_name, [b"-"] * 3, key=END)
    seen = [v for _p, _o, v in read_topic(broker.bootstrap, topic_name, "read_committed")]
    assert sorted(seen) == sorted(committed + open_values)
    assert len(seen) == len(set(seen))
    everything = [v for _p, _o, v in read_topic(broker.bootstrap, topic_name, "read_uncommitted")]
    assert sorted(everything) == sorted(committed + aborted + open_values + orphan_values)
    del orphan


def _orphan_aborted(bootstrap: str, tid: str) -> bool:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        state = admin.describe_transactions([tid])[tid].state
    finally:
        admin.close()
    return getattr(state, "value", state) == "CompleteAbort"
