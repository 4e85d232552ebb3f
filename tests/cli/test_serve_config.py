"""`odradek serve`, `odradek dev` and `odradek cluster` run as a user runs them (subprocesses):
Kafka 4's own KRaft server.properties serves clients, typos and KRaft clusters end with one clear
line, start-up failures print only their error line, a restart is not 50 lines of empty loads, and
a taken port 9092 sends dev and cluster to free ports with one line saying so (issue 13).
"""

from __future__ import annotations

import errno
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Kafka's own config/server.properties as released in 4.0.0 and 4.1.1 (the same file): the
# single-node KRaft one, byte for byte
KRAFT_PROPERTIES = Path(__file__).parent / "fixtures" / "kraft-server.properties"
DEADLINE_S = 60.0
# variables of Kafka's start scripts: set in a Kafka user's shell, never configs
SCRIPT_VARIABLES = {
    "KAFKA_HEAP_OPTS": "-Xmx1G -Xms1G",
    "KAFKA_OPTS": "-Djava.security.auth.login.config=/dev/null",
    "KAFKA_JVM_PERFORMANCE_OPTS": "-server -XX:+UseG1GC",
    "KAFKA_LOG4J_OPTS": "-Dlog4j.configuration=file:/dev/null",
    "KAFKA_JMX_OPTS": "-Dcom.sun.management.jmxremote",
    "KAFKA_GC_LOG_OPTS": "-Xlog:gc",
    "KAFKA_DEBUG": "",
}


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "ODRADEK_"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def odradek(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=env or environment(),
        cwd=REPO,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The process failed with exactly one line on stderr and nothing on stdout."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("odradek: ")
    return lines[0]


class Running:
    """A long-running odradek subprocess: stdout lines as they come, stderr kept for the end."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(
            target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True
        ).start()
        self._err_done = threading.Thread(
            target=self._pump, args=(self.proc.stderr, self.err.append), daemon=True
        )
        self._err_done.start()

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line.rstrip("\n"))

    def line(self, startswith: str = "") -> str:
        """The next stdout line starting with `startswith` (bounded wait)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {startswith!r} line; stderr: {self.err}"
            try:
                line = self.lines.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.err}"
                continue
            if line.startswith(startswith):
                return line

    def stop(self) -> list[str]:
        """SIGTERM, a clean exit 0; every stderr line."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            assert self.proc.wait(timeout=DEADLINE_S) == 0, self.err
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._err_done.join(timeout=10)
        return self.err


@contextmanager
def running(args: list[str], env: dict[str, str] | None = None) -> Iterator[Running]:
    proc = Running(args, env or environment())
    try:
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait(timeout=10)


def ready_bootstrap(proc: Running) -> str:
    """The client address from `odradek ready listeners=PLAINTEXT://H:P[,...] data=...`."""
    listeners = proc.line("odradek ready").split()[2].removeprefix("listeners=")
    return ",".join(x.split("://", 1)[1] for x in listeners.split(","))


def odradek_produce_input(bootstrap: str, topic: str, text: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "produce", topic, "-b", bootstrap],
        input=text,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=environment(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr


def consume_one(bootstrap: str, topic: str, *extra: str) -> str:
    proc = odradek("consume", topic, "--from-beginning", "--max", "1", "-b", bootstrap, *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# -- Kafka 4's KRaft server.properties ------------------------------------------------------------


def test_kafka4_kraft_server_properties_starts_a_broker_clients_use(tmp_path: Path) -> None:
    # the file as Kafka ships it; only where it listens and keeps data are moved to the test's
    args = [
        "serve",
        str(KRAFT_PROPERTIES),
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "--override",
        "advertised.listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "--override",
        f"log.dirs={tmp_path / 'kraft-combined-logs'}",
    ]
    with running(args, environment(**SCRIPT_VARIABLES)) as broker:
        bootstrap = ready_bootstrap(broker)
        assert "," not in bootstrap  # the CONTROLLER listener is not served
        odradek_produce_input(bootstrap, "kraft", "hello\n")
        assert consume_one(bootstrap, "kraft") == "hello\n"
        err = broker.stop()
    said = [line.split(": ", 1)[-1] for line in err if "odradek.broker.config" in line]
    # one line for the controller listener, one warning per Kafka key without effect here
    # (share.coordinator.state.topic.replication.factor has one since share groups, issue 15)
    assert sorted(said) == [
        "KRaft process.roles=broker,controller: odradek's controller is embedded; "
        "controller listener CONTROLLER://127.0.0.1:0 is not served",
        "share.coordinator.state.topic.min.isr is a Kafka setting that has no effect in "
        "odradek: ignored",
    ]
    assert not [line for line in err if " ERROR " in line or "Traceback" in line], err


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("controller.quorum.voters=1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093", "other nodes"),
        ("controller.quorum.bootstrap.servers=kafka-1:9093,kafka-2:9093", "several controllers"),
        ("process.roles=broker", "needs separate KRaft controllers"),
    ],
)
def test_a_kraft_cluster_config_is_one_line_pointing_at_zookeeper(
    tmp_path: Path, override: str, expected: str
) -> None:
    line = one_error_line(
        odradek(
            "serve",
            str(KRAFT_PROPERTIES),
            "--override",
            override,
            "--override",
            f"log.dirs={tmp_path}",
        )
    )
    assert expected in line and "zookeeper.connect" in line
    assert not any(tmp_path.iterdir())  # refused before anything was written


# -- typos ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["file", "environment", "override"])
def test_a_typo_is_one_line_naming_the_closest_key(tmp_path: Path, source: str) -> None:
    """Only when asked to be strict: Kafka warns and goes on (the next test)."""
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    args = ["serve", str(props), "--strict-config"]
    env = environment(**SCRIPT_VARIABLES)
    if source == "file":
        props.write_text(props.read_text() + "num.partitons=3\n")
    elif source == "environment":
        env["KAFKA_NUM_PARTITONS"] = "3"
    else:
        args += ["--override", "num.partitons=3"]
    line = one_error_line(odradek(*args, env=env))
    assert "unknown configuration 'num.partitons'" in line
    assert "num.partitions" in line
    if source == "environment":
        assert "KAFKA_NUM_PARTITONS" in line and "KAFKA_NUM_PARTITIONS" in line
    if source == "file":
        assert str(props) in line


# Kubernetes' service links for a Service named `kafka`: in every pod, never configs
SERVICE_LINKS = {
    "KAFKA_SERVICE_HOST": "10.0.0.7",
    "KAFKA_SERVICE_PORT": "9092",
    "KAFKA_SERVICE_PORT_BROKER": "9092",
    "KAFKA_PORT": "tcp://10.0.0.7:9092",
    "KAFKA_PORT_9092_TCP": "tcp://10.0.0.7:9092",
    "KAFKA_PORT_9092_TCP_PROTO": "tcp",
    "KAFKA_PORT_9092_TCP_PORT": "9092",
    "KAFKA_PORT_9092_TCP_ADDR": "10.0.0.7",
}


def test_unknown_keys_are_warned_once_and_the_broker_serves(tmp_path: Path) -> None:
    """A drop-in config with a key Kafka does not know (offsets.topic.min.isr, as a widely used
    test harness writes) starts, as Kafka does: one warning naming the closest real key; the
    Kubernetes service-link variables are not configs at all, strict or not."""
    props = tmp_path / "server.properties"
    props.write_text(
        f"log.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
        "offsets.topic.min.isr=1\n"
    )
    env = environment(**SCRIPT_VARIABLES, **SERVICE_LINKS)
    with running(["serve", str(props)], env) as broker:
        bootstrap = ready_bootstrap(broker)
        odradek_produce_input(bootstrap, "drop-in", "hello\n")
        assert consume_one(bootstrap, "drop-in") == "hello\n"
        err = broker.stop()
    said = [line.split(": ", 1)[-1] for line in err if "odradek.broker.config" in line]
    assert said == [
        f"{props}: the configuration 'offsets.topic.min.isr' was supplied but isn't a known "
        "config (did you mean 'offsets.topic.num.partitions'?): ignored "
        "(odradek.strict.config=true or `odradek serve --strict-config` refuses it)",
        "Kubernetes service-link variables are not configs: ignored "
        + ", ".join(sorted(SERVICE_LINKS)),
    ]
    assert not [line for line in err if " ERROR " in line or "Traceback" in line], err
    # strict refuses the unknown key but not the service links
    line = one_error_line(odradek("serve", str(props), "--strict-config", env=env))
    assert "unknown configuration 'offsets.topic.min.isr'" in line
    # a config refused for another reason prints its error line alone, warnings unsaid
    line = one_error_line(odradek("serve", str(props), "--override", "num.partitions=0", env=env))
    assert "num.partitions" in line
    props.write_text(props.read_text().replace("offsets.topic.min.isr=1\n", ""))
    with running(["serve", str(props), "--strict-config"], env) as broker:
        ready_bootstrap(broker)
        said = [x for x in broker.stop() if "odradek.broker.config" in x]
        assert len(said) == 1 and "Kubernetes service-link variables" in said[0]


# -- one clear line -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_start_up_failures_are_their_error_line_only(tmp_path: Path) -> None:
    data = f"log.dirs={tmp_path / 'data'}"
    line = one_error_line(
        odradek("serve", "--override", "listeners=127.0.0.1:19094", "--override", data)
    )
    assert "no listener name" in line and "PLAINTEXT://127.0.0.1:19094" in line

    a_file = tmp_path / "not-a-dir"
    a_file.write_text("")
    line = one_error_line(
        odradek(
            "serve",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={a_file}",
        )
    )
    assert line == f"odradek: data dir {a_file} is not a directory"

    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_error_line(
            odradek(
                "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", data
            )
        )
    assert line == f"odradek: cannot listen on PLAINTEXT://127.0.0.1:{port}: Address already in use"


def test_a_restart_logs_only_the_offsets_partitions_with_records(tmp_path: Path) -> None:
    # the group's offsets partition is the last of the 50 the coordinator loads in order
    # (odradek.coordinator.codec.partition_for("restart-18", 50) == 49)
    group = "restart-18"
    args = [
        "serve",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        f"log.dirs={tmp_path}",
        "--override",
        "group.initial.rebalance.delay.ms=0",
    ]
    with running(args) as first:
        bootstrap = ready_bootstrap(first)
        odradek_produce_input(bootstrap, "events", "hello\n")
        assert consume_one(bootstrap, "events", "--group", group) == "hello\n"
        first.stop()
    with running(args) as second:
        bootstrap = ready_bootstrap(second)
        odradek_produce_input(bootstrap, "events", "again\n")
        # served from the committed offset: the group's partition, the last, has been loaded
        assert consume_one(bootstrap, "events", "--group", group) == "again\n"
        err = second.stop()
    loaded = [line for line in err if "loaded __consumer_offsets-" in line]
    assert len(loaded) == 1, loaded  # the one partition with the group, not 50 lines
    assert "loaded __consumer_offsets-49: " in loaded[0] and "1 groups" in loaded[0]


# -- dev and cluster when 9092 is taken -----------------------------------------------------------


@contextmanager
def port_taken(port: int) -> Iterator[None]:
    """Hold 127.0.0.1:`port` (if another process already does, it is taken all the same)."""
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        yield
    finally:
        s.close()


def test_dev_moves_to_a_free_port_when_9092_is_taken() -> None:
    with port_taken(9092), running(["dev"]) as dev:
        bootstrap = dev.line()
        assert bootstrap.startswith("127.0.0.1:") and bootstrap != "127.0.0.1:9092"
        listed = odradek("topics", "list", "-b", bootstrap)
        assert listed.returncode == 0, listed.stderr
        err = dev.stop()
    said = [line for line in err if "9092" in line]
    assert said == [
        f"odradek: port 9092 is taken (another Kafka?): this dev broker is on {bootstrap}; "
        f"give client commands -b {bootstrap}"
    ]


def test_cluster_moves_to_free_ports_when_9092_is_taken(tmp_path: Path) -> None:
    args = ["cluster", "--brokers", "3", "--base-dir", str(tmp_path)]
    with port_taken(9092), running(args) as cluster:
        bootstrap = ready_bootstrap(cluster)
        ports = [int(address.rsplit(":", 1)[1]) for address in bootstrap.split(",")]
        assert len(ports) == 3 and not set(ports) & {9092, 9093, 9094}
        listed = odradek("cluster", "-b", bootstrap, "--json")
        assert listed.returncode == 0, listed.stderr
        err = cluster.stop()
    said = [line for line in err if line.startswith("odradek:")]
    assert said == [
        "odradek: ports 9092-9094 are not all free (another Kafka?): the brokers listen on free "
        "ports instead (listed below)"
    ]


def test_client_commands_say_where_they_looked_when_nothing_listens_at_the_default() -> None:
    with socket.socket() as hold:  # bound, not listening: connections to 127.0.0.1:9092 refused
        try:
            hold.bind(("127.0.0.1", 9092))
        except OSError:
            pytest.skip("something listens on 127.0.0.1:9092")
        line = one_error_line(odradek("topics", "list", "--connect-timeout-ms", "500"))
    assert "cannot connect to a broker" in line
    assert "localhost:9092 is the default" in line and "--bootstrap-server" in line


def test_dev_and_cluster_on_a_taken_port_they_were_given_are_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_error_line(odradek("dev", "--port", str(port)))
        assert line == f"odradek: cannot listen on 127.0.0.1:{port}: the port is taken"
        base = ["cluster", "--brokers", "2", "--base-dir", str(tmp_path)]
        line = one_error_line(odradek(*base, "--port", str(port - 1)))
    assert line == f"odradek: cannot listen on 127.0.0.1:{port - 1}-{port}: a port is taken"
