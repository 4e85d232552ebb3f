"""librdkafka (confluent-kafka) authenticates against odradek.security's SaslConnection over a
real socket (tests/security/sasl_listener.py, a minimal listener that records the principal once
the client moves on to Metadata). An independent client implementation checks the mechanisms'
wire formats and that Kafka's failure messages reach the client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.security.sasl_listener import Listener, default_connection, sasl_listener

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture
def listener() -> Iterator[Listener]:
    with sasl_listener() as server:
        yield server


def _run_client(listener: Listener, **config: Any) -> tuple[tuple[str, str | None], list[str]]:
    """Start a producer with ``config`` and poll until the listener saw an outcome."""
    errors: list[str] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{listener.port}",
            "client.id": "rdkafka",
            "security.protocol": "SASL_PLAINTEXT",
            "error_cb": lambda err: errors.append(str(err)),
            "log_level": 0,
            "reconnect.backoff.ms": 5000,
            **config,
        }
    )
    outcome = None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            producer.poll(0.05)
            outcome = listener.outcome("rdkafka")
            if outcome and (outcome[0] == "authenticated" or errors):
                break
    finally:
        del producer
    assert outcome is not None, errors
    return outcome, errors


def _password(mechanism: str, password: str = "alice-secret") -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms(listener: Listener, mechanism: str) -> None:
    outcome, _ = _run_client(listener, **_password(mechanism))
    assert outcome == ("authenticated", "User:alice")


def test_scram_wrong_password_reaches_the_client_with_kafkas_message(listener: Listener) -> None:
    outcome, errors = _run_client(listener, **_password("SCRAM-SHA-256", "nope"))
    message = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert outcome == ("failed", message)
    assert any(message in error for error in errors), errors


def _oauth(config: str) -> dict[str, Any]:
    return {
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": config,
    }


def test_oauthbearer_unsecured_jwt(listener: Listener) -> None:
    outcome, _ = _run_client(listener, **_oauth("principal=svc scope=kafka,other"))
    assert outcome == ("authenticated", "User:svc")


def test_oauthbearer_missing_scope_fails_with_the_json_error(listener: Listener) -> None:
    outcome, errors = _run_client(listener, **_oauth("principal=svc scope=other"))
    assert outcome == ("failed", '{"status":"insufficient_scope", "scope":"[kafka]"}')
    assert any("insufficient_scope" in error for error in errors), errors


def test_unknown_mechanism_is_refused(listener: Listener) -> None:
    listener.new_connection = partial(default_connection, ["SCRAM-SHA-512"])
    outcome, errors = _run_client(listener, **_password("PLAIN", "x"))
    assert outcome == ("unsupported", None)
    assert any("SCRAM-SHA-512" in error for error in errors), errors
