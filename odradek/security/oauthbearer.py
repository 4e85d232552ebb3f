"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer, with Kafka's unsecured JWS
validator (OAuthBearerUnsecuredValidatorCallbackHandler) as the default and any callable as a
pluggable one.

A ``TokenValidator`` takes the compact token and returns an ``OAuthBearerToken`` or raises
``TokenValidationError`` (sent to the client as the RFC 7628 JSON error, e.g.
``{"status":"invalid_token"}``); any other exception is an internal error. ``UnsecuredValidator``
accepts ``alg: none`` tokens without a signature, takes the principal from the ``sub`` claim (or
the configured claim), requires ``exp`` in the future and ``iat`` (when present) not in the
future, both with an allowable clock skew, and the required scope. ``unsecured_token`` makes
such a token (Kafka's OAuthBearerUnsecuredLoginCallbackHandler does the same for clients).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import now_ms as wall_ms
from odradek.security.errors import AuthenticationError

MECHANISM = "OAUTHBEARER"
_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_INITIAL = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated token (Kafka's OAuthBearerToken)."""

    value: str
    principal_name: str
    lifetime_ms: int
    scope: frozenset[str] = frozenset()
    start_time_ms: int | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)


class TokenValidationError(Exception):
    """A token the validator refuses: ``status`` is the RFC 7628 error status
    (``invalid_token``, ``insufficient_scope``), ``scope`` the required scope to report."""

    def __init__(
        self,
        detail: str,
        *,
        status: str = "invalid_token",
        scope: str | None = None,
        openid_configuration: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


TokenValidator = Callable[[str], OAuthBearerToken]


@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authorization_id: str
    extensions: dict[str, str]


def parse_client_initial_response(data: bytes) -> ClientInitialResponse:
    """``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01]...\\x01``; ValueError with
    Kafka's message otherwise."""
    message = data.decode("utf-8", errors="replace")
    match = _CLIENT_INITIAL.fullmatch(message)
    if match is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in match["kvpairs"].split(_SEP):
        if pair:
            key, _, value = pair.partition("=")
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise ValueError(
            f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}"
        )
    return ClientInitialResponse(auth_match["token"], match["authzid"] or "", properties)


def client_initial_response(
    token: str, authorization_id: str = "", extensions: Mapping[str, str] | None = None
) -> bytes:
    """What a client sends first (Kafka's OAuthBearerClientInitialResponse.toBytes)."""
    authz = f"a={authorization_id}" if authorization_id else ""
    ext = "".join(f"{_SEP}{k}={v}" for k, v in (extensions or {}).items())
    return f"n,{authz},{_SEP}auth=Bearer {token}{ext}{_SEP}{_SEP}".encode()


# The unsecured JWS (OAuthBearerUnsecuredJws) and its validator.


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(
            part.replace("+", "-").replace("/", "_") + "=" * (-len(part) % 4)
        )
    except (binascii.Error, ValueError):
        raise TokenValidationError("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise TokenValidationError("malformed JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError("malformed JSON")
    return {k: _convert(v) for k, v in value.items()}


def _convert(value: Any) -> Any:
    # Kafka keeps numbers, turns arrays into lists of their text, and everything else into text.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, list):
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    raise TokenValidationError(f"The '{name}' claim was not of type Number: {type(value).__name__}")


@dataclass(frozen=True)
class UnsecuredValidator:
    """Kafka's unsecured validator. Its JAAS options (``from_jaas_options``):
    ``unsecuredValidatorPrincipalClaimName`` (default ``sub``),
    ``unsecuredValidatorScopeClaimName`` (``scope``), ``unsecuredValidatorRequiredScope``
    (space-delimited) and ``unsecuredValidatorAllowableClockSkewMs`` (0). ``now_ms`` is the
    clock (tests pass a fixed one)."""

    principal_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0
    now_ms: Callable[[], int] = field(default=wall_ms, compare=False)

    def __post_init__(self) -> None:
        if not self.principal_claim_name.strip():
            raise ValueError("Must specify a non-blank principal claim name")
        if not self.scope_claim_name.strip():
            raise ValueError("Must specify a non-blank scope claim name")
        if self.allowable_clock_skew_ms < 0:
            raise ValueError(
                f"Allowable clock skew millis must not be negative: {self.allowable_clock_skew_ms}"
            )

    @classmethod
    def from_jaas_options(
        cls,
        options: Mapping[str, str],
        *,
        principal_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        now_ms: Callable[[], int] | None = None,
    ) -> UnsecuredValidator:
        """From the OAuthBearerLoginModule's options; the keyword defaults stand in for
        ``sasl.oauthbearer.sub.claim.name`` / ``sasl.oauthbearer.scope.claim.name`` when the
        options do not name the claims."""
        principal = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip()
        scope = (options.get("unsecuredValidatorScopeClaimName") or "").strip()
        required = (options.get("unsecuredValidatorRequiredScope") or "").strip()
        skew_text = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise ValueError(f'For input string: "{skew_text}"') from None
        kwargs: dict[str, Any] = {}
        if now_ms is not None:
            kwargs["now_ms"] = now_ms
        return cls(
            principal_claim_name=principal or principal_claim_name,
            scope_claim_name=scope or scope_claim_name,
            required_scope=tuple(required.split()),
            allowable_clock_skew_ms=skew,
            **kwargs,
        )

    def __call__(self, token: str) -> OAuthBearerToken:
        if ".." in token:
            raise TokenValidationError("Malformed compact serialization contains '..'")
        splits = token.split(".")
        if len(splits) != 3:
            raise TokenValidationError(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
                "values"
            )
        header = _b64url_json(splits[0])
        claims = _b64url_json(splits[1])
        if header.get("alg") != "none":
            raise TokenValidationError("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenValidationError("Unsecured JWS must not contain a digital signature")
        scope = self._scope(claims)
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenValidationError("No expiration time in JWT")
        principal = claims.get(self.principal_claim_name)
        if principal is not None and not isinstance(principal, str):
            raise TokenValidationError(
                f"The '{self.principal_claim_name}' claim was not of type String: "
                f"{type(principal).__name__}"
            )
        if not principal or not principal.strip():
            raise TokenValidationError(
                f"No principal name in JWT claim: {self.principal_claim_name}"
            )
        iat = _number(claims, "iat")
        now = self.now_ms()
        skew = self.allowable_clock_skew_ms
        if iat is not None and 1000 * iat > now + skew:
            raise TokenValidationError(
                f"The Issued At value ({iat:f} seconds) was after the indicated time ({now} ms) "
                f"plus allowable clock skew ({skew} ms)"
            )
        if now - skew >= 1000 * exp:
            raise TokenValidationError(
                f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or "
                f"after the Expiration Time value ({exp:f} seconds)"
            )
        if iat is not None and exp <= iat:
            raise TokenValidationError(
                f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time "
                f"({iat:f} seconds)"
            )
        for required in self.required_scope:
            if required not in scope:
                listed = "[" + ", ".join(self.required_scope) + "]"
                provided = "[" + ", ".join(sorted(scope)) + "]"
                raise TokenValidationError(
                    f"The provided scope ({provided}) was missing a required scope "
                    f"({required}).  All required scope elements: {listed}",
                    status="insufficient_scope",
                    scope=listed,
                )
        return OAuthBearerToken(
            value=token,
            principal_name=principal,
            lifetime_ms=round(exp * 1000),
            scope=scope,
            start_time_ms=None if iat is None else round(iat * 1000),
            claims=claims,
        )

    def _scope(self, claims: Mapping[str, Any]) -> frozenset[str]:
        value = claims.get(self.scope_claim_name)
        if value is None:
            return frozenset()
        if isinstance(value, str):
            return frozenset({value.strip()}) if value.strip() else frozenset()
        if isinstance(value, list):
            return frozenset(s.strip() for s in value if isinstance(s, str) and s.strip())
        raise TokenValidationError(
            f"The '{self.scope_claim_name}' claim was not of type List: {type(value).__name__}"
        )


def unsecured_token(
    principal: str,
    *,
    lifetime_s: float = 3600,
    scope: Sequence[str] = (),
    principal_claim_name: str = "sub",
    now_s: float | None = None,
    extra_claims: Mapping[str, Any] | None = None,
) -> str:
    """An unsigned JWS (``{"alg":"none"}``) for ``principal`` as Kafka's unsecured login module
    makes one: ``iat`` now, ``exp`` after ``lifetime_s``, the scope as a list."""
    now = wall_ms() / 1000 if now_s is None else now_s
    # whole milliseconds, as Kafka's unsecured login module: a sub-millisecond iat could read
    # as issued in the future against a validator's millisecond clock
    now = int(now * 1000) / 1000

    def enc(obj: Mapping[str, Any]) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    claims: dict[str, Any] = {principal_claim_name: principal, "iat": now, "exp": now + lifetime_s}
    if scope:
        claims["scope"] = list(scope)
    claims.update(extra_claims or {})
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def _json_error(error: TokenValidationError) -> str:
    # Kafka's own formatting, kept byte for byte (note the space after the commas).
    text = f'{{"status":"{error.status}"'
    if error.scope is not None:
        text += f', "scope":"{error.scope}"'
    if error.openid_configuration is not None:
        text += f', "openid-configuration":"{error.openid_configuration}"'
    return text + "}"


class OAuthBearerServer:
    """The broker side of OAUTHBEARER (Kafka's OAuthBearerSaslServer).

    ``step(client_initial_response)`` validates the token: on success it returns b"" and
    ``complete``/``principal``/``token`` are set (``credential_expiry_ms`` is the token's
    lifetime, for KIP-368 session lifetimes); on a refused token it returns the JSON error
    (``{"status":"invalid_token"}``) and expects the client's ``\\x01``, on which it raises
    ``AuthenticationError`` with that JSON as the message, as Kafka does. A malformed message
    or a validator crash raises at once with the generic message; an authorization id other
    than the token's principal raises Kafka's public message. Extensions are accepted as the
    unsecured handler accepts them (``extensions``).
    """

    mechanism_name = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._error: str | None = None
        self.complete = False
        self.token: OAuthBearerToken | None = None
        self.extensions: dict[str, str] = {}

    @property
    def principal(self) -> str | None:
        return self.token.principal_name if self.complete and self.token else None

    @property
    def credential_expiry_ms(self) -> int | None:
        return self.token.lifetime_ms if self.complete and self.token else None

    def step(self, client_bytes: bytes) -> bytes:
        if client_bytes == b"\x01" and self._error is not None:
            raise AuthenticationError(self._error, mechanism=MECHANISM)
        self._error = None
        try:
            response = parse_client_initial_response(client_bytes)
        except ValueError as e:
            raise AuthenticationError(str(e), mechanism=MECHANISM, public=False) from None
        for key in response.extensions:
            if not re.fullmatch(_KEY, key) or key == "auth":
                raise AuthenticationError(
                    f"Extension name {key} is invalid", mechanism=MECHANISM, public=False
                )
        try:
            token = self._validator(response.token)
        except TokenValidationError as e:
            self._error = _json_error(e)
            return self._error.encode()
        except Exception as e:
            raise AuthenticationError(
                "Authentication could not be performed due to an internal error on the server: "
                f"{e}",
                mechanism=MECHANISM,
                public=False,
            ) from e
        authzid = response.authorization_id
        if authzid and authzid != token.principal_name:
            raise AuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({token.principal_name})",
                mechanism=MECHANISM,
            )
        self.token = token
        self.extensions = dict(response.extensions)
        self.complete = True
        return b""
