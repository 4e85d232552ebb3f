"""A real odradek broker in a child process, for tests that drive it with real clients.

The broker is started the way a user starts it, `python -m odradek serve` with Kafka's own keys
as `--override key=value`; it is ready when it prints a line containing `odradek ready`.
Everything it writes to stdout and stderr goes to `broker.log` next to its data directory, so a
failing test can show what the broker said (conftest.py attaches the log to the report).

    with BrokerProcess(tmp_path) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        ...
        broker.kill()      # SIGKILL: an unclean stop
        broker.start()     # same port, same data directory: recovery
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

READY_MARKER = "odradek ready"
READY_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
HOST = "127.0.0.1"

# Settings every test broker gets unless a test overrides them. Kafka's own test setups and
# Docker quickstarts do the same: a new group should not wait 3 s for more members.
DEFAULT_OVERRIDES: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
}

_LISTENERS_IN_READY = re.compile(r"listeners=(\S+)")
_PORT_IN_LISTENER = re.compile(r"://(?:\[[^\]]*\]|[^:,]*):(\d+)")
_CANNOT_LISTEN = "cannot listen"
_live: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()


class BrokerError(RuntimeError):
    """The broker did not start or stop as asked; the message ends with its log."""


def free_port(host: str = HOST) -> int:
    """A TCP port that was free a moment ago (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def unique_name(base: str, max_len: int = 120) -> str:
    """A legal, unique Kafka topic / group name derived from `base` (e.g. a test's name).

    Kafka allows [a-zA-Z0-9._-] up to 249 characters and warns when names differ only by
    '.' versus '_', so everything else becomes '-'.
    """
    cleaned = re.sub(r"[^A-Za-z0-9-]+", "-", base).strip("-") or "t"
    suffix = uuid.uuid4().hex[:8]
    return f"{cleaned[: max_len - len(suffix) - 1]}-{suffix}"


def broker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a broker: ours without KAFKA_* (the broker reads those as config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class BrokerProcess:
    """One `python -m odradek serve` child process with a fixed port and data directory.

    `start()` waits for the ready line (bounded by `ready_timeout`); `stop()` sends SIGTERM and
    waits `stop_timeout` before SIGKILL; `kill()` is SIGKILL at once; `restart()` stops (or
    kills, with `hard=True`) and starts again on the same port and data directory.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str] | None = None,
        *,
        overrides: Mapping[str, str] | None = None,
        port: int | None = None,
        host: str = HOST,
        env: Mapping[str, str] | None = None,
        ready_timeout: float = READY_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
        python: str = sys.executable,
    ) -> None:
        if work_dir is None:
            work_dir = tempfile.mkdtemp(prefix="odradek-compat-")
        self.work_dir = Path(work_dir)
        self.data_dir = self.work_dir / "data"
        self.log_path = self.work_dir / "broker.log"
        self.host = host
        self.overrides = {**DEFAULT_OVERRIDES, **(overrides or {})}
        self.env = broker_env(env)
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.python = python
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port(host)
        self.ready_line: str | None = None
        self.starts = 0
        self._run_offset = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()

    # -- addresses and state ----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients use, "127.0.0.1:PORT"."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        args = [self.python, "-m", "odradek", "serve"]
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it prints its ready line."""
        if self.running:
            raise BrokerError(f"broker on {self.bootstrap} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # A port picked by free_port() can be taken before the broker binds it; pick another,
        # but only on the first start: after that clients know this port.
        attempts = 3 if (not self._fixed_port and self.starts == 0) else 1
        for attempt in range(attempts):
            try:
                self._start_once()
                return self
            except BrokerError:
                if attempt + 1 == attempts or _CANNOT_LISTEN not in self._this_run_log():
                    raise
                self.port = free_port(self.host)
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        self.starts += 1
        self._ready.clear()
        self.ready_line = None
        with open(self.log_path, "ab") as log:
            self._run_offset = log.tell()
            header = f"==== start #{self.starts}: {' '.join(self.command())}\n"
            log.write(header.encode())
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.work_dir,
        )
        _live.add(self)
        self._reader = threading.Thread(
            target=self._pump, args=(self._proc,), name=f"broker-log-{self.port}", daemon=True
        )
        self._reader.start()
        # The reader sets the event on the ready line and at end of output (the broker died).
        if not self._ready.wait(self.ready_timeout):
            self.kill()
            raise BrokerError(
                f"broker on {self.bootstrap} not ready within {self.ready_timeout:.0f}s\n"
                + self.log_tail()
            )
        if self.ready_line is None:
            self._proc.wait(timeout=self.stop_timeout)
            self._join_reader()
            raise BrokerError(
                f"broker on {self.bootstrap} exited with status {self._proc.returncode} "
                "before it was ready\n" + self.log_tail()
            )
        match = _LISTENERS_IN_READY.search(self.ready_line)
        port = _PORT_IN_LISTENER.search(match.group(1)) if match else None
        if port and int(port.group(1)) != 0:
            self.port = int(port.group(1))

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with open(self.log_path, "ab", buffering=0) as log:
            for raw in iter(proc.stdout.readline, b""):
                log.write(raw)
                if self.ready_line is None and READY_MARKER.encode() in raw:
                    self.ready_line = raw.decode("utf-8", "replace").strip()
                    self._ready.set()
            proc.stdout.close()
            log.write(f"==== exited with status {proc.wait()}\n".encode())
        self._ready.set()

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, wait up to `timeout` (default `stop_timeout`), then SIGKILL.

        Returns the exit status (negative: killed by that signal), or None if never started.
        """
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self._append_log("==== did not stop after SIGTERM; sending SIGKILL\n")
                proc.kill()
                proc.wait()
        self._join_reader()
        return proc.returncode

    def kill(self) -> int | None:
        """SIGKILL now: an unclean stop, as after `kill -9`."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._join_reader()
        return proc.returncode

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        """Stop (SIGKILL with `hard=True`) and start again on the same port and data dir."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else f"stopped({self.returncode})"
        return f"<BrokerProcess {self.bootstrap} {state} data={self.data_dir}>"

    # -- the broker's log ---------------------------------------------------------------------

    def log_text(self, since: int = 0) -> str:
        """The broker's output (all starts) from byte offset `since`."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_tail(self, max_chars: int = 20_000, since: int = 0) -> str:
        text = self.log_text(since)
        if len(text) > max_chars:
            text = "...\n" + text[-max_chars:]
        return f"--- broker log {self.log_path} ---\n{text}"

    def _this_run_log(self) -> str:
        return self.log_text(self._run_offset)

    def _append_log(self, line: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(line)


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "",
) -> None:
    """Poll `predicate()` until true, failing after `timeout` seconds (never an unbounded loop)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(message or f"condition not met within {timeout}s")
        time.sleep(interval)


def create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    """Create topics with replication factor 1 (confluent-kafka's admin client), waiting for
    each to be answered."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(30)


# -- raw requests (kafka-python's protocol classes over odradek.testing.raw.RawClient), shared by
# compat_tests and the in-process tests under tests/ --------------------------------------------


def produce(
    client: Any, topic: str, partition: int, records: bytes, acks: int = -1, version: int = 9
) -> Any:
    """One partition's ProduceResponse entry (error_code, base_offset, ...)."""
    from kafka.protocol.producer import ProduceRequest

    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])
        ],
    )
    (topic_resp,) = client.request(req, version).responses
    (part,) = topic_resp.partition_responses
    return part


def list_offset(client: Any, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """(error_code, offset) for a ListOffsets v7 query (-2 earliest, -1 latest, or a time)."""
    from kafka.protocol.consumer import ListOffsetsRequest

    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            T(
                name=topic,
                partitions=[
                    T.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    (part,) = client.request(req, 7).topics[0].partitions
    return part.error_code, part.offset


def find_coordinator(client: Any, key: str, key_type: int, wait_s: float = 15.0) -> None:
    """FindCoordinator v2 until it answers NONE (the first call creates the internal topic)."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

    deadline = time.monotonic() + wait_s
    while True:
        resp = client.request(FindCoordinatorRequest(key=key, key_type=key_type), 2)
        if resp.error_code == 0:
            return
        assert time.monotonic() < deadline, f"FindCoordinator({key!r}, {key_type}): {resp}"
        time.sleep(0.05)


def offset_commit_request(
    group: str, topic: str, offsets: Mapping[int, int], metadata: str = ""
) -> Any:
    """A simple (generation -1, no member) OffsetCommit of `offsets` {partition: offset}."""
    from kafka.protocol.consumer.group import OffsetCommitRequest

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    parts = [
        P(partition_index=p, committed_offset=o, committed_metadata=metadata)
        for p, o in offsets.items()
    ]
    return OffsetCommitRequest(group_id=group, topics=[T(name=topic, partitions=parts)])


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_live):
        if broker.running:
            broker.kill()
