"""Apache Kafka 4.4 started the way its own scripts start it, and Kafka's perf tools.

`KafkaProcess` writes Kafka's default `config/server.properties` (KRaft combined:
`process.roles=broker,controller`, 3 network and 8 I/O threads, 1 GiB segments, no flush
settings, so the OS writes the page cache back, as odradek's defaults do) with free loopback
ports and a temporary `log.dirs`, runs `kafka-storage format`, then `kafka.Kafka` with the JVM
flags of `bin/kafka-server-start.sh` + `bin/kafka-run-class.sh`: `-Xmx1G -Xms1G`, G1 with
MaxGCPauseMillis=20 and InitiatingHeapOccupancyPercent=35, the GC log and the JMX agent. The
jars are the reference broker's (`.cache/kafka-4.4.0`, compat_tests.reference.kafka_ref).

The tools (`org.apache.kafka.tools.ProducerPerformance`, `ConsumerPerformance`,
`EndToEndLatency`) run with the heap their `bin/kafka-*-perf-test.sh` scripts give them
(512 MiB) and the same G1 flags; `parse_producer_perf`, `parse_consumer_perf` and
`parse_end_to_end` read their output (the tools print MB as MiB: converted to 10^6 bytes).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.broker_proc import HOST, BrokerStartError, StartupTiming, free_port, with_nofile
from bench.probe import wait_for_api_versions
from compat_tests.reference.kafka_ref import classpath, java_binary, new_cluster_id

KAFKA_VERSION = "4.4"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
MIB = 1024 * 1024

# bin/kafka-run-class.sh: KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_JMX_OPTS; kafka-server-start.sh:
# KAFKA_HEAP_OPTS
SERVER_HEAP = ["-Xmx1G", "-Xms1G"]
TOOL_HEAP = ["-Xmx512M"]  # kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh
PERFORMANCE_OPTS = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]
JMX_OPTS = [
    "-Dcom.sun.management.jmxremote=true",
    "-Dcom.sun.management.jmxremote.authenticate=false",
    "-Dcom.sun.management.jmxremote.ssl=false",
]

# config/server.properties of the 4.x distribution, less its listeners / voters / log.dirs
DEFAULT_SERVER_PROPERTIES: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL"
    ),
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
}

_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


class KafkaProcess:
    """One Kafka 4.4 JVM in KRaft combined mode; a context manager that always stops it."""

    def __init__(
        self,
        overrides: dict[str, str] | None = None,
        *,
        node_id: int = 1,
        cluster_id: str | None = None,
        nofile: int | None = None,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
        self.port = free_port()
        self.controller_port = free_port()
        self.overrides = dict(overrides or {})
        # several nodes of one KRaft quorum share a cluster id and a `controller.quorum.voters`
        # (set through `overrides`); one node alone is its own quorum
        self.node_id = node_id
        self.cluster_id = cluster_id or new_cluster_id()
        self._spawned_at = 0.0
        self.classpath = classpath(KAFKA_VERSION)
        self.format_ms: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        # RLIMIT_NOFILE (soft and hard) of the broker, set in the child before the JVM runs:
        # Kafka's operations docs ask for 100,000 or more descriptors (one per segment and one
        # per connection); None inherits this process's limits
        self.nofile = nofile
        self.last_stop: tuple[float, int | None] | None = None  # (seconds, exit code) of restart

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("Kafka not started")
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def properties(self) -> dict[str, str]:
        return {
            **DEFAULT_SERVER_PROPERTIES,
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": str(self.dir / "data"),
            **self.overrides,
        }

    def _java(self, heap: list[str], main_class: str, *args: str) -> list[str]:
        log4j = self.dir / "log4j2.properties"
        return [
            java_binary(),
            *heap,
            *PERFORMANCE_OPTS,
            f"-Xlog:gc*:file={self.dir}/kafkaServer-gc.log:time,tags:filecount=10,filesize=100M",
            *JMX_OPTS,
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.dir}",
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]

    def start(self, timeout: float = READY_TIMEOUT_S) -> StartupTiming:
        """Format the log dir, spawn kafka.Kafka, time it to its first ApiVersions answer."""
        self.spawn(timeout)
        return self.wait_ready(timeout)

    def spawn(self, timeout: float = READY_TIMEOUT_S, fmt_dir: bool = True) -> None:
        """Format the log dir (unless `fmt_dir` is false: a restart on the same data) and spawn
        kafka.Kafka without waiting for it (the nodes of a quorum answer only once a majority
        of them runs)."""
        if not fmt_dir:
            self._popen()
            return
        config = self.dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.dir / "server.log"))
        began = time.perf_counter()
        fmt = subprocess.run(
            self._java(
                SERVER_HEAP,
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={self.cluster_id}",
                "-c",
                str(config),
            ),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if fmt.returncode != 0:
            raise BrokerStartError(f"kafka-storage format failed: {fmt.stderr.decode()[-2000:]}")
        self.format_ms = (time.perf_counter() - began) * 1000.0
        self._popen()

    def _popen(self) -> None:
        config = self.dir / "server.properties"
        with open(self.dir / "stdout.log", "ab") as out:
            self._spawned_at = time.perf_counter()
            self._proc = subprocess.Popen(
                self._limited(self._java(SERVER_HEAP, "kafka.Kafka", str(config))),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
            )

    def _limited(self, cmd: list[str]) -> list[str]:
        """`cmd` behind a Python trampoline that sets RLIMIT_NOFILE and execs it (same pid),
        as `ulimit -n` in the shell that runs kafka-server-start.sh would."""
        return with_nofile(cmd, self.nofile, sys.executable)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> StartupTiming:
        """Wait for the first ApiVersions answer of a spawned node (stops it on failure)."""
        try:
            answered_at = wait_for_api_versions(HOST, self.port, timeout=timeout, alive=self.alive)
        except Exception as exc:
            tail = self.log_tail()
            self.stop()
            raise BrokerStartError(f"Kafka did not start: {exc}\n{tail}") from exc
        ms = (answered_at - self._spawned_at) * 1000.0
        return StartupTiming(api_versions_ms=ms, ready_line_ms=ms)

    def log_tail(self, chars: int = 4000) -> str:
        parts = []
        for name in ("stdout.log", "server.log"):
            path = self.dir / name
            if path.exists():
                parts.append(path.read_text("utf-8", "replace")[-chars:])
        return "\n".join(parts)

    def restart(
        self, timeout: float = READY_TIMEOUT_S, stop_timeout: float = STOP_TIMEOUT_S
    ) -> StartupTiming:
        """A clean stop and a start on the same data and ports, timed to its first answer.
        A stop that outlasts `stop_timeout` ends in SIGKILL, and the next start then recovers
        every segment (with 10,000 partitions a clean shutdown takes minutes here)."""
        began = time.perf_counter()
        code = self.stop(stop_timeout, keep_data=True)
        self.last_stop = (time.perf_counter() - began, code)
        self.spawn(timeout, fmt_dir=False)
        return self.wait_ready(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT_S, keep_data: bool = False) -> int | None:
        """SIGTERM (a controlled shutdown), SIGKILL past `timeout`; removes the directory
        unless `keep_data`."""
        proc, self._proc = self._proc, None
        code: int | None = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
            code = proc.returncode
        if not keep_data:
            shutil.rmtree(self.dir, ignore_errors=True)
        return code

    def __enter__(self) -> KafkaProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tool_command(main_class: str, *args: str) -> list[str]:
    """A Kafka tool's JVM as its bin/ script starts it (no JMX agent, no GC log)."""
    return [
        java_binary(),
        *TOOL_HEAP,
        *PERFORMANCE_OPTS,
        "-cp",
        classpath(KAFKA_VERSION),
        main_class,
        *args,
    ]


class ToolError(RuntimeError):
    """A Kafka tool failed or printed nothing this module can read."""


def run_tool(main_class: str, *args: str, timeout: float) -> str:
    try:
        out = subprocess.run(
            tool_command(main_class, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{main_class}: no result after {timeout:.0f} s") from exc
    if out.returncode != 0:
        raise ToolError(
            f"{main_class} exited with {out.returncode}: {(out.stderr or out.stdout)[-2000:]}"
        )
    return out.stdout


@dataclass(frozen=True, slots=True)
class PerfResult:
    """What a perf tool reported: records, records/s, MB/s (10^6 bytes), latency ms."""

    records: int
    records_per_s: float
    mb_per_s: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None


_PRODUCER_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)


def parse_producer_perf(text: str) -> PerfResult:
    """The last line of ProducerPerformance (its MB is MiB)."""
    found = _PRODUCER_FINAL.findall(text)
    if not found:
        raise ToolError(f"no ProducerPerformance summary in {text[-500:]!r}")
    n, rate, mib, p50, p99, p999 = found[-1]
    return PerfResult(
        records=int(n),
        records_per_s=float(rate),
        mb_per_s=float(mib) * MIB / 1e6,
        p50_ms=float(p50),
        p99_ms=float(p99),
        p999_ms=float(p999),
    )


def parse_consumer_perf(text: str) -> PerfResult:
    """ConsumerPerformance's data row: fetch.MB.sec and fetch.nMsg.sec (the rate over the fetch
    time, without the group join) and data.consumed.in.nMsg."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.startswith("start.time") and i + 1 < len(lines):
            header = [h.strip() for h in line.split(",")]
            values = [v.strip() for v in lines[i + 1].split(",")]
            if len(values) != len(header):
                break
            row = dict(zip(header, values, strict=True))
            return PerfResult(
                records=int(row["data.consumed.in.nMsg"]),
                records_per_s=float(row["fetch.nMsg.sec"]),
                mb_per_s=float(row["fetch.MB.sec"]) * MIB / 1e6,
            )
    raise ToolError(f"no ConsumerPerformance row in {text[-500:]!r}")


_E2E = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)")


def parse_end_to_end(text: str, records: int) -> PerfResult:
    """EndToEndLatency's percentile line (whole milliseconds, as the tool rounds them)."""
    found = _E2E.search(text)
    if found is None:
        raise ToolError(f"no EndToEndLatency percentiles in {text[-500:]!r}")
    p50, p99, p999 = (float(v) for v in found.groups())
    return PerfResult(records, 0.0, 0.0, p50_ms=p50, p99_ms=p99, p999_ms=p999)


def producer_perf(
    bootstrap: str, topic: str, size: int, records: int, acks: str, timeout: float
) -> PerfResult:
    """kafka-producer-perf-test at full speed (--throughput -1), batches as the native driver's
    (linger.ms 5, batch.size 1 MB)."""
    out = run_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        f"acks={acks}",
        "linger.ms=5",
        "batch.size=1000000",
        "max.request.size=8388608",
        "buffer.memory=268435456",
        timeout=timeout,
    )
    return parse_producer_perf(out)


def consumer_perf(bootstrap: str, topic: str, records: int, timeout: float) -> PerfResult:
    """kafka-consumer-perf-test: a group consumer reading `records` from the beginning."""
    out = run_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        str(records),
        "--timeout",
        str(int(timeout * 1000)),
        timeout=timeout + 60,
    )
    return parse_consumer_perf(out)


def end_to_end(
    bootstrap: str, topic: str, records: int, size: int, acks: str, timeout: float
) -> PerfResult:
    """EndToEndLatency: one record at a time, produced and awaited by a consumer."""
    out = run_tool(
        "org.apache.kafka.tools.EndToEndLatency",
        bootstrap,
        topic,
        str(records),
        acks,
        str(size),
        timeout=timeout,
    )
    return parse_end_to_end(out, records)
