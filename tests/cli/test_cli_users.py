"""`odradek users` (kafka-configs.sh --entity-type users with SCRAM-SHA-256/512, and add / delete
/ list) run as a user runs it: the CLI in a subprocess against a real broker with a PLAINTEXT
listener (administration) and a SASL_PLAINTEXT one (SCRAM logins). A user the CLI adds logs in
with the password, never sent to the broker; a deleted one no longer does; the describe lines
are kafka-configs.sh's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from odradek.testing import Broker
from tests.cli.cli_run import one_line_error, run_odradek
from tests.security.scram_login import TIMED_OUT, scram_login

WAIT_S = 15.0


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    }
    with Broker(config=config) as b:
        yield b


def cli(
    broker: Broker, *args: str, status: int = 0, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_odradek("users", *args, bootstrap=broker.bootstrap, status=status, stdin=stdin)


def login(broker: Broker, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """Whether confluent-kafka logs in on the broker's SASL listener (and lists topics)."""
    assert broker.server is not None
    sasl = f"127.0.0.1:{broker.server.bound[1].port}"
    error = scram_login(sasl, user, password, mechanism, WAIT_S)
    if error == TIMED_OUT:
        raise AssertionError("neither logged in nor refused")
    return error is None


def test_add_login_delete(broker: Broker) -> None:
    out = cli(broker, "add", "alice", "--password", "alice-secret").stdout
    assert out.strip() == "User alice: SCRAM-SHA-256 credentials set."
    assert login(broker, "alice", "alice-secret")
    assert not login(broker, "alice", "wrong")
    assert not login(broker, "alice", "alice-secret", "SCRAM-SHA-512")

    # the password from standard input, both mechanisms, more iterations
    cli(
        broker,
        "add",
        "alice",
        "--mechanism",
        "SCRAM-SHA-256",
        "--mechanism",
        "SCRAM-SHA-512",
        "--iterations",
        "8192",
        stdin="new-secret\n",
    )
    assert login(broker, "alice", "new-secret", "SCRAM-SHA-512")
    assert not login(broker, "alice", "alice-secret")
    assert cli(broker, "list").stdout.splitlines() == ["alice\tSCRAM-SHA-256, SCRAM-SHA-512"]
    assert json.loads(cli(broker, "list", "--json").stdout) == [
        {
            "user": "alice",
            "credentials": [
                {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
                {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
            ],
        }
    ]
    # the broker holds no password
    assert broker.server is not None
    assert "new-secret" not in json.dumps(broker.server.store.scram_credentials)

    cli(broker, "delete", "alice", "--mechanism", "SCRAM-SHA-512")
    assert not login(broker, "alice", "new-secret", "SCRAM-SHA-512")
    assert login(broker, "alice", "new-secret")
    out = cli(broker, "delete", "alice").stdout
    assert out.strip() == "User alice: SCRAM-SHA-256 credentials deleted."
    assert not login(broker, "alice", "new-secret")
    assert cli(broker, "list").stdout == ""
    error = one_line_error(cli(broker, "delete", "alice", status=1))
    assert error == "odradek: RESOURCE_NOT_FOUND: user alice has no SCRAM credentials"


def test_kafka_configs_spelling(broker: Broker) -> None:
    out = cli(
        broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=bob-secret],SCRAM-SHA-512=[password=bob-secret]",
    ).stdout
    assert out.strip() == "Completed updating config for user bob."
    assert login(broker, "bob", "bob-secret", "SCRAM-SHA-512")
    cli(broker, "add", "carol", "--password", "c")
    describe = cli(broker, "--describe", "--entity-type", "users").stdout.splitlines()
    assert describe == [
        "SCRAM credential configs for user-principal 'bob' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=4096",
    ]
    one = cli(broker, "--describe", "--entity-type", "users", "--entity-name", "bob").stdout
    assert one.splitlines() == describe[:1]
    # a user without credentials: nothing, as kafka-configs.sh
    assert cli(broker, "--describe", "--entity-name", "nobody").stdout == ""

    cli(broker, "--alter", "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512")
    assert not login(broker, "bob", "bob-secret", "SCRAM-SHA-512")
    assert login(broker, "bob", "bob-secret")
    for user in ("bob", "carol"):
        cli(broker, "delete", user)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["add", "dave", "--password", "x", "--iterations", "1000"],
            "odradek: UNACCEPTABLE_CREDENTIAL: Too few iterations "
            "(SCRAM-SHA-256 needs at least 4096)",
        ),
        (
            ["--alter", "--entity-name", "dave", "--add-config", "SCRAM-SHA-1=[password=x]"],
            "odradek: Invalid config(s): SCRAM-SHA-1 (odradek users takes SCRAM-SHA-256, "
            "SCRAM-SHA-512; client quotas: odradek quotas)",
        ),
        (
            ["--alter", "--entity-name", "dave", "--add-config", "SCRAM-SHA-256=[iterations=5000]"],
            "odradek: SCRAM-SHA-256: a password is required (SCRAM-SHA-256=[password=...])",
        ),
        (
            ["--alter", "--entity-name", "dave", "--delete-config", "SCRAM-SHA-256"],
            "odradek: RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist",
        ),
        (
            ["--alter", "--add-config", "SCRAM-SHA-256=[password=x]"],
            "odradek: --alter needs --entity-type users --entity-name USER",
        ),
        ([], "odradek: give --describe, --alter, or one of: add, delete, list"),
    ],
)
def test_refusals_are_one_line(broker: Broker, args: list[str], message: str) -> None:
    assert one_line_error(cli(broker, *args, status=1)) == message
    assert broker.server is not None
    assert broker.server.store.scram_credentials == {}
