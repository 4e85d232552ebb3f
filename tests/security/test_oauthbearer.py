"""SASL/OAUTHBEARER (odradek.security.oauthbearer) with Kafka's unsecured JWS validator and a
plugged-in validator; kafka-python's OAUTHBEARER client drives the exchange."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

from odradek.security.errors import AuthenticationError
from odradek.security.oauthbearer import (
    OAuthBearerServer,
    OAuthBearerToken,
    TokenValidationError,
    UnsecuredValidator,
    client_initial_response,
    parse_client_initial_response,
    unsecured_token,
)

NOW_S = 1_700_000_000


def validator(**kwargs: Any) -> UnsecuredValidator:
    return UnsecuredValidator(now_ms=lambda: NOW_S * 1000, **kwargs)


def jws(header: dict[str, Any], claims: dict[str, Any], signature: str = "") -> str:
    def enc(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{enc(header)}.{enc(claims)}.{signature}"


class _Provider(AbstractTokenProvider):
    def __init__(self, token: str, extensions: dict[str, str] | None = None) -> None:
        self._token = token
        self._extensions = extensions or {}

    def token(self) -> str:
        return self._token

    def extensions(self) -> dict[str, str]:
        return self._extensions


def test_kafka_python_client_with_an_unsecured_token() -> None:
    token = unsecured_token("alice", now_s=NOW_S, scope=["read", "write"])
    client = SaslMechanismOAuth(
        sasl_oauth_token_provider=_Provider(token, {"traceId": "abc"}), sasl_mechanism="OAUTHBEARER"
    )
    server = OAuthBearerServer(validator(required_scope=("read",)))
    assert server.step(client.auth_bytes()) == b""
    assert server.complete and server.principal == "alice"
    assert server.token is not None and server.token.scope == {"read", "write"}
    assert server.credential_expiry_ms == (NOW_S + 3600) * 1000
    assert server.extensions == {"traceId": "abc"}


def test_refused_token_sends_json_then_fails_on_the_clients_ctrl_a() -> None:
    expired = unsecured_token("alice", now_s=NOW_S - 7200)  # expired an hour ago
    client = SaslMechanismOAuth(
        sasl_oauth_token_provider=_Provider(expired), sasl_mechanism="OAUTHBEARER"
    )
    server = OAuthBearerServer(validator())
    challenge = server.step(client.auth_bytes())
    assert challenge == b'{"status":"invalid_token"}'
    assert not server.complete
    client.receive(challenge)
    assert client.auth_bytes() == b"\x01"
    with pytest.raises(AuthenticationError) as info:
        server.step(client.auth_bytes())
    assert info.value.public
    assert info.value.client_message() == '{"status":"invalid_token"}'


def test_missing_scope_is_insufficient_scope() -> None:
    server = OAuthBearerServer(validator(required_scope=("admin", "read")))
    out = server.step(client_initial_response(unsecured_token("a", now_s=NOW_S, scope=["read"])))
    assert out == b'{"status":"insufficient_scope", "scope":"[admin, read]"}'


@pytest.mark.parametrize(
    ("token", "detail"),
    [
        ("a..b", "contains '..'"),
        ("abc.def", "3 dot-separated"),
        (jws({"alg": "HS256"}, {"sub": "a", "exp": NOW_S + 60}), "'none' for an algorithm"),
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW_S + 60}, "c2ln"), "digital signature"),
        (jws({"alg": "none"}, {"sub": "a"}), "No expiration time in JWT"),
        (jws({"alg": "none"}, {"exp": NOW_S + 60}), "No principal name in JWT claim: sub"),
        (jws({"alg": "none"}, {"sub": 5, "exp": NOW_S + 60}), "was not of type String"),
        (jws({"alg": "none"}, {"sub": "a", "exp": "soon"}), "'exp' claim was not of type Number"),
        (jws({"alg": "none"}, {"sub": "a", "exp": NOW_S}), "on or after the Expiration Time"),
        (
            jws({"alg": "none"}, {"sub": "a", "exp": NOW_S + 99, "iat": NOW_S + 1}),
            "Issued At value",
        ),
        (
            jws({"alg": "none"}, {"sub": "a", "exp": NOW_S - 10, "iat": NOW_S - 5}),
            "Expiration Time",
        ),
        ("!!!!.e30.", "malformed"),
        ("W10.W10.", "malformed JSON"),
    ],
)
def test_unsecured_validator_refusals(token: str, detail: str) -> None:
    with pytest.raises(TokenValidationError) as info:
        validator()(token)
    assert detail in str(info.value)
    assert info.value.status == "invalid_token"


def test_clock_skew_and_custom_principal_claim() -> None:
    issued_ahead = jws({"alg": "none"}, {"client_id": "svc", "exp": NOW_S + 60, "iat": NOW_S + 1})
    just_expired = jws({"alg": "none"}, {"client_id": "svc", "exp": NOW_S - 1, "iat": NOW_S - 9})
    strict = validator(principal_claim_name="client_id")
    for token in (issued_ahead, just_expired):
        with pytest.raises(TokenValidationError):
            strict(token)
    lenient = UnsecuredValidator.from_jaas_options(
        {
            "unsecuredValidatorPrincipalClaimName": "client_id",
            "unsecuredValidatorAllowableClockSkewMs": "5000",
            "unsecuredValidatorRequiredScope": "",
        },
        now_ms=lambda: NOW_S * 1000,
    )
    accepted = lenient(issued_ahead)
    assert accepted.principal_name == "svc" and accepted.start_time_ms == (NOW_S + 1) * 1000
    assert lenient(just_expired).lifetime_ms == (NOW_S - 1) * 1000
    # The configured default (sasl.oauthbearer.sub.claim.name) applies when JAAS says nothing.
    from_config = UnsecuredValidator.from_jaas_options(
        {}, principal_claim_name="client_id", now_ms=lambda: (NOW_S + 2) * 1000
    )
    assert from_config(issued_ahead).principal_name == "svc"
    with pytest.raises(TokenValidationError, match="No principal name in JWT claim: sub"):
        validator()(issued_ahead)
    with pytest.raises(ValueError):
        UnsecuredValidator.from_jaas_options({"unsecuredValidatorAllowableClockSkewMs": "-1"})
    with pytest.raises(ValueError):
        UnsecuredValidator.from_jaas_options({"unsecuredValidatorAllowableClockSkewMs": "x"})


def test_pluggable_validator_and_authzid() -> None:
    seen: list[str] = []

    def check(token: str) -> OAuthBearerToken:
        seen.append(token)
        if token != "opaque-good":
            raise TokenValidationError("nope", openid_configuration="https://idp/.well-known")
        return OAuthBearerToken(token, "bob", lifetime_ms=42)

    server = OAuthBearerServer(check)
    assert server.step(client_initial_response("opaque-good", "bob")) == b""
    assert server.principal == "bob" and server.credential_expiry_ms == 42
    other = OAuthBearerServer(check)
    assert other.step(client_initial_response("opaque-bad")) == (
        b'{"status":"invalid_token", "openid-configuration":"https://idp/.well-known"}'
    )
    # A retry with a new token after the error is allowed, as Kafka.
    assert other.step(client_initial_response("opaque-good")) == b""
    with pytest.raises(AuthenticationError) as info:
        OAuthBearerServer(check).step(client_initial_response("opaque-good", "admin"))
    assert info.value.public and "(admin) that is different" in info.value.client_message()
    assert seen == ["opaque-good", "opaque-bad", "opaque-good", "opaque-good"]


def test_validator_crash_and_malformed_messages_are_generic() -> None:
    def crash(token: str) -> OAuthBearerToken:
        raise RuntimeError("idp unreachable")

    generic = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )
    with pytest.raises(AuthenticationError) as info:
        OAuthBearerServer(crash).step(client_initial_response("t"))
    assert info.value.client_message() == generic and "internal error" in str(info.value)
    for message in (
        b"n,,auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"n,,\x01other=1\x01\x01",
        b"n,,\x01auth=Basic dXNlcg==\x01\x01",
        b"n,,\x01auth=Bearer\x01\x01",
        b"\x01",  # a lone ^A without a pending error
    ):
        with pytest.raises(AuthenticationError) as info:
            OAuthBearerServer(validator()).step(message)
        assert info.value.client_message() == generic


def test_client_initial_response_round_trip() -> None:
    data = client_initial_response("a.b.", "user", {"k": "v v"})
    assert data == b"n,a=user,\x01auth=Bearer a.b.\x01k=v v\x01\x01"
    parsed = parse_client_initial_response(data)
    assert (parsed.token, parsed.authorization_id, parsed.extensions) == (
        "a.b.",
        "user",
        {"k": "v v"},
    )
