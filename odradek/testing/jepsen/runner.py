"""One run of the queue workload against any Kafka deployment: start the processes, let a
nemesis (a callable given the seed) break things, heal, stop, fence the transactional ids,
read every key to its end and check.

    from odradek.testing.jepsen.runner import Workload, run_workload
    result = run_workload("host:9092", Workload(seed=7), nemesis=None)
    assert result.report.valid, result.explain()

`hosts.run_seed` runs it over brokers in network namespaces with real network faults;
`bench.jepsen` soaks many seeds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer

from odradek.testing.jepsen.checker import KAFKA_GUARANTEES, Report, check
from odradek.testing.jepsen.history import INFO, OK, History
from odradek.testing.jepsen.javaclient import JavaClients
from odradek.testing.jepsen.workload import (
    Env,
    Process,
    final_read,
    java_processes,
    processes,
    record_batches,
)


@dataclass
class Workload:
    seed: int = 0
    topic: str = "jepsen-queue"
    keys: int = 4
    plain: int = 2  # idempotent send / poll processes
    txn: int = 2  # transactional processes
    max_ops: int = 200  # per process
    duration: float = 4.0  # seconds the nemesis runs
    settle_s: float = 1.0  # seconds on the healed cluster before the clients stop
    guarantees: frozenset[str] = KAFKA_GUARANTEES
    client: dict[str, object] = field(default_factory=dict)  # extra librdkafka settings
    # the share of plain and of transactional processes using Apache Kafka's Java client
    # (kafka-clients 4.4, one JVM per run; which ones, the seed draws): 0 = librdkafka only
    java: float = 0.0
    java_client: dict[str, str] = field(default_factory=dict)  # extra Java client properties


@dataclass
class Result:
    seed: int
    report: Report
    history: History
    elapsed: float
    faults: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    command: str = "python -m bench.jepsen"  # how to run the seed again

    @property
    def valid(self) -> bool:
        return self.report.valid

    def explain(self) -> str:
        counts = self.history.counts()
        return "\n".join(
            [
                f"seed {self.seed}: {len(self.history.ops)} history entries, ok {counts[OK]}, "
                f"fail {counts['fail']}, info {counts[INFO]}; {self.elapsed:.1f}s",
                *(f"fault: {f}" for f in self.faults),
                *(f"note: {n}" for n in self.notes),
                *(f"ANOMALY {a}" for a in self.report.anomalies),
                *(f"observed (not promised by Kafka): {a}" for a in self.report.observed[:10]),
                f"reproduce: {self.command} --seed {self.seed}",
            ]
        )


READY_S = 60.0  # for every process's clients to be made before the faults begin
Nemesis = Callable[[History, threading.Event], list[str]]  # runs the faults, heals; names them


def _fence(env: Env, ids: list[str], deadline: float) -> list[str]:
    """InitProducerId for each transactional id: aborts what a dead producer left open, so the
    last stable offset reaches the high watermark for the final read."""
    notes = []
    for tid in ids:
        error = "no time left"
        while time.monotonic() < deadline:
            p = Producer(env.config({"transactional.id": tid}))
            try:
                p.init_transactions(5)
                error = ""
                break
            except KafkaException as exc:
                error = str(exc)
            finally:
                p.flush(0)
        if error:
            notes.append(f"could not fence {tid}: {error}")
    return notes


def _stop(procs: list[Process], notes: list[str]) -> None:
    for p in procs:
        p.stop.set()
    for p in procs:
        p.join(30)
        if p.is_alive():
            notes.append(f"client {p.process} did not stop in 30s")
        if p.crash is not None:
            raise RuntimeError(f"client {p.process} crashed") from p.crash


def run_workload(bootstrap: str, w: Workload, nemesis: Nemesis | None = None) -> Result:
    """Run the workload against `bootstrap` (the topic must exist with `w.keys` partitions)."""
    began = time.monotonic()
    history = History()
    env = Env(
        history,
        bootstrap,
        w.topic,
        w.keys,
        w.seed,
        tuple(w.client.items()),
        tuple(w.java_client.items()),
    )
    java = java_processes(w.seed, w.plain, w.txn, w.java)
    # from this thread: the JVM runs in its network namespace (the clients' host)
    jvm = JavaClients(history) if java else None
    notes: list[str] = []
    stop = threading.Event()
    faults: list[str] = []
    procs = processes(env, w.plain, w.txn, w.max_ops, java, jvm)
    try:
        for p in procs:
            p.pace_s = (w.duration + w.settle_s) / max(1, w.max_ops)
            p.start()
        deadline = time.monotonic() + READY_S
        for p in procs:  # the faults begin once every client is made
            if not p.ready.wait(max(0.0, deadline - time.monotonic())):
                notes.append(f"client {p.process} not ready in {READY_S:.0f}s")
        if java:
            notes.append("java client: " + " ".join(sorted(java)))
        if nemesis is not None:
            faults = nemesis(history, stop)
        else:
            stop.wait(w.duration)
        stop.wait(w.settle_s)
    finally:
        try:
            _stop([p for p in procs if p.process != "monitor"], notes)
        finally:
            if jvm is not None:
                jvm.close()
        notes += _fence(env, [f"jepsen-{w.seed}-t{i}" for i in range(w.txn)], time.monotonic() + 30)
        _stop([p for p in procs if p.process == "monitor"], notes)
    why = final_read(env)
    if why:
        notes.append(why)
    why = record_batches(env)
    if why:
        notes.append(why)
    report = check(history, w.guarantees)
    if "lost-write" in report.all_kinds():
        # what the log holds at each offset, aborted writes too: tells a client's reused
        # sequence number (a send acknowledged as a retry of its own earlier batch) from a
        # lost write
        why = final_read(env, isolation="read_uncommitted")
        if why:
            notes.append("read_uncommitted: " + why)
        report = check(history, w.guarantees)
    return Result(w.seed, report, history, time.monotonic() - began, faults, notes)
