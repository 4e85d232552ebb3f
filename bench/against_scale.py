"""The scale rows, odradek against Kafka: `python -m bench --against kafka --scale`.

One broker at a time (the other stopped), each as bench.against starts it, with
RLIMIT_NOFILE `NOFILE` for both (Kafka's docs ask operators for 100,000; this machine's hard
limit is 20,000, which 10,000 partitions and 2,000 connections fit: the table shows the
descriptors and memory maps each broker held, against `vm.max_map_count`): `--topics` x
`--partitions` partitions (default 1,000 x 10) are created and given one record each
(bench.scale's pieces; the time until every partition took its record is a row, since Kafka
creates the logs after answering CreateTopics), then the broker is stopped
cleanly and started again on the same data: the table gives the time from the spawn to the
first ApiVersions answer, the RSS after that start, the full Metadata round trip (v12, every
topic, median and max of `--metadata-runs`), then the RSS with `--connections` idle
connections open (each has had one ApiVersions answer) and the growth they caused.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import kafka_proc, procstat, scale
from bench.broker_proc import HOST

ODRADEK = "odradek"
KAFKA = "Kafka"
KAFKA_DOCS_NOFILE = 100_000  # Kafka's operations docs: "at least 100000" file descriptors
NOFILE = min(KAFKA_DOCS_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
# a clean stop of Kafka with 10,000 partitions (a SIGKILL past it makes the restart recover
# every segment) and the start after it both take minutes on this loaded machine
STOP_TIMEOUT_S = 600.0
RESTART_TIMEOUT_S = 900.0


@dataclass(slots=True)
class ScaleResult:
    partitions: int
    fill_s: float  # CreateTopics sent to every partition holding its record
    restart_ms: float
    rss_restarted_mb: float
    metadata_ms: list[float]
    metadata_bytes: int
    rss_before_conns_mb: float
    rss_conns_mb: float
    connections: int
    fds: int = 0  # open descriptors with the connections open
    maps: int = 0  # memory maps (/proc/PID/maps lines) with the connections open


def memory_maps(pid: int) -> int:
    with open(f"/proc/{pid}/maps", "rb") as f:
        return sum(1 for _ in f)


def max_map_count() -> int:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except OSError:
        return 0


def idle_connections_rss(port: int, pid: int, count: int) -> tuple[float, float, int, int]:
    """RSS MB before and with `count` open connections, each answered one ApiVersions, and
    the broker's descriptors and memory maps with them open."""

    async def go() -> tuple[float, float, int, int]:
        before = procstat.memory_mb(pid)[0]
        writers = []
        try:
            for i in range(count):
                reader, writer = await asyncio.open_connection(HOST, port)
                writers.append(writer)
                await scale._round_trip(reader, writer, scale.api_versions_request(i + 1))
            await asyncio.sleep(2.0)  # let the broker settle before its RSS is read
            return before, procstat.memory_mb(pid)[0], scale.open_fds(pid), memory_maps(pid)
        finally:
            for w in writers:
                w.close()

    return asyncio.run(go())


def _fill(bootstrap: str, opts: argparse.Namespace) -> float:
    """Create the topics and give every partition a record; returns the seconds it took."""
    names = [f"scale-{i:05d}" for i in range(opts.topics)]
    began = time.perf_counter()
    scale.create_topics(bootstrap, names, opts.partitions, 100)
    rounds = scale.produce_everywhere(bootstrap, names, opts.partitions)
    took = time.perf_counter() - began
    print(f"bench: filled in {took:.1f} s, {rounds} produce round(s)", file=sys.stderr)
    return took


def _after_restart(
    port: int, pid: int, fill_s: float, restart_ms: float, opts: argparse.Namespace
) -> ScaleResult:
    rss = procstat.memory_mb(pid)[0]
    times, size = scale.metadata_times(port, opts.metadata_runs)
    before, with_conns, fds, maps = idle_connections_rss(port, pid, opts.connections)
    return ScaleResult(
        opts.topics * opts.partitions,
        fill_s,
        restart_ms,
        rss,
        times,
        size,
        before,
        with_conns,
        opts.connections,
        fds,
        maps,
    )


def measure_odradek(opts: argparse.Namespace) -> ScaleResult:
    proc = scale.LimitedProcess(NOFILE, overrides={"num.partitions": "1"})
    try:
        proc.start(timeout=60.0)
        fill_s = _fill(proc.bootstrap, opts)
        timing = proc.restart()
        return _after_restart(proc.port, proc.pid, fill_s, timing.api_versions_ms, opts)
    finally:
        proc.stop()


def measure_kafka(opts: argparse.Namespace) -> ScaleResult:
    with kafka_proc.KafkaProcess(nofile=NOFILE) as kafka:
        kafka.start()
        try:
            fill_s = _fill(kafka.bootstrap, opts)
            timing = kafka.restart(RESTART_TIMEOUT_S, STOP_TIMEOUT_S)
            print(f"bench: Kafka stopped (seconds, exit code): {kafka.last_stop}", file=sys.stderr)
            return _after_restart(kafka.port, kafka.pid, fill_s, timing.api_versions_ms, opts)
        except Exception:
            tail = kafka.log_tail(200_000_000).splitlines()  # the whole log
            shown = [ln for ln in tail if "ERROR" in ln or "FATAL" in ln or "Exception" in ln]
            print("\n".join(shown[-20:]), file=sys.stderr)
            raise


def render_scale(results: dict[str, ScaleResult]) -> str:
    od, ka = results.get(ODRADEK), results.get(KAFKA)

    def row(label: str, get: Callable[[ScaleResult], float], digits: int = 1) -> str:
        a = get(od) if od else None
        b = get(ka) if ka else None
        ratio = f"{a / b:.2f}" if a is not None and b else "-"
        fa = "-" if a is None else f"{a:,.{digits}f}"
        fb = "-" if b is None else f"{b:,.{digits}f}"
        return f"| {label} | {fa} | {fb} | {ratio} |"

    n = (od or ka).partitions if (od or ka) else 0
    c = (od or ka).connections if (od or ka) else 0
    return "\n".join(
        [
            "| scale row | odradek | Kafka | odradek / Kafka |",
            "|---|---|---|---|",
            row(f"create {n:,} partitions and write one record to each, s", lambda r: r.fill_s),
            row(
                f"restart to first ApiVersions answer, {n:,} partitions, ms",
                lambda r: r.restart_ms,
                0,
            ),
            row(f"RSS after that restart, {n:,} partitions, MB", lambda r: r.rss_restarted_mb),
            row(
                f"Metadata (all topics) p50, {n:,} partitions, ms",
                lambda r: statistics.median(r.metadata_ms),
                2,
            ),
            row(
                f"Metadata (all topics) max, {n:,} partitions, ms", lambda r: max(r.metadata_ms), 2
            ),
            row("Metadata response KB", lambda r: r.metadata_bytes / 1000),
            row(f"RSS with {c:,} idle connections MB", lambda r: r.rss_conns_mb),
            row(
                f"RSS growth for {c:,} idle connections MB",
                lambda r: r.rss_conns_mb - r.rss_before_conns_mb,
            ),
            row(
                "RSS growth per idle connection KB",
                lambda r: (r.rss_conns_mb - r.rss_before_conns_mb) * 1000 / max(1, r.connections),
            ),
            row(f"open descriptors with {c:,} connections", lambda r: r.fds, 0),
            row(f"memory maps with {c:,} connections", lambda r: r.maps, 0),
        ]
    )


def run(opts: argparse.Namespace, out: Callable[[str], None] = print) -> dict[str, ScaleResult]:
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results: dict[str, ScaleResult] = {}
    for name, fn in ((ODRADEK, measure_odradek), (KAFKA, measure_kafka)):
        t0 = time.perf_counter()
        try:
            results[name] = fn(opts)
        except Exception as exc:  # the other broker's rows are still worth printing
            print(f"bench: {name} scale rows failed: {exc!r}", file=sys.stderr)
            continue
        print(
            f"bench: {name} scale rows took {time.perf_counter() - t0:.0f} s: {results[name]}",
            file=sys.stderr,
        )
    out(render_scale(results))
    out("")
    out(
        f"One broker at a time, RLIMIT_NOFILE {NOFILE:,} (vm.max_map_count "
        f"{max_map_count():,}); {opts.topics:,} topics x {opts.partitions} "
        f"partitions, one record each; {os.cpu_count()} CPUs; load average (1, 5, 15 min) "
        f"{load_start} at the start, {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end."
    )
    return results
