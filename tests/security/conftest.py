"""The client matrix's brokers (tests/security/test_clients_*.py): one in-process broker per
security mode for the whole session, shared by every client's tests.

`secure_broker` is parametrized over MODES (ids such as `sasl_ssl-SCRAM-SHA-256`); each mode's
broker starts on first use and stops at the end of the session."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from odradek.testing import Broker

# (security, mechanism): SSL, mutual TLS, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM and
# OAUTHBEARER (Kafka's unsecured JWS validator)
MODES: list[tuple[str, str | None]] = [
    ("ssl", None),
    ("mtls", None),
    ("sasl_plaintext", "PLAIN"),
    ("sasl_plaintext", "SCRAM-SHA-256"),
    ("sasl_ssl", "PLAIN"),
    ("sasl_ssl", "SCRAM-SHA-256"),
    ("sasl_ssl", "SCRAM-SHA-512"),
    ("sasl_ssl", "OAUTHBEARER"),
]
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


def mode_id(mode: tuple[str, str | None]) -> str:
    return mode[0] if mode[1] is None else f"{mode[0]}-{mode[1]}"


@pytest.fixture(scope="session")
def _secure_brokers() -> Iterator[dict[tuple[str, str | None], Broker]]:
    started: dict[tuple[str, str | None], Broker] = {}
    yield started
    for broker in started.values():
        broker.stop()


@pytest.fixture(scope="session")
def secure_broker_for(
    _secure_brokers: dict[tuple[str, str | None], Broker],
) -> Callable[[str, str | None], Broker]:
    """`secure_broker_for("sasl_ssl", "PLAIN")`: the session's broker for that mode."""

    def get(security: str, mechanism: str | None = None) -> Broker:
        mode = (security, mechanism)
        if mode not in _secure_brokers:
            _secure_brokers[mode] = Broker(
                config=BROKER_CONFIG, security=security, mechanism=mechanism, users=USERS
            ).start()
        return _secure_brokers[mode]

    return get


@pytest.fixture(params=MODES, ids=mode_id)
def secure_broker(
    request: pytest.FixtureRequest, secure_broker_for: Callable[[str, str | None], Broker]
) -> Broker:
    """The session's broker for this security mode (started on first use)."""
    return secure_broker_for(*request.param)
