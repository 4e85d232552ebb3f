"""The per-connection SASL state (odradek.security.authenticator.SaslConnection): what a
connection answers before, during and after authentication, and KIP-368 re-authentication."""

from __future__ import annotations

from functools import partial

from odradek.security.authenticator import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    Route,
    SaslConnection,
)
from odradek.security.credentials import InMemoryCredentialStore
from odradek.security.oauthbearer import (
    UnsecuredValidator,
    client_initial_response,
    unsecured_token,
)
from odradek.security.sasl import create_server, plain_authenticator, plain_client_response
from odradek.security.scram import ScramClient, ScramMechanism, generate_credential
from odradek.wire.errors import ErrorCode

METADATA = 3
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"]


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def connection(clock: Clock, max_reauth_ms: int | None = None) -> SaslConnection:
    store = InMemoryCredentialStore()
    store.upsert(
        "alice",
        ScramMechanism.SCRAM_SHA_256,
        generate_credential(ScramMechanism.SCRAM_SHA_256, "alice-secret"),
    )
    factory = partial(
        create_server,
        plain=plain_authenticator({"alice": "alice-secret", "bob": "bob-secret"}),
        scram_credentials=store.get,
        oauthbearer=UnsecuredValidator(now_ms=clock),
    )
    return SaslConnection(MECHANISMS, factory, max_reauth_ms, now_ms=clock, wall_ms=clock)


def plain_login(conn: SaslConnection, user: str = "alice", password: str = "alice-secret") -> int:
    assert conn.route(SASL_HANDSHAKE).route is Route.HANDSHAKE
    assert conn.handshake("PLAIN").error_code == ErrorCode.NONE
    assert conn.route(SASL_AUTHENTICATE).route is Route.AUTHENTICATE
    result = conn.authenticate(plain_client_response(user, password))
    assert result.error_code == ErrorCode.NONE and result.complete, result
    return result.session_lifetime_ms


def test_api_versions_then_plain_then_requests() -> None:
    conn = connection(Clock())
    assert conn.route(API_VERSIONS).route is Route.HANDLE
    assert plain_login(conn) == 0
    assert conn.authenticated and conn.principal == "User:alice"
    assert conn.route(METADATA).route is Route.HANDLE
    assert conn.session_expiry_ms is None
    # SASL requests after authentication are refused without closing, as KafkaApis does.
    late = conn.route(SASL_AUTHENTICATE)
    assert late.route is Route.REFUSE and not late.close
    assert late.message == "SaslAuthenticate request received after successful authentication"
    assert conn.route(SASL_HANDSHAKE).route is Route.REFUSE


def test_scram_two_steps_and_framing() -> None:
    conn = connection(Clock())
    conn.route(SASL_HANDSHAKE)
    conn.handshake("SCRAM-SHA-256", version=0)
    assert not conn.framed
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
    first = conn.authenticate(client.first())
    assert first.error_code == ErrorCode.NONE and not first.complete
    final = conn.authenticate(client.final(first.auth_bytes))
    assert final.complete
    client.verify(final.auth_bytes)
    assert conn.principal == "User:alice"


def test_requests_before_authentication_close_the_connection() -> None:
    conn = connection(Clock())
    decision = conn.route(METADATA, "METADATA")
    assert decision.route is Route.REFUSE and decision.close
    assert decision.message == "Unexpected Kafka request of type METADATA during SASL handshake."
    assert conn.route(SASL_HANDSHAKE).route is Route.CLOSE
    conn = connection(Clock())
    conn.handshake("PLAIN")
    decision = conn.route(METADATA, "METADATA")
    assert decision.message == (
        "Unexpected Kafka request of type METADATA during SASL authentication."
    )
    assert decision.close


def test_unknown_mechanism_and_wrong_password() -> None:
    conn = connection(Clock())
    result = conn.handshake("GSSAPI")
    assert result.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and result.close
    assert result.mechanisms == MECHANISMS
    conn = connection(Clock())
    conn.handshake("PLAIN")
    failed = conn.authenticate(plain_client_response("alice", "nope"))
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and failed.close
    assert failed.error_message == "Authentication failed: Invalid username or password"
    assert not conn.authenticated and conn.principal is None


def test_reauthentication_with_connections_max_reauth_ms() -> None:
    clock = Clock()
    conn = connection(clock, max_reauth_ms=60_000)
    assert plain_login(conn) == 60_000
    clock.ms += 30_000
    # Re-authentication starts with a SaslHandshake on the authenticated connection.
    assert plain_login(conn) == 60_000
    clock.ms += 500
    # Not again within a second: the handshake is refused as after any authentication.
    assert conn.route(SASL_HANDSHAKE).route is Route.REFUSE
    clock.ms += 60_001
    assert conn.route(METADATA).route is Route.CLOSE  # the session expired


def test_reauthentication_may_not_change_principal_or_mechanism() -> None:
    clock = Clock()
    conn = connection(clock, max_reauth_ms=60_000)
    plain_login(conn)
    clock.ms += 2000
    conn.route(SASL_HANDSHAKE)
    conn.handshake("PLAIN")
    result = conn.authenticate(plain_client_response("bob", "bob-secret"))
    assert result.close and result.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    conn = connection(clock, max_reauth_ms=60_000)
    plain_login(conn)
    clock.ms += 2000
    conn.route(SASL_HANDSHAKE)
    assert conn.handshake("SCRAM-SHA-256").error_code == ErrorCode.NONE
    result = conn.authenticate(b"n,,n=alice,r=abc")
    assert result.close and not result.send_response
    assert result.error_message == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )


def test_wrong_password_during_reauthentication_says_re_authentication() -> None:
    clock = Clock()
    conn = connection(clock, max_reauth_ms=1000)
    conn.handshake("SCRAM-SHA-256")
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
    conn.authenticate(client.final(conn.authenticate(client.first()).auth_bytes))
    clock.ms += 1000
    assert conn.route(SASL_HANDSHAKE).route is Route.HANDSHAKE
    conn.handshake("SCRAM-SHA-256")
    wrong = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "wrong")
    result = conn.authenticate(wrong.final(conn.authenticate(wrong.first()).auth_bytes))
    assert result.error_message == (
        "Authentication failed during re-authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )


def test_oauthbearer_session_lifetime_is_the_tokens() -> None:
    clock = Clock()
    token = unsecured_token("svc", lifetime_s=120, now_s=clock.ms / 1000)
    conn = connection(clock)
    conn.handshake("OAUTHBEARER")
    result = conn.authenticate(client_initial_response(token))
    assert result.complete and result.session_lifetime_ms == 120_000
    conn = connection(clock, max_reauth_ms=30_000)
    conn.handshake("OAUTHBEARER")
    assert conn.authenticate(client_initial_response(token)).session_lifetime_ms == 30_000
