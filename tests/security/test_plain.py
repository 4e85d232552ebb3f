"""SASL/PLAIN (odradek.security.sasl.PlainServer) with Kafka's messages, the user table from a
listener's JAAS config, and create_server."""

from __future__ import annotations

import pytest
from kafka.net.sasl.plain import SaslMechanismPlain

from odradek.security.errors import AuthenticationError
from odradek.security.jaas import parse_jaas_config, plain_users
from odradek.security.oauthbearer import OAuthBearerServer
from odradek.security.sasl import (
    PlainServer,
    create_server,
    plain_authenticator,
    plain_client_response,
)
from odradek.security.scram import ScramServer
from odradek.wire.errors import ErrorCode

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


def server() -> PlainServer:
    return PlainServer(plain_authenticator(plain_users(parse_jaas_config(JAAS))))


def test_kafka_python_plain_client_authenticates() -> None:
    client = SaslMechanismPlain(
        sasl_plain_username="alice", sasl_plain_password="alice-secret", sasl_mechanism="PLAIN"
    )
    plain = server()
    assert plain.step(client.auth_bytes()) == b""
    assert plain.complete and plain.principal == "alice" and plain.credential_expiry_ms is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (plain_client_response("alice", "wrong"), "Invalid username or password"),
        (plain_client_response("nobody", "alice-secret"), "Invalid username or password"),
        (plain_client_response("", "x"), "username not specified"),
        (plain_client_response("alice", ""), "password not specified"),
        (
            plain_client_response("alice", "alice-secret", authzid="admin"),
            "Client requested an authorization id that is different from username",
        ),
    ],
)
def test_refusals_carry_kafkas_public_message(message: bytes, expected: str) -> None:
    plain = server()
    with pytest.raises(AuthenticationError) as info:
        plain.step(message)
    assert info.value.public and info.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert info.value.client_message() == f"Authentication failed: {expected}"
    assert not plain.complete and plain.principal is None


def test_authzid_equal_to_user_is_accepted() -> None:
    plain = server()
    plain.step(plain_client_response("admin", "admin-secret", authzid="admin"))
    assert plain.principal == "admin"


@pytest.mark.parametrize(("message", "count"), [(b"alice", 1), (b"a\0b", 2), (b"a\0b\0c\0d", 4)])
def test_token_count(message: bytes, count: int) -> None:
    with pytest.raises(AuthenticationError) as info:
        server().step(message)
    assert str(info.value) == f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}"


def test_authenticator_failure_and_second_step() -> None:
    def broken(user: str, password: str) -> bool:
        raise OSError("down")

    with pytest.raises(AuthenticationError, match="could not be verified"):
        PlainServer(broken).step(plain_client_response("a", "b"))
    plain = server()
    plain.step(plain_client_response("alice", "alice-secret"))
    with pytest.raises(AuthenticationError):
        plain.step(plain_client_response("alice", "alice-secret"))


def test_create_server_by_mechanism() -> None:
    users = plain_authenticator({"u": "p"})
    assert isinstance(create_server("PLAIN", plain=users), PlainServer)
    scram = create_server("SCRAM-SHA-512", scram_credentials=lambda u, m: None)
    assert isinstance(scram, ScramServer) and scram.mechanism_name == "SCRAM-SHA-512"
    assert isinstance(create_server("OAUTHBEARER"), OAuthBearerServer)
    for mechanism, kwargs in (("PLAIN", {}), ("SCRAM-SHA-256", {}), ("GSSAPI", {"plain": users})):
        with pytest.raises(ValueError):
            create_server(mechanism, **kwargs)  # type: ignore[arg-type]
