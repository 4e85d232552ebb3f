"""Consecutive produce runs into one broker, and the kernel's dirty pages between them.

`python -m bench.falloff` starts a broker (odradek, Kafka 4.4 as bench.kafka_proc starts it, or
both one after the other), then `--runs` times: a new one-partition topic, `--records` values of
`--size` bytes produced at full speed with acks=1 by the native driver. Per run it prints the
seconds, the broker's user and system CPU ticks (/proc/PID/stat) and the kernel's Dirty and
Writeback (/proc/meminfo) after the run. Buffered writes get dearer as dirty pages pile up toward
the writeback thresholds (vm.dirty_background_ratio / vm.dirty_ratio); the system ticks show it.
Each broker's series starts after a sync(), so that it does not pay for the other's pages.
`--override KEY=VALUE` passes a setting to odradek (a knob under test).

On a virtual machine whose balloon device reports free pages to the hypervisor (virtio-balloon
free page reporting, printed at the start), a page the guest freed a while ago is no longer
backed: the next write that takes it into the page cache pays the host's fault and zeroing, ~15x
the system time of a page still backed. Freed pages are reported a few seconds after they are
freed, so a series runs fast while it reuses what the last one freed and falls off once it needs
fresh pages, whatever the broker. `--broker plain` runs the same series as plain 1 MiB os.write
calls by this process (no broker at all) to show the machine's own curve; `--warm` writes and
deletes a file of the run's size just before each run, so that every run gets pages the guest
has just freed, and what is left is the broker's own cost.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics
import sys
import tempfile
import time
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


def free_page_reporting() -> bool:
    """Whether a virtio balloon with free page reporting (feature bit 5) is present."""
    for dev in glob.glob("/sys/bus/virtio/devices/*"):
        try:
            with open(f"{dev}/device", encoding="ascii") as f:
                if int(f.read(), 16) != 5:  # VIRTIO_ID_BALLOON
                    continue
            with open(f"{dev}/features", encoding="ascii") as f:
                if f.read()[5:6] == "1":  # VIRTIO_BALLOON_F_REPORTING
                    return True
        except (OSError, ValueError):
            continue
    return False


_CHUNK = b"\x5a" * (1 << 20)


def write_file(path: str, nbytes: int) -> None:
    """Buffered 1 MiB writes of `nbytes` to a new file at `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        for _ in range(-(-nbytes // len(_CHUNK))):
            os.write(fd, _CHUNK)
    finally:
        os.close(fd)


def warm(directory: str, nbytes: int) -> None:
    """Take `nbytes` of page cache and free it again, so that the next writer gets pages the
    guest has just freed (still backed by the hypervisor)."""
    path = os.path.join(directory, "falloff-warm.tmp")
    write_file(path, nbytes)
    os.unlink(path)


@dataclass(frozen=True, slots=True)
class Run:
    seconds: float
    mb_per_s: float
    utime: int
    stime: int
    dirty_mb: float
    writeback_mb: float


def series(
    bootstrap: str, pid: int, runs: int, records: int, size: int, warm_dir: str | None
) -> list[Run]:
    topics = Topics(bootstrap)
    out = []
    for _ in range(runs):
        topic = topic_name("falloff")
        topics.create(topic, 1, 1)
        if warm_dir is not None:
            warm(warm_dir, records * size * 11 // 10)
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


def plain_series(runs: int, records: int, size: int, warm_dir: str | None) -> list[Run]:
    """The same bytes per run written by this process with plain 1 MiB writes to one file."""
    out = []
    with tempfile.TemporaryDirectory(prefix="falloff-plain-") as d:
        fd = os.open(os.path.join(d, "plain"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            for _ in range(runs):
                if warm_dir is not None:
                    warm(d, records * size * 11 // 10)
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                t0 = time.perf_counter()
                for _ in range(-(-records * size // len(_CHUNK))):
                    os.write(fd, _CHUNK)
                elapsed = time.perf_counter() - t0
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                mem = meminfo_mb("Dirty", "Writeback")
                out.append(
                    Run(
                        elapsed,
                        records * size / 1e6 / elapsed,
                        round((r1.ru_utime - r0.ru_utime) * _CLK_TCK),
                        round((r1.ru_stime - r0.ru_stime) * _CLK_TCK),
                        mem["Dirty"],
                        mem["Writeback"],
                    )
                )
        finally:
            os.close(fd)
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
    p.add_argument("--broker", choices=("odradek", "kafka", "both", "plain"), default="both")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--warm",
        action="store_true",
        help="before each run, write and delete a file of the run's size (see above)",
    )
    a = p.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in a.override)
    print(f"free page reporting (virtio-balloon): {free_page_reporting()}; warm: {a.warm}")
    if a.broker == "plain":
        os.sync()
        print(render("plain writes", plain_series(a.runs, a.records, a.size, a.warm)), flush=True)
        return 0
    if a.broker in ("odradek", "both"):
        os.sync()
        with OdradekProcess(overrides=overrides) as broker:
            broker.start()
            warm_dir = str(broker.data_dir) if a.warm else None
            runs = series(broker.bootstrap, broker.pid, a.runs, a.records, a.size, warm_dir)
        print(render(f"odradek {overrides or ''}".strip(), runs), flush=True)
    if a.broker in ("kafka", "both"):
        os.sync()
        with kafka_proc.KafkaProcess() as kafka:
            kafka.start()
            warm_dir = str(kafka.dir) if a.warm else None
            runs = series(kafka.bootstrap, kafka.pid, a.runs, a.records, a.size, warm_dir)
        print(render("Kafka 4.4", runs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
