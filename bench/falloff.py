"""Consecutive produce runs into one broker, and the kernel's dirty pages between them.

`python -m bench.falloff` starts a broker (odradek, Kafka 4.4 as bench.kafka_proc starts it, or
both one after the other), then `--runs` times: a new one-partition topic, `--records` values of
`--size` bytes produced at full speed with acks=1 by the native driver. Per run it prints the
seconds, the broker's user and system CPU ticks (/proc/PID/stat) and the kernel's Dirty and
Writeback (/proc/meminfo) after the run. Buffered writes get dearer as dirty pages pile up toward
the writeback thresholds (vm.dirty_background_ratio / vm.dirty_ratio); the system ticks show it.
Each broker's series starts after a sync(), so that it does not pay for the other's pages.
`--override KEY=VALUE` passes a setting to odradek (a knob under test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass

from bench import kafka_proc, native
from bench.broker_proc import OdradekProcess
from bench.topics import Topics, topic_name
from bench.workloads import ClientSettings

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> tuple[int, int]:
    """(utime, stime) of `pid` in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]), int(fields[12])


def meminfo_mb(*keys: str) -> dict[str, float]:
    out = {}
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            name, rest = line.split(":", 1)
            if name in keys:
                out[name] = int(rest.split()[0]) * 1024 / 1e6
    return out


@dataclass(frozen=True, slots=True)
class Run:
    seconds: float
    mb_per_s: float
    utime: int
    stime: int
    dirty_mb: float
    writeback_mb: float


def series(bootstrap: str, pid: int, runs: int, records: int, size: int) -> list[Run]:
    topics = Topics(bootstrap)
    out = []
    for _ in range(runs):
        topic = topic_name("falloff")
        topics.create(topic, 1, 1)
        u0, s0 = cpu_ticks(pid)
        r = native.produce(ClientSettings(bootstrap, 1, acks="1"), topic, size, records)
        u1, s1 = cpu_ticks(pid)
        mem = meminfo_mb("Dirty", "Writeback")
        out.append(
            Run(
                r.elapsed_s,
                r.value_bytes / 1e6 / r.elapsed_s,
                u1 - u0,
                s1 - s0,
                mem["Dirty"],
                mem["Writeback"],
            )
        )
        print(f"bench: {out[-1]}", file=sys.stderr, flush=True)
    return out


def render(name: str, runs: list[Run]) -> str:
    lines = [f"{name}: run | s | MB/s | broker user ticks | system ticks | Dirty MB | Writeback MB"]
    for i, r in enumerate(runs, 1):
        lines.append(
            f"  {i} | {r.seconds:.2f} | {r.mb_per_s:,.0f} | {r.utime} | {r.stime} "
            f"| {r.dirty_mb:,.0f} | {r.writeback_mb:,.0f}"
        )
    secs = [r.seconds for r in runs]
    lines.append(
        f"  slowest / fastest {max(secs) / min(secs):.2f}, median {statistics.median(secs):.2f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.falloff", description=__doc__)
    p.add_argument("--broker", choices=("odradek", "kafka", "both"), default="both")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    a = p.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in a.override)
    if a.broker in ("odradek", "both"):
        os.sync()
        with OdradekProcess(overrides=overrides) as broker:
            broker.start()
            runs = series(broker.bootstrap, broker.pid, a.runs, a.records, a.size)
        print(render(f"odradek {overrides or ''}".strip(), runs), flush=True)
    if a.broker in ("kafka", "both"):
        os.sync()
        with kafka_proc.KafkaProcess() as kafka:
            kafka.start()
            runs = series(kafka.bootstrap, kafka.pid, a.runs, a.records, a.size)
        print(render("Kafka 4.4", runs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
