"""The per-connection SASL state of a SASL listener (Kafka's SaslServerAuthenticator and the
re-authentication rules of KIP-368), sans-IO.

The connection asks ``route(api_key)`` for every request it reads and acts on the answer:

- ``Route.HANDLE``: handle the request as usual (ApiVersions before authentication, anything
  after it).
- ``Route.HANDSHAKE``: answer SaslHandshake with ``handshake(mechanism, version)``.
- ``Route.AUTHENTICATE``: answer SaslAuthenticate with ``authenticate(auth_bytes)``.
- ``Route.REFUSE``: answer the request's error response with ILLEGAL_SASL_STATE and
  ``decision.message``; close when ``decision.close``.
- ``Route.CLOSE``: close without answering (an expired session, as Kafka's SocketServer).

After a v0 SaslHandshake the client sends bare SASL tokens (no SaslAuthenticate header):
``framed`` is False, feed each size-prefixed frame to ``authenticate`` and write its
``auth_bytes`` back size-prefixed. ``principal`` is ``User:<name>`` once authenticated.
``max_reauth_ms`` is ``connections.max.reauth.ms`` for the mechanism (Kafka reads it per
listener and mechanism: ``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` first);
0 or None disables re-authentication unless the credential itself expires (OAUTHBEARER).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from odradek.clock import now_ms as wall_clock_ms
from odradek.security.errors import AuthenticationError
from odradek.security.principal import user_principal
from odradek.security.sasl import SaslServer
from odradek.wire.errors import ErrorCode

SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
MIN_REAUTH_INTERVAL_MS = 1000


_AFTER_AUTH = "SaslAuthenticate request received after successful authentication"


def _unexpected(name: str, during: str) -> str:
    return f"Unexpected Kafka request of type {name} during {during}."


class Route(Enum):
    HANDLE = "handle"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    REFUSE = "refuse"
    CLOSE = "close"


@dataclass(frozen=True)
class Decision:
    route: Route
    message: str | None = None
    close: bool = False


@dataclass(frozen=True)
class HandshakeResult:
    error_code: ErrorCode
    mechanisms: list[str]
    close: bool = False


@dataclass(frozen=True)
class AuthenticateResult:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
    complete: bool = False
    close: bool = False
    send_response: bool = True


@dataclass
class SaslConnection:
    """One connection's SASL state. ``create_server(mechanism)`` makes a fresh mechanism
    server (``sasl.create_server`` with the listener's users/stores bound)."""

    enabled_mechanisms: Sequence[str]
    create_server: Callable[[str], SaslServer]
    max_reauth_ms: int | None = None
    now_ms: Callable[[], int] = field(default=lambda: int(time.monotonic() * 1000))
    wall_ms: Callable[[], int] = field(default=wall_clock_ms)

    def __post_init__(self) -> None:
        self.state = "handshake"  # handshake, authenticate, authenticated, failed
        self.framed = True
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.session_expiry_ms: int | None = None
        self.reauthenticating = False
        self._server: SaslServer | None = None
        self._bad_mechanism: str | None = None
        self._last_reauth_start_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == "authenticated"

    def route(self, api_key: int, api_name: str | None = None) -> Decision:
        name = api_name or str(api_key)
        if self.state == "authenticated":
            if api_key == SASL_HANDSHAKE and self._may_reauthenticate():
                self.reauthenticating = True
                self.state = "handshake"
                self._last_reauth_start_ms = self.now_ms()
                return Decision(Route.HANDSHAKE)
            if self.session_expiry_ms is not None and self.now_ms() > self.session_expiry_ms:
                return Decision(Route.CLOSE, "expired session")
            if api_key == SASL_HANDSHAKE:
                return Decision(Route.REFUSE)
            if api_key == SASL_AUTHENTICATE:
                return Decision(
                    Route.REFUSE,
                    "SaslAuthenticate request received after successful authentication",
                )
            return Decision(Route.HANDLE)
        if self.state == "failed":
            return Decision(Route.CLOSE)
        if self.state == "handshake":
            if api_key == API_VERSIONS and not self.reauthenticating:
                return Decision(Route.HANDLE)
            if api_key == SASL_HANDSHAKE:
                return Decision(Route.HANDSHAKE)
            self.state = "failed"
            return Decision(
                Route.REFUSE,
                f"Unexpected Kafka request of type {name} during SASL handshake.",
                True,
            )
        if api_key == SASL_AUTHENTICATE:
            return Decision(Route.AUTHENTICATE)
        self.state = "failed"
        return Decision(
            Route.REFUSE,
            f"Unexpected Kafka request of type {name} during SASL authentication.",
            True,
        )

    def _may_reauthenticate(self) -> bool:
        if self.session_expiry_ms is None:
            return False
        last = self._last_reauth_start_ms
        return last is None or self.now_ms() - last >= MIN_REAUTH_INTERVAL_MS

    def handshake(self, mechanism: str, version: int = 1) -> HandshakeResult:
        enabled = list(self.enabled_mechanisms)
        if mechanism not in enabled:
            self.state = "failed"
            return HandshakeResult(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled, close=True)
        self.framed = version >= 1
        if self.reauthenticating and mechanism != self.mechanism:
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'"
            )
        else:
            self.mechanism = mechanism
            self._server = self.create_server(mechanism)
        self.state = "authenticate"
        return HandshakeResult(ErrorCode.NONE, enabled)

    def authenticate(self, auth_bytes: bytes) -> AuthenticateResult:
        """One SaslAuthenticate (or, unframed, one bare token)."""
        if self._bad_mechanism is not None:
            self.state = "failed"
            return AuthenticateResult(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                self._bad_mechanism,
                close=True,
                send_response=False,
            )
        server = self._server
        assert server is not None and self.state == "authenticate"
        try:
            out = server.step(auth_bytes)
            if not server.complete:
                return AuthenticateResult(auth_bytes=out)
            assert server.principal is not None
            principal = user_principal(server.principal)
            if self.reauthenticating and principal != self.principal:
                before = (self.principal or "").replace(":", ".", 1)
                raise AuthenticationError(
                    "Cannot change principals during re-authentication from "
                    f"{before}: {principal.replace(':', '.', 1)}"
                )
        except AuthenticationError as e:
            self.state = "failed"
            return AuthenticateResult(
                e.error_code,
                e.client_message(reauthenticating=self.reauthenticating),
                close=True,
                send_response=self.framed,
            )
        lifetime = self._session_lifetime_ms(server.credential_expiry_ms)
        self.principal = principal
        self.state = "authenticated"
        self.reauthenticating = False
        self._server = None
        return AuthenticateResult(auth_bytes=out, session_lifetime_ms=lifetime, complete=True)

    def _session_lifetime_ms(self, credential_expiry_ms: int | None) -> int:
        # Kafka's ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs.
        max_reauth = self.max_reauth_ms
        max_set = max_reauth is not None and max_reauth > 0
        if credential_expiry_ms is None and not max_set:
            self.session_expiry_ms = None
            return 0
        if credential_expiry_ms is None:
            assert max_reauth is not None
            lifetime = max(0, max_reauth)
        else:
            remaining = credential_expiry_ms - self.wall_ms()
            lifetime = max(0, min(remaining, max_reauth) if max_reauth and max_set else remaining)
        self.session_expiry_ms = self.now_ms() + lifetime
        return lifetime
