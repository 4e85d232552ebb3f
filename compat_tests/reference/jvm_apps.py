"""Kafka's own JVM applications (Kafka Streams, Connect, MirrorMaker 2) run as test processes.

The jars are `.cache/jvm-apps-4.4.0/lib` (Kafka Streams 4.4.0, reference/jvm-apps-4.4/pom.xml) and
`.cache/connect-4.3.1/lib` (Connect and MirrorMaker 2, reference/connect-4.3/pom.xml), both fetched
by `scripts/setup.sh test`; our applications' sources are `compat_tests/reference/jvm/*.java`,
compiled once per module against one of those (`JvmApps.compile`). `JvmApps.start()` starts one
class as a long-running process (`JvmProcess`): its stdout is read by a thread so a test can wait
for a line (`wait_line`), `kill()` is kill -9, `stop()` SIGTERM then SIGKILL. Log4j writes WARN and
above to `<dir>/app.log`.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.reference.kafka_ref import ReferenceUnavailable, java_binary

ROOT = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).resolve().parent / "jvm"
STREAMS = "jvm-apps-4.4.0"
CONNECT = "connect-4.3.1"
# Small, fast-starting JVMs on a 2-core machine
JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")
STOP_TIMEOUT = 30.0

_LOG4J = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %c{{1}} %m%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


def classpath(name: str) -> list[str]:
    """The jars of `.cache/<name>`, as setup.sh listed them."""
    path = ROOT / ".cache" / name / "classpath"
    try:
        jars = path.read_text(encoding="utf-8").strip().split(":")
    except FileNotFoundError:
        raise ReferenceUnavailable(
            f"{path} is missing: run `scripts/setup.sh test` to fetch Kafka Streams, Connect "
            "and MirrorMaker 2 from Maven Central"
        ) from None
    gone = [jar for jar in jars if not Path(jar).is_file()]
    if gone:
        raise ReferenceUnavailable(f"{len(gone)} jars of {path} are gone, e.g. {gone[0]}")
    return jars


class JvmProcess:
    """One running JVM application; its stdout lines are collected as they come."""

    def __init__(self, name: str, cmd: list[str], directory: Path) -> None:
        self.name = name
        self.cmd = cmd
        self.dir = directory
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=directory,
        )
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_line(self, text: str, timeout: float, since: int = 0) -> int:
        """Until a line from index `since` on contains `text`; returns the index after it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(since, len(self.lines)):
                    if text in self.lines[i]:
                        return i + 1
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"{self.name}: no line with {text!r} within {timeout}s "
                        f"(exit code {self.proc.poll()})\n{self.output_tail()}"
                    )
                self._cond.wait(min(left, 1.0))

    def output_tail(self, n: int = 60) -> str:
        with self._cond:
            out = "\n".join(self.lines[-n:])
        log = self.dir / "app.log"
        if log.exists():
            out += "\n--- app.log ---\n" + log.read_text(errors="replace")[-8000:]
        return out

    def kill(self) -> None:
        """kill -9: no shutdown hook, no clean leave of the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT)
        self._reader.join(timeout=5)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        self._reader.join(timeout=5)
        return self.proc.returncode


# classes compiled in this test run, by (jars, sources): modules running the same application
# (test_streams.py, test_jvm_apps_cluster.py) compile it once
_COMPILED: dict[tuple[str, tuple[str, ...]], Path] = {}


class JvmApps:
    """Compiles the sources once per test run and starts applications from them."""

    def __init__(self, work_dir: Path, jars: str, sources: Sequence[str] = ()) -> None:
        self.work_dir = work_dir
        self._key = (jars, tuple(sources))
        self.sources = [SOURCES / f"{name}.java" for name in sources]
        self.jars = classpath(jars)
        self.java = java_binary()
        self.classes = work_dir / "classes"
        self.started: list[JvmProcess] = []
        self._compiled = False

    def compile(self) -> None:
        if self._compiled:
            return
        done = _COMPILED.get(self._key)
        if done is not None and done.is_dir():
            self.classes = done
            self._compiled = True
            return
        javac = str(Path(self.java).with_name("javac"))
        if not Path(javac).exists():
            javac = "javac"
        self.classes.mkdir(parents=True, exist_ok=True)
        sources = [str(p) for p in self.sources]
        if not sources:
            self._compiled = True
            return
        proc = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(self.classes),
             "-cp", ":".join(self.jars), *sources],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if proc.returncode != 0:
            raise AssertionError(f"javac failed:\n{proc.stdout}{proc.stderr}")
        _COMPILED[self._key] = self.classes
        self._compiled = True

    def start(
        self,
        main_class: str,
        *args: str,
        directory: Path,
        log_level: str = "WARN",
        extra_jvm: Sequence[str] = (),
    ) -> JvmProcess:
        """Start `main_class` (ours or any class on the jars) with `directory` as its cwd."""
        self.compile()
        directory.mkdir(parents=True, exist_ok=True)
        log4j = directory / "log4j2.properties"
        log4j.write_text(_LOG4J.format(log=directory / "app.log", level=log_level))
        cmd = [
            self.java,
            *JVM_OPTIONS,
            *extra_jvm,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            ":".join([str(self.classes), *self.jars]),
            main_class,
            *args,
        ]
        proc = JvmProcess(f"{main_class}@{directory.name}", cmd, directory)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            proc.stop()


class OutputReader:
    """Reads the output topics from the start with read_committed, in a thread."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        self.records: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            key = (msg.key() or b"").decode()
            value = (msg.value() or b"").decode()
            with self._lock:
                self.records[msg.topic()].append((key, value))

    def by_key(self, topic: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        with self._lock:
            for key, value in self.records[topic]:
                out[key].append(value)
        return out

    def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()


def produce(bootstrap: str, topic: str, records: list[tuple[str, str, int | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value, ts in records:
        if ts is None:
            producer.produce(topic, key=key, value=value)
        else:
            producer.produce(topic, key=key, value=value, timestamp=ts)
    assert producer.flush(30) == 0
