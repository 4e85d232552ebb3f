"""`python -m bench`: produce then consume N records per size and print the results table.

By default the broker is odradek itself, started as a child process on a free loopback port with
a temporary data directory (bench.broker_proc); `--bootstrap HOST:PORT` measures any other broker
instead (its CPU and RSS only with `--broker-pid`). Exit status 0 when every record produced was
delivered and consumed back, 1 when not, 2 when the run could not be carried out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import confluent_kafka

from bench import ceilings, native, quota, rawfetch, rebalance
from bench.broker_proc import REPO_ROOT, BrokerStartError, OdradekProcess
from bench.probe import ProbeError
from bench.procstat import ProcessMeter, SelfMeter, Usage, memory_mb
from bench.report import Report, Row, render
from bench.topics import TopicError, Topics, topic_name
from bench.workloads import ClientSettings, PhaseError, PhaseResult, consume, produce

DEFAULT_RECORDS = 1_000_000
DEFAULT_SIZES = (100, 1024)
DEFAULT_TLS_SIZES = (1024,)  # rows over an SSL listener of the same broker, next to plaintext
# Four partitions: enough for librdkafka to fill several batches per produce request and for a
# fetch to return several partitions' data, few enough that one broker's per-partition work does
# not dominate. The table says which count was used.
DEFAULT_PARTITIONS = 4
LARGE_BYTES = 1_000_000_000  # "about 1 GB written" for the RSS finding
LARGE_SIZE = 1024
RATE_NOTE = (
    "MB = 10^6 bytes of values; produce rates run from the first produce() to the last "
    "delivery report; consume rates from the first fetched batch to the last record (librdkafka "
    "waits ~0.5 s after assign() before its first fetch)"
)
# The native driver (bench/native, librdkafka's C API) measures the broker; its rows come first
# and use one partition, as issue 17's targets do. The Python-client rows follow as a second set.
DRIVERS = ("native", "python")
NATIVE_RECORDS = 2_000_000
NATIVE_PARTITIONS = 1
RATE_MB = 50.0  # offered load of the fixed-rate latency rows, MB/s of values
RATE_SECONDS = 5.0
RATE_SIZE = 1024
# linger.ms of the fixed-rate rows: librdkafka's default 5 ms alone would put the p50 at ~5 ms;
# 0 sends a request per message or two, whose per-request cost then dominates
RATE_LINGER_MS = 1
FLUSH_RECORDS = 500_000  # the flush.messages=1 row at full speed
STARTUP_RUNS = 2  # fresh brokers started only to time start-up, besides the benchmark's own


@dataclass(frozen=True, slots=True)
class Options:
    records: int
    sizes: tuple[int, ...]
    bootstrap: str | None
    broker_pid: int | None
    partitions: int
    replication_factor: int
    brokers: int
    acks: str
    compression: str
    linger_ms: int
    batch_size: int
    large: bool
    startup_runs: int
    phase_timeout_s: float
    profile_broker: Path | None
    broker_overrides: dict[str, str]
    keep_data: bool
    json_path: Path | None
    quota_rate: float = 0.0  # > 0: the throttled-producer row (bench/quota.py), bytes/s
    quota_periods: int = 3
    tls_sizes: tuple[int, ...] = ()  # sizes also produced and consumed over TLS
    rebalance: bool = False  # the rebalance rows (bench/rebalance.py): classic vs KIP-848
    drivers: tuple[str, ...] = DRIVERS
    native_records: int = NATIVE_RECORDS
    native_partitions: int = NATIVE_PARTITIONS
    rate_mb: float = RATE_MB  # 0: no fixed-rate rows
    rate_seconds: float = RATE_SECONDS
    rate_linger_ms: int = RATE_LINGER_MS
    flush_rows: bool = True  # acks=all with flush.messages=1 beside the page-cache default
    ceilings: bool = True


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers, got {text!r}") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError("sizes must be positive")
    return sizes


def _tls_sizes(text: str) -> tuple[int, ...]:
    if text.strip().lower() in ("", "none", "0"):
        return ()
    return _sizes(text)


def _drivers(text: str) -> tuple[str, ...]:
    drivers = tuple(part.strip() for part in text.split(",") if part.strip())
    if not drivers or any(d not in DRIVERS for d in drivers):
        raise argparse.ArgumentTypeError(f"drivers are {', '.join(DRIVERS)}, got {text!r}")
    return drivers


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--records",
        type=_positive,
        default=DEFAULT_RECORDS,
        help="records per size (default %(default)s)",
    )
    p.add_argument(
        "--sizes",
        type=_sizes,
        default=DEFAULT_SIZES,
        help="value sizes in bytes, comma-separated (default 100,1024)",
    )
    p.add_argument(
        "--bootstrap", metavar="HOST:PORT", help="benchmark this broker instead of starting odradek"
    )
    p.add_argument(
        "--broker-pid",
        type=int,
        help="with --bootstrap: the broker's pid, for "
        "its CPU and RSS columns (a JVM broker's pid for Kafka)",
    )
    p.add_argument(
        "--partitions",
        type=_positive,
        default=DEFAULT_PARTITIONS,
        help="partitions per benchmark topic (default %(default)s)",
    )
    p.add_argument("--replication-factor", type=_positive, default=1)
    p.add_argument(
        "--brokers",
        type=_positive,
        default=1,
        help="spawn `odradek cluster --brokers N` (one process) instead of one broker; "
        "use with --replication-factor",
    )
    p.add_argument("--acks", choices=("0", "1", "all"), default="all")
    p.add_argument(
        "--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none"
    )
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=_positive, default=1_000_000)
    p.add_argument(
        "--large",
        action="store_true",
        help=f"make sure about 1 GB is written (an extra produce of {LARGE_SIZE} B "
        "records if the workloads wrote less) and report the broker's RSS after it",
    )
    p.add_argument(
        "--startup-runs",
        type=int,
        default=STARTUP_RUNS,
        help="extra fresh brokers started only to time start-up (default "
        "%(default)s; the benchmark's own broker is timed too)",
    )
    p.add_argument(
        "--phase-timeout",
        type=float,
        default=900.0,
        help="seconds any one phase may take (default %(default)s)",
    )
    p.add_argument(
        "--profile-broker",
        type=Path,
        metavar="FILE",
        help="run the broker under cProfile, writing FILE when it stops",
    )
    p.add_argument(
        "--broker-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra `--override` for the odradek broker (repeatable)",
    )
    p.add_argument("--keep-data", action="store_true", help="keep the broker's data directory")
    p.add_argument(
        "--quota-rate",
        type=float,
        default=0.0,
        metavar="BYTES_PER_S",
        help="also run a producer over a producer_byte_rate quota of this many bytes/s and "
        "report the rate it achieves once throttled (default: off)",
    )
    p.add_argument(
        "--quota-periods",
        type=_positive,
        default=3,
        help="11 s quota periods the throttled producer runs for (default %(default)s)",
    )
    p.add_argument(
        "--tls-sizes",
        type=_tls_sizes,
        default=DEFAULT_TLS_SIZES,
        metavar="SIZES",
        help="value sizes also produced and consumed over an SSL listener of the spawned "
        "broker (throwaway CA), rows marked TLS (default 1024; none: no TLS rows)",
    )
    p.add_argument(
        "--rebalance",
        action="store_true",
        help="also time a fourth member joining a group of three, classic vs KIP-848 "
        "(group.protocol=consumer), in the notes",
    )
    p.add_argument(
        "--drivers",
        type=_drivers,
        default=DRIVERS,
        help="clients whose rows to run, in order: native (bench/native/odradek_perf, "
        "librdkafka's C API) and python (confluent-kafka) (default native,python)",
    )
    p.add_argument(
        "--native-records",
        type=_positive,
        default=NATIVE_RECORDS,
        help="records per size for the native rows (default %(default)s)",
    )
    p.add_argument(
        "--native-partitions",
        type=_positive,
        default=NATIVE_PARTITIONS,
        help="partitions of the native rows' topics (default %(default)s)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=RATE_MB,
        metavar="MB_PER_S",
        help=f"offered load of the native fixed-rate latency rows ({RATE_SIZE} B values; "
        "default %(default)s, 0: none)",
    )
    p.add_argument(
        "--rate-seconds",
        type=float,
        default=RATE_SECONDS,
        help="how long each fixed-rate row offers its load (default %(default)s)",
    )
    p.add_argument(
        "--rate-linger-ms",
        type=int,
        default=RATE_LINGER_MS,
        help="linger.ms of the fixed-rate rows (default %(default)s)",
    )
    p.add_argument(
        "--no-flush-rows",
        action="store_true",
        help="leave out the native acks=all flush.messages=1 rows",
    )
    p.add_argument(
        "--no-ceilings",
        action="store_true",
        help="leave out the machine's ceilings (loopback TCP, sendfile, sequential write)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    return p


def parse_options(argv: list[str] | None) -> Options:
    parser = build_parser()
    a = parser.parse_args(argv)
    overrides = {}
    for item in a.broker_override:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--broker-override needs KEY=VALUE, got {item!r}")
        overrides[key] = value
    if a.broker_pid is not None and a.bootstrap is None:
        parser.error("--broker-pid goes with --bootstrap")
    return Options(
        records=a.records,
        sizes=a.sizes,
        bootstrap=a.bootstrap,
        broker_pid=a.broker_pid,
        partitions=a.partitions,
        replication_factor=a.replication_factor,
        brokers=a.brokers,
        acks=a.acks,
        compression=a.compression,
        linger_ms=a.linger_ms,
        batch_size=a.batch_size,
        large=a.large,
        startup_runs=max(0, a.startup_runs),
        phase_timeout_s=a.phase_timeout,
        profile_broker=a.profile_broker,
        broker_overrides=overrides,
        keep_data=a.keep_data,
        json_path=a.json,
        quota_rate=max(0.0, a.quota_rate),
        quota_periods=a.quota_periods,
        tls_sizes=a.tls_sizes,
        rebalance=a.rebalance,
        drivers=a.drivers,
        native_records=a.native_records,
        native_partitions=a.native_partitions,
        rate_mb=max(0.0, a.rate),
        rate_seconds=max(0.1, a.rate_seconds),
        rate_linger_ms=max(0, a.rate_linger_ms),
        flush_rows=not a.no_flush_rows,
        ceilings=not a.no_ceilings,
    )


def client_label() -> str:
    return f"confluent-kafka {confluent_kafka.__version__}"


RAW_LABEL = "raw Fetch v4 (Python, batch headers only)"


def native_label() -> str:
    return f"odradek_perf (C, {native.version()})"


def source_revision() -> str:
    """`git describe --always --dirty` of the odradek tree the spawned broker runs from."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _settings(opts: Options, broker: str) -> dict[str, object]:
    return {
        "broker": broker,
        "records": opts.records,
        "acks": opts.acks,
        "compression": opts.compression,
        "linger.ms": opts.linger_ms,
        "batch.size": opts.batch_size,
        "librdkafka": confluent_kafka.libversion()[0],
        "python": platform.python_version(),
        "cpus": os.cpu_count() or 0,
        # the 1-minute load average when the run started: above ~1.5 others share the cores
        "load": f"{os.getloadavg()[0]:.2f}",
    }


@dataclass(frozen=True, slots=True)
class Measured:
    """A phase's result with the CPU used meanwhile by the broker, this client and the host."""

    result: PhaseResult
    usage: Usage | None
    client_cpu_s: float
    host_cpu_s: float


class Bench:
    """Runs the workloads against one bootstrap address and fills a Report."""

    def __init__(
        self,
        opts: Options,
        bootstrap: str,
        broker_pid: int | None,
        report: Report,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.opts = opts
        self.pid = broker_pid
        self.report = report
        self.client = ClientSettings(
            bootstrap=bootstrap,
            partitions=opts.partitions,
            acks=opts.acks,
            compression=opts.compression,
            linger_ms=opts.linger_ms,
            batch_size=opts.batch_size,
            phase_timeout_s=opts.phase_timeout_s,
        )
        self.topics = Topics(bootstrap)
        self.native_client = replace(self.client, partitions=opts.native_partitions)
        self.native_ok = "native" in opts.drivers
        # (bootstrap, CA file) of the broker's SSL listener, for the TLS rows
        self.tls_client = None
        if tls is not None:
            security = (("security.protocol", "SSL"), ("ssl.ca.location", tls[1]))
            self.tls_client = replace(self.client, bootstrap=tls[0], security=security)
        self.written = 0
        self._lifetime_peak_noted = False

    def run(self) -> None:
        if "native" in self.opts.drivers:
            self.native_workloads()
        if "python" in self.opts.drivers:
            for size in self.opts.sizes:
                self.workload(size, self.opts.records, consume_too=True)
            if self.tls_client is not None:
                for size in self.opts.tls_sizes:
                    self.workload(size, self.opts.records, consume_too=True, tls=True)
        if self.opts.large and self.report.rss_after_written is None:
            records = math.ceil(LARGE_BYTES / LARGE_SIZE)
            driver = "native" if self.native_ok else "python"
            self.workload(LARGE_SIZE, records, consume_too=False, label="(--large)", driver=driver)
        if self.opts.quota_rate > 0:
            self.throttled_workload(self.opts.quota_rate, self.opts.quota_periods)
        if self.opts.rebalance:
            print("bench: rebalance, classic vs KIP-848 ...", file=sys.stderr, flush=True)
            self.report.notes.extend(rebalance.notes(self.client.bootstrap))
        if self.report.rss_after_written is None and self.pid is not None:
            self._note_rss(final=True)

    def native_workloads(self) -> None:
        """The native driver's rows: each size produced and consumed, then produce latency at
        a fixed offered load, then acks=all with flush.messages=1 (fsync) beside it."""
        try:
            native.ensure_built()
        except native.NativeUnavailable as exc:
            self.native_ok = False
            self.report.notes.append(f"no native rows: {exc}")
            print(f"bench: no native rows: {exc}", file=sys.stderr, flush=True)
            return
        opts = self.opts
        for size in opts.sizes:
            self.workload(size, opts.native_records, consume_too=True, driver="native")
        if opts.rate_mb <= 0:
            return
        rate = opts.rate_mb * 1e6
        records = max(1, math.ceil(rate * opts.rate_seconds / RATE_SIZE))
        at = f"at {opts.rate_mb:g} MB/s offered, linger {opts.rate_linger_ms} ms"
        paced = replace(self.native_client, linger_ms=opts.rate_linger_ms)
        self.workload(
            RATE_SIZE,
            records,
            consume_too=False,
            label=at,
            driver="native",
            rate=rate,
            client=paced,
        )
        if not opts.flush_rows:
            return
        fsync = {"flush.messages": "1"}
        flush_client = replace(self.native_client, acks="all")
        self.workload(
            RATE_SIZE,
            min(FLUSH_RECORDS, opts.native_records),
            consume_too=False,
            label="acks=all flush.messages=1",
            driver="native",
            topic_config=fsync,
            client=flush_client,
        )
        self.workload(
            RATE_SIZE,
            records,
            consume_too=False,
            label=f"acks=all flush.messages=1 {at}",
            driver="native",
            rate=rate,
            topic_config=fsync,
            client=replace(paced, acks="all"),
        )

    def throttled_workload(self, rate: float, periods: int) -> None:
        """A producer over a producer_byte_rate quota: the rate it gets once throttled."""
        topic = topic_name("quota")
        self.topics.create(topic, self.opts.partitions, self.opts.replication_factor)
        name = f"produce {quota.VALUE_SIZE} B, producer_byte_rate={rate / 1e6:g} MB/s"
        quota.set_quota(self.client.bootstrap, quota.CLIENT_ID, rate)
        largest: list[int] = []

        def phase() -> PhaseResult:
            result, throttle_ms = quota.throttled_produce(self.client, topic, rate, periods)
            largest.append(throttle_ms)
            return result

        try:
            m = self._measure(name, phase)
        finally:
            quota.set_quota(self.client.bootstrap, quota.CLIENT_ID, None)
        self.report.rows.append(self._row(name, m, m.result.records))
        achieved = m.result.measured_bytes / m.result.elapsed_s if m.result.elapsed_s else 0.0
        self.report.notes.append(
            f"{name}: {achieved / 1e6:.2f} MB/s achieved against the quota "
            f"({100 * achieved / rate:.0f}%) over {m.result.elapsed_s:.1f} s ({periods} quota "
            f"periods of {quota.PERIOD_S:g} s: a burst of (quota.window.num - 1) windows, then "
            f"throttled); largest throttle_time_ms {largest[0] if largest else 0}"
        )

    def workload(
        self,
        size: int,
        records: int,
        *,
        consume_too: bool,
        label: str = "",
        tls: bool = False,
        driver: str = "python",
        rate: float = 0.0,
        topic_config: dict[str, str] | None = None,
        client: ClientSettings | None = None,
    ) -> None:
        if client is None:
            if driver == "native":
                client = self.native_client
            else:
                client = self.tls_client if tls and self.tls_client is not None else self.client
        if tls:
            label = f"TLS {label}".rstrip()
        topic = topic_name(f"{size}b{'-tls' if tls else ''}")
        self.topics.create(
            topic, client.partitions, self.opts.replication_factor, config=topic_config
        )
        name = f"produce {size} B {label}".rstrip()
        if driver == "native":
            do_produce: Callable[[], PhaseResult] = lambda: native.produce(  # noqa: E731
                client, topic, size, records, rate
            )
        else:
            do_produce = lambda: produce(client, topic, size, records)  # noqa: E731
        produced = self._measure(name, do_produce)
        self.report.rows.append(self._row(name, produced, records, client, driver))
        self.written += produced.result.value_bytes
        if self.report.rss_after_written is None and self.written >= LARGE_BYTES:
            usage = produced.usage
            self._note_rss(final=False, phase_peak=usage.peak_rss_mb if usage else None)
        if consume_too:
            name = f"consume {size} B {'TLS' if tls else ''}".rstrip()
            delivered = produced.result.records
            if driver == "native":
                do_consume: Callable[[], PhaseResult] = lambda: native.consume(  # noqa: E731
                    client, topic, delivered
                )
            else:
                do_consume = lambda: consume(client, topic, delivered)  # noqa: E731
            consumed = self._measure(name, do_consume)
            self.report.rows.append(self._row(name, consumed, records, client, driver))
            if driver == "native" and not tls:
                self.raw_fetch(size, topic, delivered, client)

    def raw_fetch(self, size: int, topic: str, records: int, client: ClientSettings) -> None:
        """The same records read by bench.rawfetch (no per-record client work): the broker's
        serving rate, which the librdkafka row may hide behind its own CPU."""
        name = f"consume {size} B raw fetch"
        wire: list[int] = []

        def phase() -> PhaseResult:
            result, nbytes = rawfetch.consume(
                client.bootstrap, topic, client.partitions, records, client.phase_timeout_s
            )
            wire.append(nbytes)
            # in values, as the other rows (the batches' framing is left out)
            return replace(
                result,
                value_bytes=result.records * size,
                measured_bytes=result.measured_records * size,
            )

        m = self._measure(name, phase)
        self.report.rows.append(self._row(name, m, records, client, "raw"))

    def _measure(self, name: str, phase: Callable[[], PhaseResult]) -> Measured:
        meter = ProcessMeter(self.pid) if self.pid is not None else None
        me = SelfMeter()
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        if meter is not None:
            meter.begin()
        me.begin()
        result = phase()
        client_cpu, host_cpu = me.end()
        usage = meter.end() if meter is not None else None
        if usage is not None and not usage.peak_is_per_phase and not self._lifetime_peak_noted:
            self._lifetime_peak_noted = True
            self.report.notes.append(
                "peak RSS is the broker's lifetime peak (VmHWM could not be reset per phase)"
            )
        print(
            f"bench: {name}: {result.records:,} records in {result.elapsed_s:.2f} s",
            file=sys.stderr,
            flush=True,
        )
        return Measured(result, usage, client_cpu, host_cpu)

    def _row(
        self,
        name: str,
        m: Measured,
        expected: int,
        client: ClientSettings | None = None,
        driver: str = "python",
    ) -> Row:
        result, usage = m.result, m.usage
        if result.first_record_s is not None:
            self.report.notes.append(
                f"{name}: first records {result.first_record_s * 1000:.0f} ms after assign()"
            )
        if result.client_errors:
            self.report.notes.append(
                f"{name}: {result.client_errors} client-level errors (see stderr)"
            )
        broker_cpu = usage.cpu_s if usage is not None else 0.0
        return Row(
            workload=name,
            client=(
                native_label()
                if driver == "native"
                else RAW_LABEL
                if driver == "raw"
                else client_label()
            ),
            partitions=client.partitions if client is not None else self.opts.partitions,
            records=result.records,
            expected=expected,
            elapsed_s=result.elapsed_s,
            value_bytes=result.value_bytes,
            measured_records=result.measured_records,
            measured_bytes=result.measured_bytes,
            errors=result.errors,
            p50_ms=result.p50_ms,
            p99_ms=result.p99_ms,
            p999_ms=result.p999_ms,
            broker_cpu_s=usage.cpu_s if usage else None,
            # over the rate interval, not the phase's wall time: a consume phase also holds
            # librdkafka's ~0.5 s start, which would flatter the broker
            broker_cpu_percent=(
                100.0 * usage.cpu_s / result.elapsed_s if usage and result.elapsed_s > 0 else None
            ),
            broker_peak_rss_mb=usage.peak_rss_mb if usage else None,
            client_cpu_s=m.client_cpu_s,
            others_cpu_s=max(0.0, m.host_cpu_s - m.client_cpu_s - broker_cpu),
        )

    def _note_rss(self, *, final: bool, phase_peak: float | None = None) -> None:
        assert self.pid is not None
        rss, hwm = memory_mb(self.pid)
        if final:
            self.report.notes.append(
                f"broker RSS at the end, after {self.written / 1e9:.2f} GB written (less than "
                f"1 GB: use --large): {rss:.1f} MB"
            )
        else:
            peak = phase_peak if phase_peak is not None else hwm
            self.report.rss_after_written = (self.written / 1e9, rss, peak)


def _fmt_target(what: str, value: float | None, goal: str, met: bool | None, unit: str) -> str:
    if value is None or met is None:
        return f"{what} {goal}: not measured"
    digits = 1 if unit in ("ms", "MB") else 0
    return f"{what} {goal}: {value:,.{digits}f} {unit}, {'met' if met else 'NOT met'}"


def evaluate_targets(report: Report) -> list[str]:
    """Issue 17's single-broker targets against the native rows (empty without them)."""
    rows = {
        r.workload: r
        for r in report.rows
        if r.client.startswith("odradek_perf") or r.client == RAW_LABEL
    }
    if not rows:
        return []

    def rate(name: str, attr: str) -> float | None:
        row = rows.get(name)
        if row is None or not row.complete:
            return None
        return float(getattr(row, attr))

    out = []
    consume = rate("consume 1024 B", "mb_per_s")
    raw = rate("consume 1024 B raw fetch", "mb_per_s")
    if raw is not None:
        out.append(
            _fmt_target("consume 1 KiB, raw fetch", raw, ">= 2,000 MB/s", raw >= 2000, "MB/s")
        )
    out.append(
        _fmt_target(
            "consume 1 KiB, librdkafka",
            consume,
            ">= 2,000 MB/s",
            None if consume is None else consume >= 2000,
            "MB/s",
        )
    )
    prod = rate("produce 1024 B", "mb_per_s")
    out.append(
        _fmt_target(
            "produce 1 KiB", prod, ">= 1,000 MB/s", None if prod is None else prod >= 1000, "MB/s"
        )
    )
    small = rate("produce 100 B", "messages_per_s")
    out.append(
        _fmt_target(
            "produce 100 B",
            small,
            ">= 3,000,000 msg/s",
            None if small is None else small >= 3e6,
            "msg/s",
        )
    )
    fixed = next((r for n, r in rows.items() if n.startswith("produce 1024 B at ")), None)
    p99 = fixed.p99_ms if fixed is not None and fixed.complete else None
    label = fixed.workload.removeprefix("produce 1024 B ") if fixed is not None else "at 50 MB/s"
    out.append(
        _fmt_target(f"produce p99 {label}", p99, "< 5 ms", None if p99 is None else p99 < 5, "ms")
    )
    if report.rss_after_written is not None:
        gb, rss, _peak = report.rss_after_written
        out.append(
            _fmt_target(f"broker RSS after {gb:.2f} GB produced", rss, "< 100 MB", rss < 100, "MB")
        )
    return out


BUSY_LOAD = 1.5  # a 1-minute load average above this: others share the cores


def _load_note() -> list[str]:
    load = os.getloadavg()[0]
    if load <= BUSY_LOAD:
        return []
    return [
        f"load average {load:.2f} at the start (above {BUSY_LOAD:g}): other processes share "
        f"the {os.cpu_count() or 0} cores, so rates are low and latencies high (see others CPU "
        "s, and the ceilings, measured under the same load)"
    ]


def run(opts: Options) -> Report:
    busy = _load_note()
    ceiling_lines: list[str] = []
    if opts.ceilings:
        print("bench: the machine's ceilings ...", file=sys.stderr, flush=True)
        ceiling_lines = ceilings.lines()
    if opts.bootstrap is not None:
        report = Report(
            settings=_settings(opts, f"external {opts.bootstrap}"), notes=[RATE_NOTE, *busy]
        )
        report.ceilings = ceiling_lines
        bench = Bench(opts, opts.bootstrap, opts.broker_pid, report)
        try:
            bench.run()
        finally:
            bench.topics.delete_created()
        return report

    report = Report(settings=_settings(opts, "odradek (spawned)"), notes=[RATE_NOTE, *busy])
    report.ceilings = ceiling_lines
    for _ in range(opts.startup_runs):
        with OdradekProcess(overrides=opts.broker_overrides) as fresh:
            timing = fresh.start()
        report.startup_api_versions_ms.append(timing.api_versions_ms)
        report.startup_ready_line_ms.append(timing.ready_line_ms)
    tls = bool(opts.tls_sizes) and opts.brokers == 1 and "python" in opts.drivers
    if opts.tls_sizes and not tls and "python" in opts.drivers:
        report.notes.append("no TLS rows: a TLS listener is served by a single spawned broker")
    broker = OdradekProcess(
        overrides=opts.broker_overrides,
        profile_to=opts.profile_broker,
        keep_data=opts.keep_data,
        brokers=opts.brokers,
        tls=tls,
    )
    try:
        timing = broker.start()
        if opts.profile_broker is None:  # cProfile slows the start; keep it out of the numbers
            report.startup_api_versions_ms.append(timing.api_versions_ms)
            report.startup_ready_line_ms.append(timing.ready_line_ms)
        report.settings["broker"] = (
            f"odradek {source_revision()} (spawned, {broker.bootstrap}, "
            + (
                "python -m odradek serve)"
                if opts.brokers == 1
                else f"odradek cluster --brokers {opts.brokers}, one process)"
            )
        )
        tls_listener = None
        if broker.tls_bootstrap is not None and broker.tls_ca is not None:
            tls_listener = (broker.tls_bootstrap, broker.tls_ca)
            report.notes.append(
                "TLS rows: the same broker's SSL listener (throwaway CA, EC P-256 certificate); "
                "fetches over TLS are copied through the TLS layer (no sendfile)"
            )
        Bench(opts, broker.bootstrap, broker.pid, report, tls_listener).run()
    except Exception:
        if not broker.alive():
            print(f"bench: broker output:\n{broker.output()}", file=sys.stderr)
        raise
    finally:
        code = broker.stop()
        if code not in (0, None):
            report.notes.append(f"broker exited with status {code}")
        if opts.keep_data:
            report.notes.append(f"broker data kept in {broker.data_dir}")
    if opts.brokers == 1:
        report.targets = evaluate_targets(report)
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if "--against" in args:  # `--against kafka`: odradek and Kafka side by side (bench.against)
        at = args.index("--against")
        target = args[at + 1] if at + 1 < len(args) else ""
        if target != "kafka":
            print(f"bench: --against {target!r}: only 'kafka' is known", file=sys.stderr)
            return 2
        from bench import against

        return against.main(args[:at] + args[at + 2 :])
    opts = parse_options(argv)
    try:
        report = run(opts)
    except (BrokerStartError, ProbeError, PhaseError, TopicError, OSError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    print(render(report), flush=True)
    if opts.json_path is not None:
        opts.json_path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return 0 if all(row.complete for row in report.rows) else 1
