"""One seed over a cluster on hosts (`deployment.Deployment`, e.g. `HostCluster`): a fresh
topic, the seed's faults (`nemesis`) under the queue workload (`workload`, from the client
host's namespace), heal, final read, check.

    with HostCluster(tmp, env=journal_env(tmp)) as cluster:
        for seed in range(20):
            result = run_seed(cluster, seed, SeedOptions())
            assert result.valid, result.explain()

A cluster serves many seeds: each seed has its own topic, groups and transactional ids.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from odradek.testing.jepsen.deployment import Deployment
from odradek.testing.jepsen.history import History
from odradek.testing.jepsen.hosts import CLIENT
from odradek.testing.jepsen.nemesis import ALL, Nemesis, schedule
from odradek.testing.jepsen.runner import Result, Workload, run_workload


@dataclass
class SeedOptions:
    duration: float = 3.0  # seconds of faults
    longest: float = 1.2  # longest fault
    kinds: tuple[str, ...] = ALL
    keys: int = 4
    plain: int = 2
    txn: int = 2
    max_ops: int = 150
    settle_s: float = 1.0
    java: float = 0.0  # share of the processes on the Java client (`Workload.java`)


def run_seed(cluster: Deployment, seed: int, opts: SeedOptions) -> Result:
    cluster.heal()
    topic = f"jepsen-{seed}"
    cluster.create_topic(topic, opts.keys)
    faults = schedule(seed, opts.duration, opts.kinds, opts.longest)
    journals = {b: cluster.journal(b) for b in cluster.brokers}
    nemesis = Nemesis(cluster, topic, opts.keys, journals)
    w = Workload(
        seed=seed,
        topic=topic,
        keys=opts.keys,
        plain=opts.plain,
        txn=opts.txn,
        max_ops=opts.max_ops,
        duration=opts.duration,
        settle_s=opts.settle_s,
        java=opts.java,
    )

    def faults_then_heal(history: History, stop: threading.Event) -> list[str]:
        done = nemesis.run(faults, history, stop, opts.duration)
        if not cluster.full_isr(topic, opts.keys, timeout=20):
            done.append("note: cluster did not get every replica back in sync within 20 s")
        return done

    def body() -> Result:
        return run_workload(cluster.bootstrap, w, faults_then_heal)

    return cluster.net.run_inside(CLIENT, body)
