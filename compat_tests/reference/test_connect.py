"""Kafka Connect 4.4 in distributed mode (two workers) on odradek and on Kafka 4.4.

Two `ConnectDistributed` workers of one group, their config, offset and status topics (which
Connect creates compacted), exactly-once source support (KIP-618: the source task's records and
its offsets written in one transaction, the leader writing the config topic transactionally),
REST on free loopback ports. Kafka's own FileStreamSource reads a file into a topic and
FileStreamSink writes the topic back to a file. The worker running the source task is killed -9:
its task moves to the other worker (zombie fencing), and the topic read with read_committed holds
every line of the input exactly once, in order; the sink file ends with all of them. The same test
runs against Apache Kafka 4.4 (the reference).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from compat_tests.harness import HOST, free_port
from compat_tests.reference.jvm_apps import CONNECT, JvmApps, JvmProcess, OutputReader

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"


@pytest.fixture(scope="module")
def jvm_apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmApps]:
    apps = JvmApps(tmp_path_factory.mktemp("jvm-apps"), CONNECT)
    apps.compile()
    yield apps
    apps.stop_all()


@pytest.fixture(params=["odradek", "kafka-4.4"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "odradek":
        return str(request.getfixturevalue("odradek_broker").bootstrap)
    return str(request.getfixturevalue("kafka44").bootstrap)


class RestError(AssertionError):
    """The REST API answered with an error status."""


def rest(port: int, method: str, path: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://{HOST}:{port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        answer = exc.read().decode(errors="replace")
        raise RestError(f"{method} {path}: {exc.code} {answer}") from None
    return json.loads(raw) if raw else None


def wait_for(check: Callable[[], bool], timeout: float, what: str, why: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (RestError, urllib.error.URLError, OSError, ValueError, KeyError, IndexError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{why()}")
        time.sleep(0.25)


def test_connect_distributed_file_connectors_exactly_once(
    bootstrap: str, jvm_apps: JvmApps, tmp_path: Path, replication: int = 1
) -> None:
    prefix = f"c{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}-lines"
    source_file = tmp_path / "input.txt"
    sink_file = tmp_path / "output.txt"
    source_file.write_text("")
    ports: dict[str, int] = {}
    workers: dict[str, JvmProcess] = {}

    def start_worker(name: str) -> None:
        port = free_port()
        ports[name] = port
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": f"{prefix}-connect",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{prefix}-configs",
            "offset.storage.topic": f"{prefix}-offsets",
            "status.storage.topic": f"{prefix}-status",
            "config.storage.replication.factor": str(replication),
            "offset.storage.replication.factor": str(replication),
            "status.storage.replication.factor": str(replication),
            "offset.storage.partitions": "3",
            "status.storage.partitions": "1",
            "listeners": f"http://{HOST}:{port}",
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": str(port),
            "offset.flush.interval.ms": "500",
            "exactly.once.source.support": "enabled",
            "scheduled.rebalance.max.delay.ms": "2000",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            "plugin.discovery": "only_scan",
        }
        directory = tmp_path / f"{name}-{len(jvm_apps.started)}"
        directory.mkdir(parents=True)
        conf = directory / "worker.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        workers[name] = jvm_apps.start(CONNECT_MAIN, str(conf), directory=directory)

    def tails() -> str:
        return "\n".join(f"--- {n} ---\n{w.output_tail()}" for n, w in workers.items())

    def status(connector: str) -> dict[str, object]:
        answer = rest(next(iter(ports.values())), "GET", f"/connectors/{connector}/status")
        assert isinstance(answer, dict)
        return answer

    def task_state(connector: str) -> tuple[str, str]:
        task = status(connector)["tasks"][0]  # type: ignore[index]
        return str(task["state"]), str(task["worker_id"])

    start_worker("w1")
    start_worker("w2")
    reader = None
    try:
        for name in ("w1", "w2"):
            wait_for(
                lambda n=name: "version" in rest(ports[n], "GET", "/"),  # type: ignore[operator]
                120,
                f"{name}'s REST API",
                tails,
            )
        src = {
            "name": "src",
            "config": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1",
                "file": str(source_file),
                "topic": topic,
                "exactly.once.support": "required",
            },
        }  # fmt: skip
        sink = {
            "name": "sink",
            "config": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "file": str(sink_file),
                "topics": topic,
            },
        }  # fmt: skip
        errors: list[str] = []

        def create(port: int, body: dict[str, object]) -> bool:
            try:
                rest(port, "POST", "/connectors", body)
            except RestError as exc:
                if "already exists" in str(exc):
                    return True
                errors.append(str(exc))
                raise
            return True

        wait_for(lambda: create(ports["w1"], src), 60, "src created", lambda: "\n".join(errors))
        wait_for(lambda: create(ports["w2"], sink), 60, "sink created", lambda: "\n".join(errors))
        for connector in ("src", "sink"):
            wait_for(
                lambda c=connector: task_state(c)[0] == "RUNNING",  # type: ignore[misc]
                90,
                f"{connector}'s task RUNNING",
                tails,
            )
        assert sorted(rest(ports["w2"], "GET", "/connectors")) == ["sink", "src"]  # type: ignore[arg-type]

        first = [f"line-{i}" for i in range(50)]
        with source_file.open("a") as f:
            f.write("".join(line + "\n" for line in first))

        def sink_has(lines: list[str]) -> Callable[[], bool]:
            def check() -> bool:
                have = sink_file.read_text().splitlines() if sink_file.exists() else []
                return set(lines) <= set(have)

            return check

        wait_for(sink_has(first), 90, "the first lines in the sink file", tails)

        # kill -9 the worker running the source task; its task moves to the other worker
        _, worker_id = task_state("src")
        victim = next(n for n, p in ports.items() if worker_id.endswith(f":{p}"))
        survivor = next(n for n in ports if n != victim)
        workers[victim].kill()
        del ports[victim]
        second = [f"line-{i}" for i in range(50, 100)]
        with source_file.open("a") as f:
            f.write("".join(line + "\n" for line in second))
        wait_for(
            lambda: task_state("src") == ("RUNNING", f"{HOST}:{ports[survivor]}"),
            120,
            "the source task RUNNING on the surviving worker",
            tails,
        )
        wait_for(sink_has(first + second), 90, "every line in the sink file", tails)

        reader = OutputReader(bootstrap, [topic], 1)
        reader.wait(
            lambda: len(reader.by_key(topic).get("", [])) >= 100, 60, "100 lines in the topic"
        )
        assert reader.by_key(topic)[""] == first + second
        for worker in workers.values():
            if worker is not workers[victim]:
                assert worker.running, tails()
    finally:
        if reader is not None:
            reader.close()
        for worker in workers.values():
            worker.stop()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [
        ConfigResource(ConfigResource.Type.TOPIC, f"{prefix}-{t}")
        for t in ("configs", "offsets", "status")
    ]
    policies = {
        res.name: fut.result(30)["cleanup.policy"].value
        for res, fut in admin.describe_configs(resources).items()
    }
    assert set(policies.values()) == {"compact"}, policies
