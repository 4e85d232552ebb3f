"""`python -m bench.jepsen`: the queue workload's soak over brokers on their own hosts (network
namespaces), with real network faults, kill -9, SIGSTOP, power loss, a full disk, EIO and clock
jumps (odradek.testing.jepsen).

    python -m bench.jepsen --seeds 1000                 # seeds 0..999 on one cluster
    python -m bench.jepsen --seed 17 -v                 # one seed again, with its faults
    python -m bench.jepsen --seed 49 --repeat 5 --keep-logs /tmp/j   # five fresh clusters
    python -m bench.jepsen --seeds 50 --kinds power-loss,kill
    python -m bench.jepsen --seeds 20 --brokers 5       # five brokers (RF 3 topics)
    python -m bench.jepsen --seeds 20 --bootstrap host:9092   # your own cluster, no faults
    python -m bench.jepsen --seeds 20 --java 0          # librdkafka clients only
    python -m bench.jepsen --seeds 100 --broker kafka   # the same seeds on Apache Kafka 4.4

Needs root and iproute2 (network namespaces, veth, a bridge; tc netem where the kernel has it),
java and ZooKeeper (scripts/setup.sh). One cluster (three ZooKeeper nodes, three or five
brokers) serves every seed; each seed has its own topic. A failing seed prints its faults and
anomalies; the table at the end counts seeds, faults and what the checkers found. Exit status
0 when every seed is valid.

`--broker kafka` runs the seeds against three Apache Kafka 4.4 KRaft combined nodes on their own
hosts instead (compat_tests/reference/kafka_hosts.py, the reference's jars), under the same
nemesis; the fault kinds that need odradek (power loss, EIO, clock jumps) are left out, and the
reasons printed (zk-cut runs as KRaft's analogue: the controller listener cut). Schedules
depend on the kinds: to compare, run odradek with the same --kinds.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

from odradek.testing.jepsen.checker import CYCLES, summarize
from odradek.testing.jepsen.deployment import Deployment, applicable
from odradek.testing.jepsen.hosts import HostCluster, journal_env
from odradek.testing.jepsen.javaclient import unavailable
from odradek.testing.jepsen.nemesis import ALL
from odradek.testing.jepsen.runner import Result, Workload, run_workload
from odradek.testing.jepsen.seeds import SeedOptions, run_seed


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.jepsen", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seed", type=int, action="append", help="run this seed (repeatable)")
    p.add_argument("--duration", type=float, default=SeedOptions.duration)
    p.add_argument("--kinds", default=",".join(ALL), help=f"fault kinds, of {','.join(ALL)}")
    p.add_argument(
        "--bootstrap",
        help="run against this cluster instead (no faults injected; "
        "the topic jepsen-<seed> must exist with 4 partitions)",
    )
    p.add_argument("--brokers", type=int, default=3, help="odradek brokers (3 or 5)")
    p.add_argument(
        "--broker",
        choices=("odradek", "kafka"),
        default="odradek",
        help="whose brokers: odradek's (over ZooKeeper) or Apache Kafka 4.4's (KRaft, three "
        "combined nodes: the reference, a check of the checker)",
    )
    p.add_argument("--failures", help="append failing seeds' explanations to this file")
    p.add_argument(
        "--minutes", type=float, help="start no seed after this many minutes (a timed soak)"
    )
    p.add_argument(
        "--work-dir",
        help="keep the cluster's files here (broker and ZooKeeper logs, data; with --repeat, "
        "a run-<n> directory per cluster)",
    )
    p.add_argument(
        "--java",
        default="auto",
        help="share of the plain and of the transactional processes on Apache Kafka's Java "
        "client (0..1; which ones, each seed draws); auto: 0.5 when java and the client's jars "
        "are there, else 0 (said so); a share asked for without them is an error",
    )
    p.add_argument(
        "--keep-logs",
        metavar="DIR",
        help="copy each host's log lines of a failing seed (with -v, of every seed) to "
        "DIR/seed-<n>/ (brokers, ZooKeeper)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the seeds this many times, each time on a fresh cluster (a seed's topic and "
        "transactional ids are its own: a second run on the same cluster would find the first's)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def java_share(asked: str) -> float:
    """The Java client's share of the processes; SystemExit when asked for and unavailable."""
    why = unavailable() if asked == "auto" or float(asked) > 0 else ""
    if asked == "auto":
        print("java client: " + (why or "on (0.5 of the processes)"), flush=True)
        return 0.0 if why else 0.5
    if why:
        raise SystemExit(f"--java {asked}: {why}")
    return float(asked)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.CRITICAL)
    seeds = args.seed or list(range(args.start, args.start + args.seeds))
    java = java_share(args.java)
    kinds = tuple(args.kinds.split(","))
    if args.broker == "kafka":
        from compat_tests.reference.kafka_hosts import UNSUPPORTED

        kinds, skipped = applicable(kinds, UNSUPPORTED)
        for kind, why in skipped.items():
            print(f"{kind}: left out on Kafka ({why})", flush=True)
        if not kinds:
            print("no fault kind left to run on Kafka")
            return 2
    opts = SeedOptions(duration=args.duration, kinds=kinds, java=java)
    results: list[Result] = []
    errors: list[int] = []
    began = time.monotonic()
    if args.bootstrap:
        for seed in seeds:
            w = Workload(seed=seed, topic=f"jepsen-{seed}", duration=args.duration, java=java)
            results.append(_report(run_workload(args.bootstrap, w), args))
    elif len(set(seeds)) < len(seeds):
        print("a seed runs once per cluster: use --repeat N to run it again on a fresh one")
        return 2
    else:
        for run in range(args.repeat):
            work_dir = args.work_dir
            if work_dir and args.repeat > 1:
                work_dir = os.path.join(work_dir, f"run-{run + 1}")
            _on_fresh_cluster(seeds, opts, args, work_dir, began, results, errors)
    print(summary(results, time.monotonic() - began))
    if errors:
        print("seeds whose run failed (not checked): " + " ".join(map(str, errors)))
    return 0 if all(r.valid for r in results) and not errors else 1


@contextlib.contextmanager
def _work_dir(keep: str | None) -> Iterator[str]:
    if keep:
        os.makedirs(keep, exist_ok=True)
        yield keep
    else:
        with tempfile.TemporaryDirectory(prefix="odradek-jepsen-") as tmp:
            yield tmp


def _on_fresh_cluster(
    seeds: list[int],
    opts: SeedOptions,
    args: argparse.Namespace,
    work_dir: str | None,
    began: float,
    results: list[Result],
    errors: list[int],
) -> None:
    with _work_dir(work_dir) as tmp:
        with _cluster(args, tmp) as cluster:
            for seed in seeds:
                if args.minutes and time.monotonic() - began > 60 * args.minutes:
                    break
                marks = _log_marks(cluster)
                try:
                    result = run_seed(cluster, seed, opts)
                    if args.broker == "kafka":
                        result.command += " --broker kafka"
                    results.append(_report(result, args))
                    if args.keep_logs and (args.verbose or not results[-1].valid):
                        kept = Path(args.keep_logs) / f"seed-{seed}-run-{len(results)}"
                        _keep_logs(cluster, marks, kept)
                except Exception as exc:  # a client crashed: the soak goes on
                    print(f"seed {seed}: ERROR {exc!r}", flush=True)
                    errors.append(seed)


@contextlib.contextmanager
def _cluster(args: argparse.Namespace, tmp: str) -> Iterator[Deployment]:
    """The brokers on hosts: odradek's `HostCluster`, or Kafka's KRaft nodes (`--broker kafka`)."""
    if args.broker == "kafka":
        from compat_tests.reference.kafka_hosts import KafkaHosts

        with KafkaHosts(tmp, nodes=args.brokers) as kafka:
            yield kafka
    else:
        with HostCluster(tmp, brokers=args.brokers, env=journal_env(tmp)) as cluster:
            yield cluster


def _log_marks(cluster: Deployment) -> dict[Path, int]:
    """Every host's log file and its size now (where a seed's lines begin)."""
    return {p: p.stat().st_size for p in cluster.work.glob("*/*.log")}


def _keep_logs(cluster: Deployment, marks: dict[Path, int], out: Path) -> None:
    """Copy what each host logged since `marks` into `out` (one file per host)."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(cluster.work.glob("*/*.log")):
        with path.open("rb") as fh:
            fh.seek(marks.get(path, 0))
            (out / f"{path.parent.name}-{path.name}").write_bytes(fh.read())
    print(f"logs kept in {out}", flush=True)


def _report(r: Result, args: argparse.Namespace) -> Result:
    print(f"seed {r.seed}: {'ok' if r.valid else 'FAIL'} in {r.elapsed:.1f}s", flush=True)
    if args.verbose or not r.valid:
        print(r.explain(), flush=True)
    if not r.valid and args.failures:
        with open(args.failures, "a") as fh:
            fh.write(r.explain() + "\n\n")
    return r


def _fault_kind(fault: str) -> str:
    kind = fault.split(" ")[1]
    if "(not power loss" in fault:  # replicas were not all in sync: a kill -9 instead
        return "power-loss (as kill -9: replicas not in sync)"
    if "not injected" in fault or "not jumped" in fault:
        return f"{kind} (not done: {fault.rsplit('(', 1)[-1].rstrip(')')})"
    return kind


def summary(results: list[Result], wall: float) -> str:
    faults: Counter[str] = Counter()
    ops: Counter[object] = Counter()
    anomalies: Counter[str] = Counter()
    observed: Counter[str] = Counter()
    seeds_of: dict[str, list[int]] = defaultdict(list)  # observed kind (not a cycle) -> seeds
    for r in results:
        faults.update(_fault_kind(f) for f in r.faults if f.startswith("t="))
        for op in r.history.ops:
            if op.type != "invoke" and op.f == "txn":
                ops[op.type] += 1
                ops[(op.value.get("client", "librdkafka"), op.type)] += 1
        anomalies.update(summarize(r.report.anomalies))
        observed.update(summarize(r.report.observed))
        for kind in {a.kind for a in r.report.observed} - CYCLES:
            seeds_of[kind].append(r.seed)
    failing = [r.seed for r in results if not r.valid]
    lines = [
        "",
        "## jepsen queue soak",
        "",
        _row(["seeds", "valid", "failing", "wall s", "s/seed"]),
        _row(["---"] * 5),
        _row(
            [
                str(len(results)),
                str(len(results) - len(failing)),
                str(len(failing)),
                f"{wall:.0f}",
                f"{wall / max(1, len(results)):.1f}",
            ]
        ),
        "",
        _row(["fault", "count"]),
        _row(["---", "---"]),
        *(_row([k, str(v)]) for k, v in sorted(faults.items())),
        "",
        _row(["client ops", "ok", "fail", "info"]),
        _row(["---"] * 4),
        _row(["send/poll/txn", str(ops["ok"]), str(ops["fail"]), str(ops["info"])]),
        *(
            _row([f"  of which {c}", *(str(ops[(c, t)]) for t in ("ok", "fail", "info"))])
            for c in ("librdkafka", "java")
            if any(ops[(c, t)] for t in ("ok", "fail", "info"))
        ),
        "",
        _row(["anomaly (Kafka guarantees)", "count"]),
        _row(["---", "---"]),
        *(_row([k, str(v)]) for k, v in sorted(anomalies.items())),
        *([] if anomalies else [_row(["none", "0"])]),
        "",
        _row(["observed, not promised by Kafka", "count"]),
        _row(["---", "---"]),
        *(_row([k, str(v)]) for k, v in sorted(observed.items())),
    ]
    for kind, seeds in sorted(seeds_of.items()):
        lines.append(f"{kind} seen in seeds: " + " ".join(map(str, sorted(seeds))))
    if failing:
        lines += ["", "failing seeds: " + " ".join(map(str, failing))]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
