"""The chaos runner: one seed = one cluster, one fault schedule, one history, one verdict.

    from odradek.testing.chaos import run_seed
    result = run_seed(7)
    assert result.valid, result.explain()

Phases: start a three-broker `Cluster` (RF 3, min.insync.replicas=2) with an idempotent topic
and a transactional topic; start the clients (`odradek.testing.chaos.clients`); apply the
seed's schedule (`odradek.testing.chaos.schedule`) as a nemesis; heal everything (restart dead
brokers, resume, reconnect, give the disk back) and let the clients run briefly on the healed
cluster; stop them; fence the transactional id so no transaction stays open; read both topics
to their end; check the history (`odradek.testing.chaos.checker`). Any failure reproduces by
running the same seed: `explain()` prints the seed and the schedule.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, Producer

from odradek.testing.chaos.checker import Report, check
from odradek.testing.chaos.clients import (
    Env,
    GroupConsumer,
    IdempotentProducer,
    Monitor,
    TransactionalProducer,
    Worker,
    client_config,
    final_read,
)
from odradek.testing.chaos.history import INFO, OK, History
from odradek.testing.chaos.schedule import BASE_KINDS, DISK_KIND, Fault, Schedule, generate
from odradek.testing.cluster import FAST_FAILOVER, Cluster

log = logging.getLogger(__name__)

IDEM_TOPIC = "chaos-idem"
TXN_TOPIC = "chaos-txn"
GROUP = "chaos-group"
PARTITIONS = 3
BROKERS = 3

CLUSTER_CONFIG: dict[str, Any] = {
    **FAST_FAILOVER,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.min.isr": 2,
    "group.min.session.timeout.ms": 1000,
}


@dataclass
class Options:
    duration: float = 3.0  # seconds of faults
    max_fault_s: float = 1.2
    max_sends: int = 400  # per idempotent producer
    max_txns: int = 60
    consumers: int = 2
    settle_s: float = 0.7  # clients run on the healed cluster before they stop
    kinds: tuple[str, ...] | None = None  # None: every kind this cluster supports


@dataclass
class Result:
    seed: int
    schedule: Schedule
    report: Report
    history: History
    elapsed: float
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.report.valid

    def explain(self) -> str:
        counts = self.history.counts()
        lines = [
            str(self.schedule),
            f"history: {len(self.history.ops)} entries, ok {counts[OK]}, fail {counts['fail']}, "
            f"info {counts[INFO]}; {self.elapsed:.1f}s "
            f"({', '.join(f'{k} {v:.1f}s' for k, v in self.phases.items())})",
            f"known client behaviour: {len(self.report.known)} item(s)",
            *(f"note: {n}" for n in self.notes),
            *(f"ANOMALY {a}" for a in self.report.anomalies),
            *(f"known: {a}" for a in self.report.known),
            f"reproduce: python -m bench.chaos --seed {self.seed}",
        ]
        return "\n".join(lines)


def supported_kinds() -> tuple[str, ...]:
    """Every fault kind: the in-process cluster offers them all (`fail_disk` for disk-full)."""
    return (*BASE_KINDS, DISK_KIND)


# -- the nemesis --------------------------------------------------------------------------------


class Nemesis:
    """Applies a schedule's faults to a cluster and undoes them; records each in the history."""

    def __init__(self, cluster: Cluster, history: History) -> None:
        self.cluster = cluster
        self.history = history
        self.paused: set[int] = set()
        self.disk_failed: set[int] = set()

    def apply(self, fault: Fault, begin: bool) -> None:
        """Begin `fault` (or, `begin` false, end it)."""
        phase = "begin" if begin else "end"
        inv = self.history.invoke("nemesis", "nemesis", {"fault": str(fault), "phase": phase})
        c, n = self.cluster, fault.node
        if fault.kind == "kill":
            if begin:
                c.kill(n)
            else:
                c.start_broker(n)
        elif fault.kind == "restart":
            if begin:
                c.restart(n, abrupt=True)
        elif fault.kind == "pause":
            self._pause(n, begin)
        elif fault.kind == "partition":
            c.cut_off_peers(n, begin)
        elif fault.kind == "clients":
            c.cut_off_clients(n, begin)
        elif fault.kind == DISK_KIND:
            self._fail_disk(n, begin)
        self.history.complete(inv, INFO)

    def _pause(self, node: int, pause: bool) -> None:
        def run(c: Any) -> None:
            broker = c.brokers[node]
            if broker is not None:
                broker.faults.pause() if pause else broker.faults.resume()

        self.cluster.call(run)
        (self.paused.add if pause else self.paused.discard)(node)

    def _fail_disk(self, node: int, fail: bool) -> None:
        self.cluster.fail_disk(node, "ENOSPC" if fail else None)
        (self.disk_failed.add if fail else self.disk_failed.discard)(node)

    def run(self, schedule: Schedule, stop: threading.Event) -> None:
        """Begin and end each fault on time (ends first when they coincide)."""
        timeline: list[tuple[float, int, Fault]] = []
        for fault in schedule.faults:
            timeline.append((fault.at, 1, fault))
            if fault.duration:
                timeline.append((fault.at + fault.duration, 0, fault))
        timeline.sort(key=lambda e: (e[0], e[1]))
        start = time.monotonic()
        for at, begin, fault in timeline:
            if stop.wait(max(0.0, start + at - time.monotonic())):
                return
            self.apply(fault, bool(begin))
        stop.wait(max(0.0, start + schedule.duration - time.monotonic()))

    def heal(self) -> None:
        """Undo everything still in effect: the cluster must end whole."""
        for n in sorted(self.paused):
            self._pause(n, False)
        for n in sorted(self.disk_failed):
            self._fail_disk(n, False)
        self.cluster.heal()
        for n in range(self.cluster.size):
            if n not in self.cluster.running():
                self.cluster.start_broker(n)


# -- one seed -----------------------------------------------------------------------------------


def _fence(bootstrap: str, transactional_id: str, deadline: float) -> str:
    """InitProducerId for the id: aborts whatever transaction a dead producer left open, so the
    last stable offset can reach the high watermark."""
    error = "no time left"
    while time.monotonic() < deadline:
        producer = Producer(client_config(bootstrap, {"transactional.id": transactional_id}))
        try:
            producer.init_transactions(5)
            return ""
        except KafkaException as exc:
            error = str(exc)
        finally:
            producer.flush(0)
    return f"could not fence {transactional_id}: {error}"


TOPICS = (IDEM_TOPIC, TXN_TOPIC, "__consumer_offsets", "__transaction_state")


def _partitions(cluster: Cluster) -> Iterator[tuple[str, int, Any]]:
    """(topic, partition, state) of each partition of `TOPICS` that exists: an internal topic
    is created only once used, and only while three brokers are alive."""
    for topic in TOPICS:
        for p in range(PARTITIONS):
            try:
                state = cluster.partition(topic, p)
            except KeyError:
                continue
            yield topic, p, state


def _describe(cluster: Cluster) -> str:
    """Partitions whose ISR is short: state, and each replica's log end and high watermark."""
    out = []
    for topic, p, st in _partitions(cluster):
        if len(st.isr) == len(st.replicas) == BROKERS:
            continue
        ends = {
            n: (cluster.log_end_offset(n, topic, p), cluster.high_watermark(n, topic, p))
            for n in st.replicas
        }
        out.append(
            f"{topic}-{p} leader {st.leader} epoch {st.leader_epoch} isr {st.isr} "
            f"(log end, hw) by broker {ends}"
        )
    return "; ".join(out)


def _record_replicas(cluster: Cluster, history: History) -> None:
    """Each partition's replica count, for the checker: every topic here is created with (or,
    for the internal ones, configured for) replication factor 3 (Kafka refuses to create an
    internal topic while fewer brokers are alive than its replication factor)."""
    inv = history.invoke("replicas", "observer", {"expected": BROKERS, "replicas": {}})
    replicas = {(topic, p): len(st.replicas) for topic, p, st in _partitions(cluster)}
    history.complete(inv, OK, {"replicas": replicas})


def _record_producer_batches(cluster: Cluster, history: History) -> None:
    """The producer id, epoch and sequence of every batch of the idempotent topic, from each
    partition's leader, so that the checker can tell which producer epoch wrote a duplicate."""
    batches: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for topic, p, state in _partitions(cluster):
        if topic == IDEM_TOPIC and state.leader >= 0:
            batches[p] = cluster.producer_batches(state.leader, topic, p)
    inv = history.invoke("batches", "observer", {"topic": IDEM_TOPIC})
    history.complete(inv, OK, {"batches": batches})


def _settled(cluster: Cluster, timeout: float) -> str:
    try:
        for topic, p, _state in _partitions(cluster):
            cluster.wait_for_leader(topic, p, timeout=timeout)
            replicas = set(cluster.partition(topic, p).replicas)
            cluster.wait_for_isr(topic, p, members=replicas, timeout=timeout)
    except TimeoutError as exc:
        return f"cluster did not heal: {exc}; {_describe(cluster)}"
    return ""


class _Clock:
    """Phase durations of one seed, for `Result.explain()`."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.phases: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = now - self.last
        self.last = now


def _clients(
    history: History, bootstrap: str, seed: int, opts: Options, tid: str
) -> tuple[list[Worker], list[Worker]]:
    """(producers, readers), not started; producers' bounded operations are spread over the
    fault phase and the settle time."""
    span = opts.duration + opts.settle_s
    env = Env(history, bootstrap, seed)
    idem = IdempotentProducer("idem", env, IDEM_TOPIC, PARTITIONS, opts.max_sends)
    idem.pace_s = span / max(1, opts.max_sends)
    txn = TransactionalProducer("tx", env, TXN_TOPIC, PARTITIONS, opts.max_txns, tid)
    txn.pace_s = span / max(1, opts.max_txns)
    readers: list[Worker] = [
        GroupConsumer(f"member{i}", env, [IDEM_TOPIC, TXN_TOPIC], GROUP)
        for i in range(opts.consumers)
    ]
    tps = [(t, p) for t in (IDEM_TOPIC, TXN_TOPIC) for p in range(PARTITIONS)]
    readers.append(Monitor("monitor", env, tps, GROUP))
    return [idem, txn], readers


def _stop(workers: list[Worker], seed: int, notes: list[str]) -> None:
    for w in workers:
        w.stop.set()
    for w in workers:
        w.join(30)
        if w.is_alive():
            notes.append(f"client {w.process} did not stop in 30s")
        if w.crash is not None:
            raise RuntimeError(f"seed {seed}: client {w.process} crashed") from w.crash


def _run(
    cluster: Cluster, seed: int, opts: Options, history: History, clock: _Clock, notes: list[str]
) -> Schedule:
    kinds = opts.kinds or supported_kinds()
    schedule = generate(seed, opts.duration, BROKERS, kinds, opts.max_fault_s)
    log.info("chaos %s", schedule)
    bootstrap = cluster.bootstrap
    tid = f"chaos-tx-{seed}"
    producers, readers = _clients(history, bootstrap, seed, opts, tid)
    for w in producers + readers:
        w.start()
    nemesis = Nemesis(cluster, history)
    wait = threading.Event()  # never set: waits are bounded pacing, not synchronisation
    try:
        nemesis.run(schedule, wait)
    finally:
        nemesis.heal()
    clock.mark("faults")
    healed = _settled(cluster, 15.0)
    if healed:
        notes.append(healed)
    _record_replicas(cluster, history)
    clock.mark("heal")
    wait.wait(opts.settle_s)
    _stop(producers, seed, notes)
    fence = _fence(bootstrap, tid, time.monotonic() + 20)
    if fence:
        notes.append(fence)
    _stop(readers, seed, notes)
    clock.mark("stop clients")
    final_read(history, bootstrap, IDEM_TOPIC, PARTITIONS, "read_uncommitted")
    final_read(history, bootstrap, TXN_TOPIC, PARTITIONS, "read_committed")
    _record_producer_batches(cluster, history)
    clock.mark("read")
    return schedule


def run_seed(seed: int, options: Options | None = None, data_dir: str | None = None) -> Result:
    """Run one seed and check it. Raises only on a harness failure (a client thread crashed)."""
    opts = options or Options()
    began = time.monotonic()
    history = History()
    notes: list[str] = []
    clock = _Clock()
    with tempfile.TemporaryDirectory(prefix=f"odradek-chaos-{seed}-", dir=data_dir) as tmp:
        cluster = Cluster(
            BROKERS,
            {IDEM_TOPIC: (PARTITIONS, BROKERS), TXN_TOPIC: (PARTITIONS, BROKERS)},
            CLUSTER_CONFIG,
            data_dir=tmp,
        )
        cluster.start()
        clock.mark("start")
        try:
            schedule = _run(cluster, seed, opts, history, clock, notes)
        finally:
            cluster.stop()
            clock.mark("stop cluster")
    report = check(history, IDEM_TOPIC, TXN_TOPIC)
    clock.mark("check")
    elapsed = time.monotonic() - began
    return Result(seed, schedule, report, history, elapsed, notes, clock.phases)
