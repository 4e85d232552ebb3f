"""Server-side SASL mechanisms as sans-IO state machines, and how a connection drives them.

Every server has ``mechanism_name``, ``step(client_bytes) -> server_bytes``, ``complete``,
``principal`` (the authenticated user name, without ``User:``) and ``credential_expiry_ms``
(when the credential ends, for KIP-368's session lifetime; None when it does not).

``authenticator.SaslConnection`` implements the steps below for a connection; by hand, a
connection on a SASL listener does, as Kafka's SaslServerAuthenticator:

1. ApiVersions is answered; SaslHandshake(mechanism): when ``mechanism`` is not in the
   listener's ``sasl.enabled.mechanisms`` answer UNSUPPORTED_SASL_MECHANISM with the enabled
   list and close; else answer NONE and ``server = create_server(mechanism, ...)``. Any other
   request before authentication closes the connection (Kafka answers it with
   ILLEGAL_SASL_STATE first when it can).
2. Each SaslAuthenticate(auth_bytes): ``out = server.step(auth_bytes)``; answer NONE with
   ``auth_bytes=out`` (b"" is still sent) and, once ``server.complete``, session_lifetime_ms.
   On ``AuthenticationError e``: answer ``e.error_code`` with ``e.client_message()`` (pass
   ``reauthenticating=True`` during KIP-368 re-authentication) and close the connection.
3. ``server.complete``: the connection's principal is ``"User:" + server.principal``.
   (SaslHandshake v0 without SaslAuthenticate framing is not supported by any client we test.)
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Protocol

from odradek.security.errors import AuthenticationError, failed_message
from odradek.security.oauthbearer import OAuthBearerServer, TokenValidator, UnsecuredValidator
from odradek.security.scram import CredentialLookup, ScramMechanism, ScramServer, TokenLookup

__all__ = [
    "AuthenticationError",
    "PlainServer",
    "SaslServer",
    "SUPPORTED_MECHANISMS",
    "create_server",
    "failed_message",
    "plain_authenticator",
    "plain_client_response",
]

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslServer(Protocol):
    mechanism_name: str

    def step(self, client_bytes: bytes) -> bytes: ...

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str | None: ...

    @property
    def credential_expiry_ms(self) -> int | None: ...


PlainAuthenticator = Callable[[str, str], bool]


def plain_authenticator(users: Mapping[str, str]) -> PlainAuthenticator:
    """Kafka's PlainServerCallbackHandler over a user table (``jaas.plain_users``): the
    password is compared in constant time; an unknown user is compared against a dummy so its
    timing does not tell it apart."""
    table = {user: password.encode("utf-8") for user, password in users.items()}

    def check(username: str, password: str) -> bool:
        expected = table.get(username)
        given = password.encode("utf-8")
        if expected is None:
            hmac.compare_digest(given, given)
            return False
        return hmac.compare_digest(given, expected)

    return check


class PlainServer:
    """SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: one message
    ``authzid \\0 authcid \\0 passwd``, the authzid empty or the user itself. Every failure is
    public, with Kafka's words ("Authentication failed: Invalid username or password")."""

    mechanism_name = PLAIN
    credential_expiry_ms: int | None = None

    def __init__(self, authenticate: PlainAuthenticator) -> None:
        self._authenticate = authenticate
        self.complete = False
        self.principal: str | None = None

    def step(self, client_bytes: bytes) -> bytes:
        if self.complete:
            raise AuthenticationError(
                "Unexpected challenge in Sasl server state COMPLETE", mechanism=PLAIN
            )
        tokens = client_bytes.decode("utf-8", errors="replace").split("\0", 3)
        if len(tokens) != 3:
            raise AuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}",
                mechanism=PLAIN,
            )
        authzid, username, password = tokens
        if not username:
            raise AuthenticationError(
                "Authentication failed: username not specified", mechanism=PLAIN
            )
        if not password:
            raise AuthenticationError(
                "Authentication failed: password not specified", mechanism=PLAIN
            )
        try:
            ok = self._authenticate(username, password)
        except Exception:
            raise AuthenticationError(
                "Authentication failed: credentials for user could not be verified",
                mechanism=PLAIN,
            ) from None
        if not ok:
            raise AuthenticationError(
                "Authentication failed: Invalid username or password", mechanism=PLAIN
            )
        if authzid and authzid != username:
            raise AuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username",
                mechanism=PLAIN,
            )
        self.principal = username
        self.complete = True
        return b""


def plain_client_response(username: str, password: str, authzid: str = "") -> bytes:
    """What a PLAIN client sends."""
    return f"{authzid}\0{username}\0{password}".encode()


def create_server(
    mechanism: str,
    *,
    plain: PlainAuthenticator | None = None,
    scram_credentials: CredentialLookup | None = None,
    delegation_tokens: TokenLookup | None = None,
    oauthbearer: TokenValidator | None = None,
) -> SaslServer:
    """A fresh server for one exchange of ``mechanism``. PLAIN needs ``plain`` (for instance
    ``plain_authenticator(jaas.plain_users(entry))``), SCRAM ``scram_credentials`` (a
    ``CredentialStore.get``), OAUTHBEARER uses ``oauthbearer`` or else Kafka's unsecured
    validator with its defaults. ValueError for a mechanism it cannot serve (check
    ``sasl.enabled.mechanisms`` at start-up with the same call)."""
    if mechanism == PLAIN:
        if plain is None:
            raise ValueError("PLAIN needs a user table (user_<name> options in its JAAS config)")
        return PlainServer(plain)
    scram = ScramMechanism.from_name(mechanism)
    if scram is not None:
        if scram_credentials is None:
            raise ValueError(f"{mechanism} needs a credential store")
        return ScramServer(scram, scram_credentials, tokens=delegation_tokens)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerServer(oauthbearer or UnsecuredValidator())
    raise ValueError(
        f"Requested mechanism '{mechanism}' is not supported. Supported mechanisms are "
        f"{', '.join(SUPPORTED_MECHANISMS)}."
    )
