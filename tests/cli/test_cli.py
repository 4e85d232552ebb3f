"""The shell CLI, run as users run it: `python -m odradek ...` subprocesses against a real broker
(odradek.testing.Broker in this process, or `odradek dev` as a subprocess), checking what they
print and their exit status. Also the fault-injection admin HTTP endpoint they talk to.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from odradek.cli_commands.output import Progress, table
from odradek.testing import Broker
from odradek.testing.polling import poll_until
from tests.cli.cli_run import REPO, RUN_TIMEOUT_S, run_odradek, start_odradek
from tests.cli.cli_run import one_line_error as _one_line_error

_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = {"group.initial.rebalance.delay.ms": "0", "odradek.admin.listen": "127.0.0.1:0"}
    with Broker(topics={"seeded": 2}, config=config) as b:
        yield b


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A topic / group name unique to the test."""
    return f"{request.node.name[:60].replace('[', '-').replace(']', '')}-{next(_names)}"


def admin_url(broker: Broker) -> str:
    return broker.call(lambda server: server.admin_http.url)


def cli(
    broker: Broker | None,
    *args: str,
    stdin: str | None = None,
    status: int | None = 0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m odradek ARGS` (bootstrap and admin address from the environment)."""
    extra = dict(env or {})
    if broker is not None:  # what the environment (or env) names wins
        for key, value in (
            ("ODRADEK_BOOTSTRAP", broker.bootstrap),
            ("ODRADEK_ADMIN", admin_url(broker)),
        ):
            extra.setdefault(key, os.environ.get(key, value))
    return run_odradek(*args, stdin=stdin, status=status, env=extra)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0
    return _one_line_error(proc)


def rows(output: str) -> list[list[str]]:
    """A printed table as lists of cells (columns are separated by two or more spaces)."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


# -- topics -------------------------------------------------------------------------------------


def test_topics_create_list_describe_alter_delete(broker: Broker, name: str) -> None:
    out = cli(
        broker,
        "topics",
        "create",
        name,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
        "--config",
        "max.message.bytes=2048",
    ).stdout
    assert f"Created topic {name} with 3 partitions" in out

    listed = rows(cli(broker, "topics", "list").stdout)
    assert listed[0] == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"]
    assert [name, "3", "1"] in listed
    as_json = json.loads(cli(broker, "topics", "list", "--json").stdout)
    assert {"name": name, "partitions": 3, "replication_factor": 1, "internal": False} in as_json

    described = cli(broker, "topics", "describe", name).stdout
    head, *table_lines = described.strip().splitlines()
    assert f"Topic: {name}" in head and "PartitionCount: 3" in head
    assert "ReplicationFactor: 1" in head
    assert "max.message.bytes=2048" in head and "retention.ms=3600000" in head
    assert "cleanup.policy" not in head  # defaults are left out
    assert [r[:5] for r in rows("\n".join(table_lines))] == [
        ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"],
        ["0", "0", "0", "0", "0"],
        ["1", "0", "0", "0", "0"],
        ["2", "0", "0", "0", "0"],
    ]

    cli(
        broker,
        "topics",
        "alter",
        name,
        "--config",
        "cleanup.policy=compact",
        "--delete-config",
        "retention.ms",
        "--partitions",
        "5",
    )
    doc = json.loads(cli(broker, "topics", "describe", name, "--json").stdout)
    assert doc["name"] == name and doc["partition_count"] == 5
    assert doc["configs"] == {"cleanup.policy": "compact", "max.message.bytes": "2048"}
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in doc["partitions"]] == [
        (i, 0, [0], [0]) for i in range(5)
    ]

    out = cli(broker, "topics", "delete", name).stdout
    assert out.strip() == f"Deleted topic {name}."
    assert name not in [
        t["name"] for t in json.loads(cli(broker, "topics", "list", "--json").stdout)
    ]


def test_topic_errors_are_one_line_with_nonzero_status(broker: Broker, name: str) -> None:
    cli(broker, "topics", "create", name, "--partitions", "1")
    err = one_line_error(cli(broker, "topics", "create", name, status=1))
    assert "TOPIC_ALREADY_EXISTS" in err
    assert "already exists" in cli(broker, "topics", "create", name, "--if-not-exists").stdout
    assert "does not exist" in one_line_error(
        cli(broker, "topics", "describe", name + "-missing", status=1)
    )
    assert "INVALID_CONFIG" in one_line_error(
        cli(broker, "topics", "alter", name, "--config", "no.such.key=1", status=1)
    )
    assert "INVALID_PARTITIONS" in one_line_error(
        cli(broker, "topics", "alter", name, "--partitions", "1", status=1)
    )
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_line_error(
        cli(broker, "topics", "delete", name + "-missing", status=1)
    )
    assert "needs key=value" in one_line_error(
        cli(broker, "topics", "create", name + "-x", "--config", "oops", status=1)
    )


def test_unreachable_broker_is_a_clear_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = cli(
        None,
        "topics",
        "list",
        "--bootstrap-server",
        f"127.0.0.1:{port}",
        "--connect-timeout-ms",
        "500",
        status=1,
    )
    assert "cannot connect to a broker" in one_line_error(proc)


def test_options_go_before_or_after_the_subcommand(broker: Broker) -> None:
    env = {"ODRADEK_BOOTSTRAP": "127.0.0.1:1"}  # overridden by the option
    proc = cli(None, "topics", "--json", "--bootstrap-server", broker.bootstrap, "list", env=env)
    assert "seeded" in [t["name"] for t in json.loads(proc.stdout)]
    proc = cli(None, "topics", "list", "--bootstrap-server", broker.bootstrap, "--json", env=env)
    assert "seeded" in [t["name"] for t in json.loads(proc.stdout)]


def test_missing_subcommand_is_a_usage_error() -> None:
    proc = cli(None, "topics", status=2)
    assert "usage: odradek topics" in proc.stderr


# -- produce / consume --------------------------------------------------------------------------


def test_produce_keys_and_headers_then_consume_them_back(broker: Broker, name: str) -> None:
    cli(broker, "topics", "create", name, "--partitions", "2")
    out = cli(
        broker,
        "produce",
        name,
        "--key-separator",
        ":",
        "--header",
        "source=cli",
        "--header",
        "n=1",
        "--partition",
        "1",
        "--acks",
        "all",
        stdin="k1:hello\nk2:world:with:colons\nk3:\r\n",
    ).stdout
    assert out.strip() == f"Produced 3 records to {name}."

    proc = cli(
        broker,
        "consume",
        name,
        "--from-beginning",
        "--max",
        "3",
        "--print-key",
        "--print-headers",
        "--timeout-ms",
        "20000",
    )
    assert proc.stdout.splitlines() == [
        "source:cli,n:1\tk1\thello",
        "source:cli,n:1\tk2\tworld:with:colons",
        "source:cli,n:1\tk3\t",
    ]
    assert "Processed a total of 3 messages" in proc.stderr

    records = [
        json.loads(line)
        for line in cli(
            broker,
            "consume",
            name,
            "--from-beginning",
            "--max",
            "3",
            "--json",
            "--timeout-ms",
            "20000",
        ).stdout.splitlines()
    ]
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in records] == [
        (1, 0, "k1", "hello"),
        (1, 1, "k2", "world:with:colons"),
        (1, 2, "k3", ""),
    ]
    assert records[0]["headers"] == [["source", "cli"], ["n", "1"]]


def test_consume_values_only_stops_on_max_or_timeout(broker: Broker, name: str) -> None:
    cli(broker, "topics", "create", name, "--partitions", "3")
    lines = [f"line {i}" for i in range(30)]
    cli(broker, "produce", name, "--acks", "1", stdin="\n".join(lines) + "\n")
    got = cli(broker, "consume", name, "--from-beginning", "--timeout-ms", "1500").stdout
    assert sorted(got.splitlines()) == sorted(lines)
    got = cli(broker, "consume", name, "--from-beginning", "--max", "7").stdout
    assert len(got.splitlines()) == 7
    # without --from-beginning it starts at the end: nothing old shows up
    proc = cli(broker, "consume", name, "--timeout-ms", "800")
    assert proc.stdout == "" and "Processed a total of 0 messages" in proc.stderr


def test_produce_errors(broker: Broker, name: str) -> None:
    cli(broker, "topics", "create", name)
    err = one_line_error(
        cli(broker, "produce", name, "--key-separator", "=", stdin="a=1\nno separator\n", status=1)
    )
    assert "No key separator found on line number 2: 'no separator'" in err
    assert "does not exist" in one_line_error(
        cli(broker, "consume", name + "-missing", "--max", "1", status=1)
    )


def test_consume_with_group_commits_what_it_printed(broker: Broker, name: str) -> None:
    cli(broker, "topics", "create", name)
    cli(broker, "produce", name, stdin="".join(f"m{i}\n" for i in range(5)))
    first = cli(
        broker,
        "consume",
        name,
        "--group",
        name,
        "--from-beginning",
        "--max",
        "3",
        "--timeout-ms",
        "20000",
    ).stdout
    assert first.splitlines() == ["m0", "m1", "m2"]
    rest = cli(
        broker,
        "consume",
        name,
        "--group",
        name,
        "--from-beginning",
        "--max",
        "2",
        "--timeout-ms",
        "20000",
    ).stdout
    assert rest.splitlines() == ["m3", "m4"]


# -- groups -------------------------------------------------------------------------------------


def _group_with_commits(broker: Broker, topic: str, group: str) -> KafkaConsumer:
    """A live kafka-python group member that consumed and committed 6 of 10 records."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send(topic, value=b"v%d" % i, partition=i % 2)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        client_id="lag-checker",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = poll_until(consumer, lambda got: len(got) >= 6, 30, max_records=6)
    assert len(got) == 6, f"assigned {consumer.assignment()}"
    consumer.commit()
    return consumer


def test_groups_list_describe_reset_delete(broker: Broker, name: str) -> None:
    topic, group = name, name + "-g"
    cli(broker, "topics", "create", topic, "--partitions", "2")
    consumer = _group_with_commits(broker, topic, group)
    try:
        listed = json.loads(cli(broker, "groups", "list", "--json").stdout)
        assert {
            "group": group,
            "protocol_type": "consumer",
            "state": "Stable",
            "type": "classic",
        } in listed
        assert [group, "consumer", "Stable", "classic"] in rows(
            cli(broker, "groups", "list").stdout
        )

        desc = json.loads(cli(broker, "groups", "describe", group, "--json").stdout)
        assert desc["state"] == "Stable" and desc["protocol"] == "range"
        [member] = desc["members"]
        assert member["client_id"] == "lag-checker" and member["host"]
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [
            (topic, 0),
            (topic, 1),
        ]
        parts = {p["partition"]: p for p in desc["partitions"]}
        assert sum(p["current_offset"] for p in parts.values()) == 6
        assert all(p["log_end_offset"] == 5 for p in parts.values())
        assert sum(p["lag"] for p in parts.values()) == 4
        assert all(p["consumer_id"] == member["member_id"] for p in parts.values())

        text = cli(broker, "groups", "describe", group).stdout
        assert f"Group: {group}  State: Stable  Protocol: consumer/range  Members: 1" in text
        assert "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in text and "lag-checker" in text

        err = one_line_error(
            cli(
                broker,
                "groups",
                "reset-offsets",
                group,
                "--topic",
                topic,
                "--to-earliest",
                "--execute",
                status=1,
            )
        )
        assert "inactive" in err and "Stable" in err
        assert "NON_EMPTY_GROUP" in one_line_error(cli(broker, "groups", "delete", group, status=1))
    finally:
        consumer.close()

    committed = {
        p["partition"]: p["current_offset"]
        for p in json.loads(cli(broker, "groups", "describe", group, "--json").stdout)["partitions"]
    }
    dry = cli(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert rows(dry.stdout)[1:] == [
        [group, topic, "0", str(committed[0]), "0"],
        [group, topic, "1", str(committed[1]), "0"],
    ]
    assert "Dry run" in dry.stderr
    after_dry = json.loads(cli(broker, "groups", "describe", group, "--json").stdout)
    assert {p["partition"]: p["current_offset"] for p in after_dry["partitions"]} == committed
    assert after_dry["state"] == "Empty"

    cli(
        broker,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:0",
        "--to-offset",
        "2",
        "--execute",
    )
    cli(
        broker,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:1",
        "--to-latest",
        "--execute",
    )
    parts = {
        p["partition"]: p
        for p in json.loads(cli(broker, "groups", "describe", group, "--json").stdout)["partitions"]
    }
    assert (parts[0]["current_offset"], parts[0]["lag"]) == (2, 3)
    assert (parts[1]["current_offset"], parts[1]["lag"]) == (5, 0)

    reset = json.loads(
        cli(
            broker,
            "groups",
            "reset-offsets",
            group,
            "--all-topics",
            "--to-datetime",
            "2001-01-01T00:00:00Z",
            "--execute",
            "--json",
        ).stdout
    )
    assert reset["executed"] and [p["new_offset"] for p in reset["partitions"]] == [0, 0]

    assert (
        cli(broker, "groups", "delete", group).stdout.strip() == f"Deleted consumer group {group}."
    )
    assert "does not exist" in one_line_error(cli(broker, "groups", "describe", group, status=1))


# -- cluster ------------------------------------------------------------------------------------


def test_cluster(broker: Broker) -> None:
    doc = json.loads(cli(broker, "cluster", "--json").stdout)
    cluster_id = broker.call(lambda server: server.cluster_id)
    assert doc["cluster_id"] == cluster_id and doc["controller_id"] == 0
    assert doc["brokers"] == [
        {"id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None, "fenced": False}
    ]
    assert doc["offline_partitions"] == [] and doc["partitions"] >= 2
    text = cli(broker, "cluster").stdout
    assert f"Cluster id:  {cluster_id}" in text and "Controller:  0" in text
    assert ["0", "127.0.0.1", str(broker.port), "-", "yes"] in rows(text)


# -- dev ----------------------------------------------------------------------------------------


def test_dev_prints_a_bootstrap_clients_can_use_and_exits_0_on_sigterm() -> None:
    proc, lines = start_odradek("dev", "--topic", "events:3", "--admin", "--json")
    try:
        info = json.loads(lines.get(timeout=30))
        assert Path(info["data_dir"]).is_dir()
        admin = KafkaAdminClient(bootstrap_servers=info["bootstrap"])
        try:
            [topic] = admin.describe_topics(["events"])
            assert len(topic["partitions"]) == 3
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=info["bootstrap"])
        producer.send("events", b"hello", partition=2).get(timeout=10)
        producer.close()
        got = cli(
            None,
            "consume",
            "events",
            "--from-beginning",
            "--max",
            "1",
            "--bootstrap-server",
            info["bootstrap"],
        ).stdout
        assert got == "hello\n"
        health = json.loads(cli(None, "fault", "status", "--json", "--admin", info["admin"]).stdout)
        assert health["bootstrap"] == info["bootstrap"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not Path(info["data_dir"]).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_dev_plain_output_is_the_bootstrap_line() -> None:
    proc, lines = start_odradek("dev")
    try:
        bootstrap = lines.get(timeout=30).strip()
        host, _, port = bootstrap.rpartition(":")
        assert host == "127.0.0.1" and port.isdigit()
        listed = json.loads(cli(None, "topics", "list", "--json", "-b", bootstrap).stdout)
        assert listed == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


# -- fault --------------------------------------------------------------------------------------


def test_fault_failures_are_retried_by_clients_or_reported(broker: Broker, name: str) -> None:
    cli(broker, "topics", "create", name)
    before = json.loads(cli(broker, "fault", "status", "--json").stdout)["injected"]
    out = cli(broker, "fault", "fail", "produce", "NOT_LEADER_OR_FOLLOWER", "--count", "2").stdout
    assert (
        out.strip() == "Armed: fail with NOT_LEADER_OR_FOLLOWER on the next 2 PRODUCE request(s)."
    )
    status = json.loads(cli(broker, "fault", "status", "--json").stdout)
    assert status["rules"] == [
        {
            "api": "PRODUCE",
            "api_key": 0,
            "remaining": 2,
            "error": "NOT_LEADER_OR_FOLLOWER",
            "delay_ms": 0,
        }
    ]
    # a retriable error: the producer retries and the records get through
    cli(broker, "produce", name, stdin="a\nb\n")
    status = json.loads(cli(broker, "fault", "status", "--json").stdout)
    assert status["injected"] == before + 2 and status["rules"] == []
    assert cli(broker, "consume", name, "--from-beginning", "--max", "2").stdout == "a\nb\n"

    # a fatal one: the producer gives up and the CLI says why
    cli(broker, "fault", "fail", "produce", "TOPIC_AUTHORIZATION_FAILED")
    err = one_line_error(cli(broker, "produce", name, stdin="c\n", status=1))
    assert "TOPIC_AUTHORIZATION_FAILED" in err


def test_fault_delay_pause_drop_and_clear(broker: Broker, name: str) -> None:
    delay = json.loads(
        cli(broker, "fault", "delay", "list_offsets", "300", "--count", "2", "--json").stdout
    )
    assert delay["armed"] == {
        "api": "LIST_OFFSETS",
        "api_key": 2,
        "remaining": 2,
        "error": None,
        "delay_ms": 300,
    }
    assert cli(broker, "fault", "clear").stdout.strip() == "All faults cleared."
    assert json.loads(cli(broker, "fault", "status", "--json").stdout)["rules"] == []

    cli(broker, "fault", "pause")
    assert json.loads(cli(broker, "fault", "status", "--json").stdout)["paused"] is True
    cli(broker, "fault", "resume")
    assert json.loads(cli(broker, "fault", "status", "--json").stdout)["paused"] is False

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.list_topics()
        dropped = json.loads(cli(broker, "fault", "drop-connections", "--json").stdout)
        assert dropped["dropped"] >= 1
        assert "seeded" in admin.list_topics()  # the client reconnects
    finally:
        admin.close()


def test_fault_errors(broker: Broker) -> None:
    assert "unknown error 'NO_SUCH_ERROR'" in one_line_error(
        cli(broker, "fault", "fail", "produce", "NO_SUCH_ERROR", status=1)
    )
    assert "unknown API 'nope'" in one_line_error(
        cli(broker, "fault", "delay", "nope", "10", status=1)
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert "cannot reach the admin endpoint" in one_line_error(
        cli(broker, "fault", "--admin", f"127.0.0.1:{port}", "clear", status=1)
    )
    assert "no admin endpoint" in one_line_error(
        cli(None, "fault", "clear", status=1, env={"ODRADEK_ADMIN": ""})
    )


# -- the admin endpoint over raw HTTP ----------------------------------------------------------


def _http(broker: Broker) -> http.client.HTTPConnection:
    host, _, port = admin_url(broker).removeprefix("http://").rpartition(":")
    return http.client.HTTPConnection(host, int(port), timeout=10)


def _call(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None
) -> tuple[int, dict]:
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_admin_endpoint_http(broker: Broker) -> None:
    conn = _http(broker)
    try:
        # several requests on one keep-alive connection
        status, health = _call(conn, "GET", "/health")
        assert status == 200 and health["status"] == "ok" and health["node_id"] == 0
        assert (
            _call(conn, "POST", "/faults/fail", b'{"api": 1, "error": 6, "count": 1}')[1]["armed"][
                "api"
            ]
            == "FETCH"
        )
        assert _call(conn, "POST", "/faults/clear")[0] == 200
        assert _call(conn, "GET", "/nope")[0] == 404
        assert _call(conn, "GET", "/faults/fail")[0] == 405
        assert _call(conn, "POST", "/faults/fail", b"{not json")[0] == 400
        assert _call(conn, "POST", "/faults/fail", b"[1]")[0] == 400
        status, answer = _call(conn, "POST", "/faults/delay", b'{"api": "fetch"}')
        assert status == 400 and answer == {"error": "missing 'ms'"}
        status, answer = _call(
            conn, "POST", "/faults/fail", b'{"api": "produce", "error": 6, "count": 0}'
        )
        assert status == 400 and "count" in answer["error"]
        assert _call(conn, "GET", "/faults")[1]["rules"] == []
    finally:
        conn.close()


def test_admin_endpoint_survives_garbage(broker: Broker) -> None:
    host, _, port = admin_url(broker).removeprefix("http://").rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"NONSENSE\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /faults/fail HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 413")
    conn = _http(broker)
    try:
        assert _call(conn, "GET", "/health")[0] == 200
    finally:
        conn.close()


def test_admin_endpoint_is_off_unless_configured() -> None:
    with Broker() as plain:
        assert plain.call(lambda server: server.admin_http is None)


# -- output helpers -----------------------------------------------------------------------------


def test_table_aligns_columns() -> None:
    assert table(["A", "LONGER"], [["xyz", 1], [None, [1, 2]]]) == ("A    LONGER\nxyz  1\n-    1,2")


def test_progress_line_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    stream = io.StringIO()
    progress = Progress("produce t", enabled=True, interval=0, stream=stream)
    progress.add(5)
    progress.add(5)
    progress.done()
    lines = stream.getvalue().splitlines()
    assert lines and lines[-1].startswith("produce t: 10 records")
    quiet = io.StringIO()
    Progress("x", stream=quiet).add(3)  # not a TTY and not asked for: nothing
    assert quiet.getvalue() == ""


def test_building_the_parser_does_not_load_the_kafka_client() -> None:
    code = (
        "import sys; from odradek.cli import build_parser; build_parser(); "
        "print(any(m == 'kafka' or m.startswith('kafka.') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.stdout.strip() == "False", out.stderr
