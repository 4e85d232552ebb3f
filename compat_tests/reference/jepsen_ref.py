"""The queue workload (odradek.testing.jepsen) against a three-node Apache Kafka (KRaft,
`KafkaReference`): a check of the checker. The nodes run on loopback (not in network
namespaces), so the faults are kill -9 + restart and SIGSTOP/SIGCONT of one node at a time.

    python -m compat_tests.reference.jepsen_ref --seeds 5            # librdkafka and Java clients
    python -m compat_tests.reference.jepsen_ref --seeds 5 --java 0   # librdkafka only

Prints each seed's verdict and the soak table of `bench.jepsen`; exit status 0 when every seed
is valid (nothing Kafka documents as guaranteed was broken).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import socket
import sys
import tempfile
import threading
import time

from confluent_kafka.admin import AdminClient, NewTopic

from bench.jepsen import java_share, summary
from compat_tests.reference.kafka_ref import KafkaNode, KafkaReference
from odradek.testing.jepsen.history import INFO, History
from odradek.testing.jepsen.runner import Result, Workload, run_workload

OVERRIDES = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "unclean.leader.election.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "2000",
}


def _listening(node: KafkaNode, deadline: float) -> None:
    host, port = node.bootstrap.rsplit(":", 1)
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{node.bootstrap} did not come back")


def nemesis(kafka: KafkaReference, seed: int, duration: float):  # type: ignore[no-untyped-def]
    def run(history: History, stop: threading.Event) -> list[str]:
        rng = random.Random(f"jepsen-ref-{seed}")
        start, done = time.monotonic(), []
        t = rng.uniform(0.1, 0.4)
        while t < duration - 0.3 and not stop.is_set():
            stop.wait(max(0.0, start + t - time.monotonic()))
            node = rng.choice(kafka.nodes)
            kind = rng.choice(["kill", "pause"])
            length = rng.uniform(0.4, 1.2)
            inv = history.invoke("nemesis", "nemesis", {"fault": f"{kind} {node.bootstrap}"})
            assert node.proc is not None
            if kind == "kill":
                node.kill()
                stop.wait(length)
                node.start()
                _listening(node, time.monotonic() + 60)
            else:
                os.kill(node.proc.pid, signal.SIGSTOP)
                stop.wait(length)
                os.kill(node.proc.pid, signal.SIGCONT)
            history.complete(inv, INFO)
            done.append(f"t={t:.2f}s {kind} node {node.bootstrap} for {length:.2f}s")
            t = time.monotonic() - start + rng.uniform(0.2, 0.6)
        return done

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m compat_tests.reference.jepsen_ref")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--java", default="auto", help="as bench.jepsen's: the Java client's share")
    args = p.parse_args(argv)
    java = java_share(args.java)
    logging.basicConfig(level=logging.CRITICAL)
    results: list[Result] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jepsen-ref-") as tmp:
        with KafkaReference(work_dir=tmp, nodes=3, overrides=OVERRIDES) as kafka:
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
            for seed in range(args.seeds):
                topic = f"jepsen-{seed}"
                admin.create_topics([NewTopic(topic, 4, 3)])[topic].result(30)
                w = Workload(seed=seed, topic=topic, duration=args.duration, max_ops=150, java=java)
                r = run_workload(kafka.bootstrap, w, nemesis(kafka, seed, args.duration))
                results.append(r)
                print(f"seed {seed}: {'ok' if r.valid else 'FAIL'} in {r.elapsed:.1f}s", flush=True)
                print(r.explain(), flush=True)
    print(summary(results, time.monotonic() - began))
    return 0 if all(r.valid for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
