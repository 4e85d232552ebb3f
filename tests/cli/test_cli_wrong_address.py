"""A wrong address fails at once with what is wrong, as kcat does, not after the connect
timeout: an unresolvable host, a port nothing listens on, and a PLAINTEXT command pointed at a
TLS or SASL listener. Each command is given a 10-minute --connect-timeout-ms and must end, with
its one-line error, within the 60 s the test waits for a subprocess."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat_tests.harness import free_port
from odradek.testing import Broker
from tests.cli.cli_run import one_line_error, run_odradek

LONG = ["--connect-timeout-ms", "600000"]
COMMANDS = {
    "topics list": (["topics", "list"], None),
    "groups list": (["groups", "list"], None),
    "consume": (["consume", "t", "--max-messages", "1"], None),
    "produce": (["produce", "t"], "line\n"),
}


def run(command: str, bootstrap: str) -> str:
    args, stdin = COMMANDS[command]
    proc = run_odradek(*args, "--bootstrap-server", bootstrap, *LONG, stdin=stdin, status=1)
    return one_line_error(proc)


@pytest.mark.parametrize("command", COMMANDS)
def test_unresolvable_host(command: str) -> None:
    # .invalid never resolves (RFC 6761)
    error = run(command, "no-such-broker.invalid:9092")
    assert "cannot resolve host 'no-such-broker.invalid'" in error


@pytest.mark.parametrize("command", COMMANDS)
def test_refused_port(command: str) -> None:
    port = free_port()
    error = run(command, f"127.0.0.1:{port}")
    assert f"127.0.0.1:{port} refused the connection" in error


@pytest.fixture(scope="module", params=["ssl", "sasl_plaintext", "sasl_ssl"])
def secure_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    with Broker(security=request.param) as broker:
        yield broker


@pytest.mark.parametrize("command", COMMANDS)
def test_plaintext_command_at_a_secure_listener(secure_broker: Broker, command: str) -> None:
    error = run(command, secure_broker.bootstrap)
    assert secure_broker.security is not None
    if secure_broker.security.protocol == "SASL_PLAINTEXT":
        assert "is a SASL listener (SASL_PLAINTEXT)" in error
    else:
        assert "is a TLS listener" in error
    assert "--command-config" in error
    assert "odradek dev" not in error


def test_a_refused_server_beside_a_live_one_is_no_error(odradek_broker: Broker) -> None:
    topic = odradek_broker.create_topic("beside-a-refused-one")
    servers = f"127.0.0.1:{free_port()},{odradek_broker.bootstrap}"
    out = run_odradek("topics", "list", "-b", servers, *LONG).stdout
    assert topic in out.split()
