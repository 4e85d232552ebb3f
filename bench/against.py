"""odradek and Apache Kafka 4.4 side by side in one run: `python -m bench --against kafka`.

Both brokers run at once on this machine, each as its users start it (`odradek serve` with its
defaults; Kafka through bench.kafka_proc: KRaft combined, -Xmx1G -Xms1G, G1, its default
server.properties; neither flushes, both leave writeback to the OS). Every row is measured on
both over the same client binaries, one broker right after the other (the first of the pair
alternates from row to row and from repeat to repeat, so a burst of load from other processes
does not always land on the same broker), and the table gives each broker's median over
`--repeat` rounds and the ratio odradek / Kafka:

- produce and consume, 100 B and 1 KiB values, 1 and 12 partitions, acks=1 and acks=all (consume
  reads what the acks=1 produce wrote), with the native driver (bench/native, librdkafka) and
  with Kafka's own kafka-producer-perf-test / kafka-consumer-perf-test;
- produce latency p50 / p99 / p99.9 at 10, 50 and 200 MB/s offered (native driver, 1 KiB,
  acks=all, linger.ms 1), and end-to-end latency (Kafka's EndToEndLatency: one record produced
  and consumed at a time, acks=1; the tool reports whole milliseconds) with the same loop timed
  to the microsecond (bench.e2e_us, confluent-kafka, `--e2e-records` records);
- one-record transaction commit latency p50 / p99 (bench.txn, confluent-kafka);
- start to the first ApiVersions answer, idle RSS, RSS once 1 GB of values has been produced;
- broker CPU seconds per GB (utime + stime from /proc/PID/stat) on every row that moves data.

Each row uses a new topic. The 1-minute load average at the start and the end is printed
under the table: on a shared machine, compare the ratio column, not the absolute rates.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import e2e_us, falloff, kafka_proc, native, procstat, txn
from bench.broker_proc import BrokerStartError, OdradekProcess
from bench.topics import Topics, topic_name
from bench.workloads import ClientSettings

ODRADEK = "odradek"
KAFKA = "Kafka"
BROKERS = (ODRADEK, KAFKA)
SIZES = (100, 1024)
PARTITIONS = (1, 12)
ACKS = ("1", "all")
RATES_MB = (10, 50, 200)
RATE_SIZE = 1024
ONE_GB = 1e9


@dataclass(frozen=True, slots=True)
class Spec:
    """One measurement, run on each broker: produce, consume, rate, e2e or txn."""

    kind: str
    tool: str = "native"  # native | java | python
    size: int = 1024
    partitions: int = 1
    acks: str = "1"
    rate_mb: float = 0.0

    @property
    def label(self) -> str:
        tool = {"native": "native", "java": "Kafka perf tool", "python": "confluent-kafka"}
        if self.kind in ("produce", "consume"):
            acks = f", acks={self.acks}" if self.kind == "produce" else ""
            return (
                f"{self.kind} {self.size} B, {self.partitions} partition"
                f"{'s' if self.partitions > 1 else ''}{acks} ({tool[self.tool]})"
            )
        if self.kind == "rate":
            return (
                f"produce {self.size} B at {self.rate_mb:g} MB/s offered, acks=all "
                f"({tool[self.tool]})"
            )
        if self.kind == "e2e":
            return f"end-to-end {self.size} B, one at a time, acks=1 (EndToEndLatency)"
        if self.kind == "e2e_us":
            return f"end-to-end {self.size} B, one at a time, acks=1 (confluent-kafka, to the us)"
        return "one-record transaction commit (confluent-kafka)"


@dataclass(slots=True)
class Measurement:
    """What one run of a Spec on one broker gave: named metrics, broker CPU s, bytes moved."""

    metrics: dict[str, float]
    cpu_s: float
    value_bytes: int


# which metrics each kind reports, in table order, and whether higher is better
METRICS: dict[str, list[tuple[str, bool]]] = {
    "produce": [("MB/s", True)],
    "consume": [("MB/s", True)],
    "rate": [("p50 ms", False), ("p99 ms", False), ("p99.9 ms", False)],
    "e2e": [("p50 ms", False), ("p99 ms", False), ("p99.9 ms", False)],
    "e2e_us": [("p50 ms", False), ("p99 ms", False), ("p99.9 ms", False)],
    "txn": [("commit p50 ms", False), ("commit p99 ms", False)],
}


@dataclass(slots=True)
class TableRow:
    label: str
    higher_is_better: bool
    values: dict[str, float | None]  # broker -> median value
    cpu_per_gb: dict[str, float | None] = field(default_factory=dict)
    # rounds in which odradek's value was the better of the pair, of the rounds both answered:
    # the two brokers run one right after the other in a round, so this says how often the
    # median's order holds, where the spread of a row's runs is as wide as the difference
    rounds_ahead: tuple[int, int] | None = None

    @property
    def ratio(self) -> float | None:
        a, b = self.values.get(ODRADEK), self.values.get(KAFKA)
        if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
            return None
        return a / b

    @property
    def odradek_leads(self) -> bool | None:
        r = self.ratio
        if r is None:
            return None
        return r >= 1.0 if self.higher_is_better else r <= 1.0


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:,.{digits}f}"


def render_table(rows: list[TableRow]) -> str:
    """The side-by-side markdown table: both brokers, the ratio, who leads, CPU s/GB."""
    out = [
        "| row | odradek | Kafka | odradek / Kafka | leads | rounds odradek ahead "
        "| odradek CPU s/GB | Kafka CPU s/GB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        leads = {True: ODRADEK, False: KAFKA, None: "-"}[row.odradek_leads]
        digits = 1 if row.higher_is_better else 2
        ahead = f"{row.rounds_ahead[0]} of {row.rounds_ahead[1]}" if row.rounds_ahead else "-"
        out.append(
            f"| {row.label} | {_num(row.values.get(ODRADEK), digits)} "
            f"| {_num(row.values.get(KAFKA), digits)} | {_num(row.ratio, 2)} | {leads} "
            f"| {ahead} "
            f"| {_num(row.cpu_per_gb.get(ODRADEK), 2)} | {_num(row.cpu_per_gb.get(KAFKA), 2)} |"
        )
    return "\n".join(out)


def table_rows(spec: Spec, results: dict[str, list[Measurement]]) -> list[TableRow]:
    """A spec's table rows: each metric's median per broker, CPU s per GB from the sums."""
    rows = []
    cpu: dict[str, float | None] = {}
    for broker, ms in results.items():
        moved = sum(m.value_bytes for m in ms)
        cpu[broker] = sum(m.cpu_s for m in ms) / (moved / ONE_GB) if moved > 0 else None
    for name, higher in METRICS[spec.kind]:
        values: dict[str, float | None] = {}
        for broker, ms in results.items():
            got = [m.metrics[name] for m in ms if name in m.metrics]
            values[broker] = statistics.median(got) if got else None
        label = spec.label if name == "MB/s" else f"{spec.label} {name}"
        if name == "MB/s":
            label += " MB/s"
        rows.append(
            TableRow(label, higher, values, dict(cpu), _rounds_ahead(results, name, higher))
        )
    return rows


def _rounds_ahead(
    results: dict[str, list[Measurement]], name: str, higher: bool
) -> tuple[int, int] | None:
    """Of the rounds where both brokers have `name`, how many odradek did better in."""
    pairs = [
        (a.metrics[name], b.metrics[name])
        for a, b in zip(results.get(ODRADEK, []), results.get(KAFKA, []), strict=False)
        if name in a.metrics
        and name in b.metrics
        and not (math.isnan(a.metrics[name]) or math.isnan(b.metrics[name]))
    ]
    if not pairs:
        return None
    return sum(1 for a, b in pairs if (a >= b if higher else a <= b)), len(pairs)


def specs(opts: argparse.Namespace) -> list[Spec]:
    tools = [t for t in opts.tools.split(",") if t]
    out: list[Spec] = []
    for tool in tools:
        for size in opts.sizes:
            for parts in opts.partitions:
                for acks in ACKS:
                    out.append(Spec("produce", tool, size, parts, acks))
                out.append(Spec("consume", tool, size, parts, "1"))
    if "native" in tools:
        out += [Spec("rate", "native", RATE_SIZE, 1, "all", r) for r in opts.rates]
    if opts.e2e_records:
        out.append(Spec("e2e", "java", RATE_SIZE, 1, "1"))
        out.append(Spec("e2e_us", "python", RATE_SIZE, 1, "1"))
    if opts.transactions:
        out.append(Spec("txn", "python"))
    return out


class Side:
    """One running broker: its bootstrap, pid, topics and what it has been given so far."""

    def __init__(self, name: str, bootstrap: str, pid: int) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.pid = pid
        self.topics = Topics(bootstrap)
        self.produced = 0
        self.rss_after_gb: float | None = None
        # the topic the last acks=1 produce of (tool, size, partitions) wrote: consume reads it
        self.written: dict[tuple[str, int, int], tuple[str, int]] = {}


def _records(opts: argparse.Namespace, spec: Spec) -> int:
    mb = opts.java_mb if spec.tool == "java" else opts.mb
    return max(1000, int(mb * 1e6 / spec.size))


def measure(side: Side, spec: Spec, opts: argparse.Namespace) -> Measurement:
    """Run `spec` once against `side`; broker CPU from /proc/PID/stat around it."""
    timeout = float(opts.phase_timeout)
    topic = ""
    if spec.kind != "txn" and spec.kind != "consume":
        topic = topic_name(spec.kind)
        side.topics.create(topic, spec.partitions, 1)
    if opts.warm and spec.kind == "produce":
        falloff.warm(tempfile.gettempdir(), _records(opts, spec) * spec.size * 11 // 10)
    cpu0 = procstat.cpu_seconds(side.pid)
    metrics: dict[str, float] = {}
    moved = 0
    if spec.kind == "produce":
        records = _records(opts, spec)
        if spec.tool == "native":
            settings = ClientSettings(
                side.bootstrap, spec.partitions, acks=spec.acks, phase_timeout_s=timeout
            )
            r = native.produce(settings, topic, spec.size, records)
            metrics["MB/s"] = r.value_bytes / 1e6 / r.elapsed_s
            moved = r.value_bytes
        else:
            p = kafka_proc.producer_perf(
                side.bootstrap, topic, spec.size, records, spec.acks, timeout
            )
            metrics["MB/s"] = p.mb_per_s
            moved = p.records * spec.size
        if spec.acks == "1":
            side.written[(spec.tool, spec.size, spec.partitions)] = (topic, records)
        side.produced += moved
    elif spec.kind == "consume":
        topic, records = side.written[(spec.tool, spec.size, spec.partitions)]
        if spec.tool == "native":
            settings = ClientSettings(side.bootstrap, spec.partitions, phase_timeout_s=timeout)
            r = native.consume(settings, topic, records)
            metrics["MB/s"] = r.measured_bytes / 1e6 / r.elapsed_s
            moved = r.value_bytes
        else:
            p = kafka_proc.consumer_perf(side.bootstrap, topic, records, timeout)
            metrics["MB/s"] = p.mb_per_s
            moved = p.records * spec.size
    elif spec.kind == "rate":
        records = max(1, int(spec.rate_mb * 1e6 * opts.rate_seconds / spec.size))
        settings = ClientSettings(
            side.bootstrap, 1, acks="all", linger_ms=1, phase_timeout_s=timeout
        )
        r = native.produce(settings, topic, spec.size, records, rate=spec.rate_mb * 1e6)
        metrics.update(
            {"p50 ms": r.p50_ms or math.nan, "p99 ms": r.p99_ms or math.nan}
            | {"p99.9 ms": r.p999_ms or math.nan}
        )
        moved = r.value_bytes
        side.produced += moved
    elif spec.kind == "e2e_us":
        lat_ms = [us / 1000 for us in e2e_us.measure(side.bootstrap, opts.e2e_records, topic)]
        p50, p99, p999 = e2e_us.percentiles(lat_ms)
        metrics.update({"p50 ms": p50, "p99 ms": p99, "p99.9 ms": p999})
        moved = opts.e2e_records * spec.size
    elif spec.kind == "e2e":
        p = kafka_proc.end_to_end(side.bootstrap, topic, opts.e2e_records, spec.size, "1", timeout)
        metrics.update({"p50 ms": p.p50_ms or 0.0, "p99 ms": p.p99_ms or 0.0})
        metrics["p99.9 ms"] = p.p999_ms or 0.0
        moved = opts.e2e_records * spec.size
    else:
        t = txn.run(side.bootstrap, opts.transactions, 1, 1)
        metrics["commit p50 ms"] = t.pct(t.commit_ms, 0.5)
        metrics["commit p99 ms"] = t.pct(t.commit_ms, 0.99)
    cpu = procstat.cpu_seconds(side.pid) - cpu0
    if side.rss_after_gb is None and side.produced >= ONE_GB:
        side.rss_after_gb = procstat.memory_mb(side.pid)[0]
    return Measurement(metrics, cpu, moved)


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def run(opts: argparse.Namespace, out: Callable[[str], None] = print) -> list[TableRow]:
    """Start both brokers, interleave every spec over them `opts.repeat` times, print the
    table and the start-up / memory rows; both brokers are stopped whatever happens."""
    load_start = _loadavg()
    odradek_proc = OdradekProcess()
    kafka = kafka_proc.KafkaProcess()
    rows: list[TableRow] = []
    try:
        t_od = odradek_proc.start()
        t_ka = kafka.start()
        time.sleep(opts.settle_seconds)  # both idle before their idle RSS is read
        idle = {
            ODRADEK: procstat.memory_mb(odradek_proc.pid)[0],
            KAFKA: procstat.memory_mb(kafka.pid)[0],
        }
        sides = {
            ODRADEK: Side(ODRADEK, odradek_proc.bootstrap, odradek_proc.pid),
            KAFKA: Side(KAFKA, kafka.bootstrap, kafka.pid),
        }
        all_specs = specs(opts)
        results: dict[Spec, dict[str, list[Measurement]]] = {
            s: {b: [] for b in BROKERS} for s in all_specs
        }
        for rnd in range(opts.repeat):
            for i, spec in enumerate(all_specs):
                # who goes first alternates from row to row and, for a row, from round to round
                order = BROKERS if (i + rnd) % 2 == 0 else BROKERS[::-1]
                for broker in order:
                    m = measure(sides[broker], spec, opts)
                    results[spec][broker].append(m)
                    shown = ", ".join(f"{k} {v:,.2f}" for k, v in m.metrics.items())
                    print(
                        f"bench: {broker:7} {spec.label}: {shown}, broker CPU {m.cpu_s:.2f} s "
                        f"(load {_loadavg()})",
                        file=sys.stderr,
                        flush=True,
                    )
        for spec in all_specs:
            rows += table_rows(spec, results[spec])
        rows.append(
            TableRow(
                "start to first ApiVersions answer ms",
                False,
                {ODRADEK: t_od.api_versions_ms, KAFKA: t_ka.api_versions_ms},
            )
        )
        rows.append(TableRow("idle RSS MB", False, dict(idle)))
        rows.append(
            TableRow(
                "RSS after 1 GB produced MB",
                False,
                {b: sides[b].rss_after_gb for b in BROKERS},
            )
        )
        rows.append(
            TableRow(
                "RSS at the end MB",
                False,
                {
                    ODRADEK: procstat.memory_mb(odradek_proc.pid)[0],
                    KAFKA: procstat.memory_mb(kafka.pid)[0],
                },
            )
        )
        out(render_table(rows))
        out("")
        out(
            f"odradek serve (this checkout) and Apache Kafka {kafka_proc.KAFKA_VERSION}.0 "
            f"(KRaft combined, -Xmx1G -Xms1G, G1, default server.properties; kafka-storage "
            f"format took {kafka.format_ms or 0:.0f} ms before the start), both on 127.0.0.1, "
            f"{os.cpu_count()} CPUs; {opts.repeat} round(s), medians; native driver "
            f"{native.version()}, {opts.mb:g} MB per native row, {opts.java_mb:g} MB per "
            f"Kafka-tool row; load average (1, 5, 15 min) {load_start} at the start, "
            f"{_loadavg()} at the end. Ratio: odradek / Kafka (MB/s: higher is better; ms and "
            "MB: lower is better)."
        )
        for side in sides.values():
            side.topics.delete_created()
    finally:
        odradek_proc.stop()
        kafka.stop()
    return rows


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench --against kafka", description=__doc__)
    p.add_argument("--repeat", type=int, default=2, help="rounds of every row (default 2)")
    p.add_argument("--mb", type=float, default=500.0, help="MB of values per native row")
    p.add_argument("--java-mb", type=float, default=200.0, help="MB per Kafka-tool row")
    p.add_argument("--tools", default="native,java", help="native,java (default both)")
    p.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), default=SIZES)
    p.add_argument(
        "--partitions", type=lambda s: tuple(int(x) for x in s.split(",")), default=PARTITIONS
    )
    p.add_argument(
        "--rates", type=lambda s: tuple(float(x) for x in s.split(",") if x), default=RATES_MB
    )
    p.add_argument("--rate-seconds", type=float, default=3.0)
    p.add_argument("--e2e-records", type=int, default=2000, help="0 leaves the row out")
    p.add_argument("--transactions", type=int, default=300, help="0 leaves the row out")
    p.add_argument("--phase-timeout", type=float, default=300.0)
    p.add_argument("--settle-seconds", type=float, default=2.0)
    p.add_argument(
        "--rf3",
        action="store_true",
        help="only RF=3 against RF=1, acks=all, on three processes of each broker "
        "(bench.against_rf3; --mb and --repeat apply)",
    )
    p.add_argument(
        "--scale",
        action="store_true",
        help="only the scale rows (bench.against_scale): start, RSS and Metadata with "
        "--topics x --scale-partitions partitions, --connections idle connections",
    )
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--scale-partitions", type=int, default=10)
    p.add_argument("--metadata-runs", type=int, default=10)
    p.add_argument("--connections", type=int, default=2000)
    p.add_argument(
        "--warm",
        action="store_true",
        help="before each produce run, write and delete a file of the bytes it will write "
        "(times the replication factor), so that both brokers take pages the guest has just "
        "freed: on a VM whose balloon reports free pages (bench.falloff) the first write to a "
        "page freed long ago costs the host's fault and zeroing, whichever broker meets it",
    )
    p.add_argument("--kafka-first", action="store_true", help="--rf3: Kafka's cluster first")
    p.add_argument("--rf3-only", choices=("odradek", "kafka"), help="--rf3: one broker only")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a minimal run: one round, 1 KiB, 1 partition, native only, 20 MB a row",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    if opts.quick:
        opts.repeat, opts.mb, opts.tools = 1, 20.0, "native"
        opts.sizes, opts.partitions, opts.rates = (1024,), (1,), ()
        opts.e2e_records, opts.transactions, opts.settle_seconds = 0, 0, 0.0
    try:
        if opts.scale:
            from bench import against_scale

            opts.partitions = opts.scale_partitions
            return 0 if against_scale.run(opts) else 1
        if opts.rf3:
            from bench import against_rf3

            return 0 if against_rf3.run(opts) else 1
        rows = run(opts)
    except (
        BrokerStartError,
        kafka_proc.ToolError,
        native.NativeUnavailable,
        txn.TxnBenchError,
        OSError,
        RuntimeError,
    ) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    return 0 if rows else 1
