"""Group members as processes, and the helpers compat_tests/test_groups.py waits with.

Each member is its own process (compat_tests/group_member.py for kafka-python, confluent-kafka
and aiokafka; compat_tests/java/GroupMember.java for the Java client), so SIGKILL is a real crash
and SIGTERM a clean close. Members report assignments and records as JSON lines; `Group.until`
waits on predicates over those reports with a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from compat_tests.harness import BrokerProcess, wait_for
from compat_tests.java_harness import JavaPrograms

SESSION_MS = 6000
PARTITIONS = 6
SETTLE_S = 45.0  # bound for a rebalance to settle (session + rebalance timeouts, JVM start)
REPO = Path(__file__).resolve().parents[1]

# -- members -----------------------------------------------------------------------------------


class Watch:
    """One condition for every member's reports: tests wait on predicates with deadlines."""

    def __init__(self) -> None:
        self.cond = threading.Condition()

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def until(
        self,
        pred: Callable[[], bool],
        timeout: float,
        what: str,
        state: Callable[[], str] = lambda: "",
    ) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout:.0f}s waiting for {what}\n{state()}"
                    )
                self.cond.wait(min(left, 0.5))


class Member:
    """A group member process and what it reported."""

    def __init__(self, name: str, cmd: list[str], watch: Watch, log_dir: Path) -> None:
        self.name = name
        self.watch = watch
        self.events: list[dict] = []
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.watch.cond:
                self.events.append(event)
                self.watch.cond.notify_all()
        self.watch.notify()

    @property
    def assignment(self) -> set[int]:
        for event in reversed(self.events):
            if event["e"] in ("assigned", "revoked"):
                return {p for _t, p in event["all"]}
        return set()

    @property
    def records(self) -> list[tuple[int, int, str]]:
        return [(e["p"], e["o"], e["v"]) for e in list(self.events) if e["e"] == "rec"]

    @property
    def values(self) -> list[str]:
        return [v for _p, _o, v in self.records]

    def saw(self, kind: str) -> list[dict]:
        return [e for e in list(self.events) if e["e"] == kind]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def describe(self) -> str:
        tail = self.stderr_path.read_text(errors="replace")[-3000:]
        kinds = [e["e"] for e in self.events if e["e"] != "rec"]
        return (
            f"member {self.name}: alive={self.alive} assignment={sorted(self.assignment)} "
            f"records={len(self.records)} events={kinds[-12:]}\n  stderr: {tail}"
        )

    def terminate(self, timeout: float = 30.0) -> None:
        """Clean close (SIGTERM): the client closes its consumer."""
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(
                f"{self.name} did not close within {timeout}s\n" + self.describe()
            ) from None
        self._reader.join(5)

    def kill(self) -> None:
        """A crash (SIGKILL): no LeaveGroup, the broker finds out by the session timeout."""
        if self.alive:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    def cleanup(self) -> None:
        if self.alive:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()


class Group:
    """Starts members of one group on one topic and waits for the group to settle."""

    def __init__(
        self,
        broker: BrokerProcess,
        topic: str,
        group: str,
        log_dir: Path,
        java: Callable[[], JavaPrograms],
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.group = group
        self.log_dir = log_dir
        self.java = java
        self.watch = Watch()
        self.members: list[Member] = []
        self._count = 0

    def start(
        self,
        client: str,
        *,
        assignor: str = "range",
        instance_id: str | None = None,
        commit: str = "sync",
        session_ms: int = SESSION_MS,
        protocol: str = "classic",
    ) -> Member:
        self._count += 1
        name = f"{client}-{self._count}"
        if client == "java":
            programs = self.java()
            classes = programs.compile("GroupMember")
            cp = os.pathsep.join(str(p) for p in (classes, *programs.classpath))
            cmd = [
                shutil.which("java") or "java",
                *programs.jvm_args,
                "-cp",
                cp,
                "GroupMember",
                self.broker.bootstrap,
                self.topic,
                self.group,
                assignor,
                instance_id or "-",
                str(session_ms),
                commit,
                protocol,
            ]
        else:
            cmd = [
                sys.executable,
                "-m",
                "compat_tests.group_member",
                "--client",
                client,
                "--bootstrap",
                self.broker.bootstrap,
                "--topic",
                self.topic,
                "--group",
                self.group,
                "--assignor",
                assignor,
                "--session-ms",
                str(session_ms),
                "--commit",
                commit,
                "--client-id",
                name,
            ]
            if instance_id:
                cmd += ["--instance-id", instance_id]
            if protocol != "classic":
                cmd += ["--group-protocol", protocol]  # KIP-848 (confluent-kafka)
        member = Member(name, cmd, self.watch, self.log_dir)
        self.members.append(member)
        return member

    def state(self) -> str:
        return "\n".join(m.describe() for m in self.members)

    def until(self, pred: Callable[[], bool], what: str, timeout: float = SETTLE_S) -> None:
        self.watch.until(pred, timeout, what, self.state)

    def settled(
        self, members: Iterable[Member], partitions: int = PARTITIONS, timeout: float = SETTLE_S
    ) -> None:
        """Wait until `members` own disjoint, non-empty shares covering every partition."""
        members = list(members)

        def ok() -> bool:
            shares = [m.assignment for m in members]
            union = set().union(*shares)
            return (
                all(shares)
                and len(union) == partitions
                and sum(len(s) for s in shares) == partitions
            )

        self.until(ok, f"{len(members)} members to split {partitions} partitions", timeout)

    def consumed(
        self,
        values: Iterable[str],
        members: Iterable[Member] | None = None,
        timeout: float = SETTLE_S,
    ) -> None:
        wanted = set(values)
        pool = list(members) if members is not None else self.members
        self.until(
            lambda: wanted <= {v for m in pool for v in m.values},
            f"{len(wanted)} records to be consumed",
            timeout,
        )

    def cleanup(self) -> None:
        for m in self.members:
            m.cleanup()


# -- helpers -----------------------------------------------------------------------------------


def create_topic(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(
    broker: BrokerProcess,
    topic: str,
    values: list[str],
    partition_of: Callable[[int], int] | None = None,
    **config: Any,
) -> None:
    """Write `values` (record i to partition `partition_of(i)`, else i % PARTITIONS); `config`
    goes to kafka-python's KafkaProducer (e.g. acks="all")."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, **config)
    try:
        for i, v in enumerate(values):
            part = partition_of(i) if partition_of else i % PARTITIONS
            producer.send(topic, value=v.encode(), partition=part)
        producer.flush(30)
    finally:
        producer.close()


class BackgroundProducer:
    """Writes numbered records until stopped; `values` is everything acknowledged."""

    def __init__(self, broker: BrokerProcess, topic: str, tag: str, every_s: float = 0.02):
        self.values: list[str] = []
        self._stop = threading.Event()
        self._producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        self._thread = threading.Thread(target=self._run, args=(topic, tag, every_s), daemon=True)
        self._thread.start()

    def _run(self, topic: str, tag: str, every_s: float) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"{tag}-{i}"
            self._producer.send(topic, value=value.encode(), partition=i % PARTITIONS).get(30)
            self.values.append(value)
            i += 1
            self._stop.wait(every_s)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(60)
        self._producer.close()
        return list(self.values)


def admin_client(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap)


def committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    admin = admin_client(broker)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items()}


class CommitWatcher:
    """Polls a group's committed offsets every 0.2 s in a thread and records any partition whose
    committed offset moves back; `stop()` ends the thread and returns those moves."""

    def __init__(self, broker: BrokerProcess, group: str) -> None:
        self.broker, self.group = broker, group
        self.backwards: list[str] = []
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                now = committed(self.broker, self.group)
            except Exception:  # the coordinator may be briefly unavailable: look again
                now = {}
            for p, o in now.items():
                if o < self._last.get(p, -1):
                    self.backwards.append(f"partition {p}: {self._last[p]} -> {o}")
                self._last[p] = max(o, self._last.get(p, -1))
            self._stop.wait(0.2)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(5)
        return self.backwards

    def check(self, group: Group, values: list[str]) -> None:
        """At the end of a run: every value consumed, the live members' commits covering them
        all, no committed offset moved back meanwhile, no member reporting an error."""
        group.consumed(values, timeout=SETTLE_S)
        wait_for(
            lambda: sum(committed(self.broker, self.group).values()) >= len(values),
            SETTLE_S,
            message=f"commits to cover {len(values)} records",
        )
        backwards = self.stop()
        assert not backwards, backwards
        assert not [m for m in group.members if m.saw("error")], group.state()


def describe(broker: BrokerProcess, group: str) -> dict:
    admin = admin_client(broker)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


def assert_exactly_once(group: Group, values: list[str]) -> None:
    seen: dict[str, list[str]] = {}
    for m in group.members:
        for v in m.values:
            seen.setdefault(v, []).append(m.name)
    dup = {v: who for v, who in seen.items() if v in values and len(who) > 1}
    assert not dup, f"records delivered more than once: {list(dup.items())[:5]}"
    missing = set(values) - set(seen)
    assert not missing, f"{len(missing)} records never delivered"
