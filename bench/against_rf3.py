"""RF=3 acks=all on three processes, odradek against Kafka: `python -m bench --against kafka --rf3`.

Each broker runs as three processes on this machine: three `odradek serve` sharing one
ZooKeeper (the settings of compat_tests.zk_harness), and three Kafka 4.4 KRaft combined nodes
of one quorum (bench.kafka_proc: its default server.properties, -Xmx1G -Xms1G, G1). One cluster
runs at a time, so the idle one takes no share of the two cores. On each, the native driver
produces 1 KiB values with acks=all into a one-partition topic of replication factor 1 and
then into one of replication factor 3 (a new topic each, the order alternating by round); the
table gives the medians, the RF=3 / RF=1 ratio of each broker, and the broker CPU seconds per
GB summed over the three processes (utime + stime of each from /proc/PID/stat). A second table
splits the RF=3 runs by process: the partition leader's CPU s/GB and each follower's, and the
followers' Fetch round trips per MB and mean response size (bench.peer_traffic: the kernel's
counters of each follower's connection to the leader).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import falloff, kafka_proc, native, peer_traffic, procstat
from bench.broker_proc import HOST, OdradekProcess
from bench.topics import Topics, topic_name
from bench.workloads import ClientSettings
from compat_tests.reference.kafka_ref import new_cluster_id
from odradek.testing.zookeeper import ZooKeeperServer

ODRADEK = "odradek"
KAFKA = "Kafka"
NODES = 3
SIZE = 1024
ONE_GB = 1e9

# compat_tests.zk_harness.FAST without the short session timeout: a loaded machine must not
# expire a broker's session in the middle of a row
ZK_OVERRIDES: dict[str, str] = {
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "10000",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
}


@dataclass(frozen=True, slots=True)
class Cluster:
    """Three running processes of one broker: a bootstrap address, the pids, and each node's
    id -> (pid, client port)."""

    name: str
    bootstrap: str
    pids: tuple[int, ...]
    nodes: dict[int, tuple[int, int]]

    def cpu_seconds(self) -> float:
        return sum(procstat.cpu_seconds(pid) for pid in self.pids)

    def rss_mb(self) -> float:
        return sum(procstat.memory_mb(pid)[0] for pid in self.pids)


@dataclass(frozen=True, slots=True)
class Split:
    """One RF=3 run by process: the leader's CPU s, each follower's CPU s, each follower's
    Fetch requests to the leader and the response bytes it received, the value bytes moved."""

    leader_cpu: float
    follower_cpu: tuple[float, ...]
    fetches: tuple[int, ...]
    received: tuple[int, ...]
    value_bytes: int


@dataclass(slots=True)
class Rf3Result:
    """One broker's runs: MB/s and (cpu s, value bytes) per replication factor."""

    mb_s: dict[int, list[float]]
    cpu: dict[int, list[tuple[float, int]]]
    splits: list[Split] = field(default_factory=list)

    def median(self, rf: int) -> float | None:
        return statistics.median(self.mb_s[rf]) if self.mb_s[rf] else None

    def cpu_per_gb(self, rf: int) -> float | None:
        moved = sum(b for _, b in self.cpu[rf])
        return sum(c for c, _ in self.cpu[rf]) / (moved / ONE_GB) if moved else None

    def ratio(self) -> float | None:
        one, three = self.median(1), self.median(3)
        return three / one if one and three is not None else None

    def cpu_ratio(self) -> float | None:
        one, three = self.cpu_per_gb(1), self.cpu_per_gb(3)
        return three / one if one and three is not None else None


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_rf3(results: dict[str, Rf3Result]) -> str:
    """The RF=3 table: MB/s at RF=1 and RF=3, their ratio, CPU s/GB over the three processes."""
    out = [
        "| broker (3 processes), 1 KiB, 1 partition, acks=all | RF=1 MB/s | RF=3 MB/s "
        "| RF=3 / RF=1 | RF=1 CPU s/GB | RF=3 CPU s/GB | CPU s/GB RF=3 / RF=1 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        out.append(
            f"| {name} | {_num(r.median(1), 1)} | {_num(r.median(3), 1)} | {_num(r.ratio())} "
            f"| {_num(r.cpu_per_gb(1))} | {_num(r.cpu_per_gb(3))} | {_num(r.cpu_ratio())} |"
        )
    return "\n".join(out)


def render_split(results: dict[str, Rf3Result]) -> str:
    """RF=3 by process, one line a run: CPU s/GB of the leader and of each follower, each
    follower's Fetch round trips per MB and mean response KB."""
    out = [
        "| broker, RF=3 run | leader CPU s/GB | followers CPU s/GB | follower fetches / MB "
        "| mean fetch response KB |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for i, s in enumerate(r.splits, 1):
            gb = s.value_bytes / ONE_GB
            mb = s.value_bytes / 1e6
            followers = " + ".join(f"{c / gb:.2f}" for c in s.follower_cpu)
            per_mb = ", ".join(f"{n / mb:.2f}" for n in s.fetches)
            kb = ", ".join(
                f"{b / n / 1e3:,.0f}" if n else "-"
                for b, n in zip(s.received, s.fetches, strict=True)
            )
            out.append(f"| {name} {i} | {s.leader_cpu / gb:.2f} | {followers} | {per_mb} | {kb} |")
    return "\n".join(out)


@contextlib.contextmanager
def odradek_cluster() -> Iterator[Cluster]:
    """Three `odradek serve` on one ZooKeeper; everything stopped on the way out.

    With BENCH_RF3_PROFILE=DIR each process runs under cProfile, writing DIR/node<N>.prof when
    it stops (the RF=1 and RF=3 rows of the run together; the fetch handler is RF=3's)."""
    prof = os.environ.get("BENCH_RF3_PROFILE")
    with ZooKeeperServer() as zk:
        procs = [
            OdradekProcess(
                overrides={
                    **ZK_OVERRIDES,
                    "node.id": str(n),
                    "zookeeper.connect": zk.connect("/bench-rf3"),
                },
                profile_to=Path(prof) / f"node{n}.prof" if prof else None,
            )
            for n in range(NODES)
        ]
        try:
            for p in procs:
                p.start()
            yield Cluster(
                ODRADEK,
                ",".join(p.bootstrap for p in procs),
                tuple(p.pid for p in procs),
                {n: (p.pid, p.port) for n, p in enumerate(procs)},
            )
        finally:
            for p in reversed(procs):
                p.stop()


@contextlib.contextmanager
def kafka_cluster() -> Iterator[Cluster]:
    """Three Kafka KRaft combined nodes of one quorum, offsets/transactions topics at RF=3."""
    cluster_id = new_cluster_id()
    nodes = [kafka_proc.KafkaProcess(node_id=n, cluster_id=cluster_id) for n in range(1, 4)]
    voters = ",".join(f"{k.node_id}@{HOST}:{k.controller_port}" for k in nodes)
    for k in nodes:
        k.overrides.update(
            {
                "controller.quorum.voters": voters,
                "offsets.topic.replication.factor": "3",
                "transaction.state.log.replication.factor": "3",
                "transaction.state.log.min.isr": "2",
                "share.coordinator.state.topic.replication.factor": "3",
                "share.coordinator.state.topic.min.isr": "2",
            }
        )
    try:
        for k in nodes:
            k.spawn()
        for k in nodes:
            k.wait_ready()
        yield Cluster(
            KAFKA,
            ",".join(k.bootstrap for k in nodes),
            tuple(k.pid for k in nodes),
            {k.node_id: (k.pid, k.port) for k in nodes},
        )
    finally:
        for k in reversed(nodes):
            k.stop()


def _wait_brokers(cluster: Cluster, timeout: float = 60.0) -> None:
    """Poll Metadata until all three brokers are registered (bounded)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(admin.list_topics(timeout=5).brokers) >= NODES:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{cluster.name}: fewer than {NODES} brokers registered in {timeout:g} s")


def measure(cluster: Cluster, opts: argparse.Namespace) -> Rf3Result:
    """`opts.repeat` rounds of RF=1 and RF=3 produce, the order alternating by round."""
    _wait_brokers(cluster)
    topics = Topics(cluster.bootstrap)
    result = Rf3Result({1: [], 3: []}, {1: [], 3: []})
    records = max(1000, int(opts.mb * 1e6 / SIZE))
    for rnd in range(opts.repeat):
        for rf in (1, 3) if rnd % 2 == 0 else (3, 1):
            topic = topic_name(f"rf{rf}")
            topics.create(topic, 1, rf)
            settings = ClientSettings(
                cluster.bootstrap, 1, acks="all", phase_timeout_s=opts.phase_timeout
            )
            if opts.warm:
                falloff.warm(tempfile.gettempdir(), records * SIZE * rf * 11 // 10)
            leader = _leader(cluster, topic)
            followers = [n for n in sorted(cluster.nodes) if n != leader]
            follower_pids = {cluster.nodes[n][0] for n in followers}
            leader_port = {cluster.nodes[leader][1]}
            conns0 = peer_traffic.connections(follower_pids, leader_port)
            per0 = {n: procstat.cpu_seconds(pid) for n, (pid, _) in cluster.nodes.items()}
            cpu0 = cluster.cpu_seconds()
            r = native.produce(settings, topic, SIZE, records)
            cpu = cluster.cpu_seconds() - cpu0
            per = {n: procstat.cpu_seconds(pid) - per0[n] for n, (pid, _) in cluster.nodes.items()}
            traffic = peer_traffic.delta(
                conns0, peer_traffic.connections(follower_pids, leader_port)
            )
            if rf == 3:
                by_pid = {cluster.nodes[n][0]: n for n in followers}
                fetches = dict.fromkeys(followers, 0)
                received = dict.fromkeys(followers, 0)
                for (pid, _, _), c in traffic.items():
                    fetches[by_pid[pid]] += c.requests
                    received[by_pid[pid]] += c.received
                result.splits.append(
                    Split(
                        per[leader],
                        tuple(per[n] for n in followers),
                        tuple(fetches[n] for n in followers),
                        tuple(received[n] for n in followers),
                        r.value_bytes,
                    )
                )
            mb_s = r.value_bytes / 1e6 / r.elapsed_s
            result.mb_s[rf].append(mb_s)
            result.cpu[rf].append((cpu, r.value_bytes))
            print(
                f"bench: {cluster.name:7} RF={rf} acks=all 1 KiB: {mb_s:,.1f} MB/s, broker CPU "
                f"{cpu:.2f} s over {NODES} processes (load {_loadavg()})",
                file=sys.stderr,
                flush=True,
            )
    topics.delete_created()
    return result


def _leader(cluster: Cluster, topic: str) -> int:
    """The node leading partition 0 of `topic`."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    return int(meta.partitions[0].leader)


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(opts: argparse.Namespace, out: Callable[[str], None] = print) -> dict[str, Rf3Result]:
    load_start = _loadavg()
    results: dict[str, Rf3Result] = {}
    order = [(ODRADEK, odradek_cluster), (KAFKA, kafka_cluster)]
    if opts.kafka_first:
        order.reverse()
    only = getattr(opts, "rf3_only", None)
    if only:
        order = [(n, s) for n, s in order if n.lower() == only.lower()]
    for name, start in order:
        with start() as cluster:
            results[name] = measure(cluster, opts)
    results = {n: results[n] for n in (ODRADEK, KAFKA) if n in results}
    out(render_rf3(results))
    out("")
    out(render_split(results))
    out("")
    out(
        f"Three `odradek serve` on one ZooKeeper, then three Kafka {kafka_proc.KAFKA_VERSION}.0 "
        f"KRaft combined nodes (-Xmx1G -Xms1G each, G1); native driver, {opts.mb:g} MB of 1 KiB "
        f"values per run, {opts.repeat} round(s), medians; {os.cpu_count()} CPUs; load average "
        f"(1, 5, 15 min) {load_start} at the start, {_loadavg()} at the end."
    )
    return results
