"""aiokafka's own SASL implementations (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) against
odradek.security's SaslConnection over a socket (tests/security/sasl_listener.py), with
SaslAuthenticate framing and with the bare tokens of a v0 SaslHandshake."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider

from odradek.security.oauthbearer import unsecured_token
from tests.security.sasl_listener import Listener, sasl_listener

GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


@pytest.fixture(params=["framed", "v0"])
def listener(request: pytest.FixtureRequest) -> Iterator[Listener]:
    with sasl_listener() as server:
        if request.param == "v0":  # SaslHandshake v0 only: tokens without SaslAuthenticate
            server.api_versions = [(18, 0, 0), (17, 0, 0), (3, 0, 4)]
        yield server


class _Token(AbstractTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


def _connect(listener: Listener, **config: Any) -> str | None:
    async def run() -> str | None:
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{listener.port}",
            client_id="aiokafka",
            security_protocol="SASL_PLAINTEXT",
            request_timeout_ms=5000,
            **config,
        )
        try:
            await asyncio.wait_for(producer.start(), 10)
        except Exception as e:  # the listener ends the connection after authentication
            return f"{type(e).__name__}: {e}"
        finally:
            await producer.stop()
        return None

    return asyncio.run(run())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms(listener: Listener, mechanism: str) -> None:
    _connect(
        listener,
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    assert listener.outcome("aiokafka") == ("authenticated", "User:alice")


def test_wrong_scram_password(listener: Listener, caplog: pytest.LogCaptureFixture) -> None:
    error = _connect(
        listener,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password="nope",
    )
    assert listener.outcome("aiokafka") == ("failed", GENERIC.format("SCRAM-SHA-512"))
    assert error is not None
    if listener.api_versions[1] == (17, 0, 1):  # SaslAuthenticate carries the message
        assert f"SaslAuthenticationFailed: {GENERIC.format('SCRAM-SHA-512')}" in caplog.text


def test_oauthbearer(listener: Listener) -> None:
    _connect(
        listener,
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=_Token(unsecured_token("svc", scope=["kafka"])),
    )
    assert listener.outcome("aiokafka") == ("authenticated", "User:svc")
