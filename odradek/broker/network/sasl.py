"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: the broker's side of KIP-43 and KIP-152.

`SaslListener` holds one listener's mechanisms, built at start from Kafka's keys (an unusable
set-up stops the broker with one line):

- `sasl.enabled.mechanisms` (per listener: `listener.name.<l>.sasl.enabled.mechanisms`): PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. GSSAPI (Kerberos, Kafka's default) is not served.
- PLAIN's users: `user_<name>="<password>"` options of PlainLoginModule in
  `listener.name.<l>.plain.sasl.jaas.config`, as Kafka's PlainServerCallbackHandler reads them.
- SCRAM credentials: the metadata store's (AlterUserScramCredentials, ZooKeeper
  `/config/users/<user>` as Kafka).
- OAUTHBEARER: Kafka's unsecured JWS validator with the `unsecuredValidator*` options of the
  listener's OAuthBearerLoginModule entry (tests and development; a real validator plugs in as
  `SaslListener.oauthbearer`).
- `connections.max.reauth.ms` (KIP-368), per listener and mechanism as Kafka.

`SaslGate` drives one connection's `SaslConnection` (odradek/security/authenticator.py) from the
frames the connection reads: until authentication only ApiVersions, SaslHandshake and
SaslAuthenticate are served; any other request closes the connection (one log line); a failed
authentication is answered with SASL_AUTHENTICATION_FAILED and its message, then closed. After
a v0 SaslHandshake the tokens come bare (size-prefixed, no request header), as Kafka allows.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.config import BrokerConfig, ConfigValue
from odradek.broker.ops.faults import error_response
from odradek.log.config import ConfigError
from odradek.security.authenticator import AuthenticateResult, Route, SaslConnection
from odradek.security.errors import AuthenticationError
from odradek.security.jaas import JaasConfigError, plain_users, server_jaas_entry
from odradek.security.oauthbearer import TokenValidator, UnsecuredValidator
from odradek.security.sasl import (
    SUPPORTED_MECHANISMS,
    SaslServer,
    create_server,
    plain_authenticator,
)
from odradek.security.scram import ScramCredential, ScramMechanism
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode
from odradek.wire.frames import frame
from odradek.wire.header import HeaderError, finish_flexible, parse_fixed
from odradek.wire.regions import Piece

if TYPE_CHECKING:
    from odradek.broker.network.connection import Connection
    from odradek.broker.replication.client import PeerClient

log = logging.getLogger(__name__)

_KEY = struct.Struct(">h")
CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


class SaslListener:
    """One SASL listener's mechanisms and their server-side settings."""

    def __init__(
        self, config: BrokerConfig, listener: str, scram_credentials: CredentialLookup
    ) -> None:
        self.listener = listener
        where = f"listener {listener}"

        def value(key: str) -> ConfigValue:  # full keys, as the JAAS lookups name them
            if key.startswith("listener.name."):
                return config.listener_props.get(key)
            return config.get(key)

        raw = config.listener_value(listener, "sasl.enabled.mechanisms") or ""
        self.mechanisms = [m.strip().upper() for m in str(raw).split(",") if m.strip()]
        if not self.mechanisms:
            raise ConfigError(f"{where} is SASL but sasl.enabled.mechanisms is empty")
        for mechanism in self.mechanisms:
            if mechanism not in SUPPORTED_MECHANISMS:
                hint = " (Kerberos is not served)" if mechanism == "GSSAPI" else ""
                raise ConfigError(
                    f"{where}: SASL mechanism {mechanism}{hint} is not supported; set "
                    f"sasl.enabled.mechanisms to some of {', '.join(SUPPORTED_MECHANISMS)}"
                )
        self.scram_credentials = scram_credentials
        self.plain: Callable[[str, str], bool] | None = None
        self.oauthbearer: TokenValidator | None = None
        self.max_reauth_ms: dict[str, int] = {}
        for mechanism in self.mechanisms:
            try:
                jaas = server_jaas_entry(value, listener, mechanism)
            except JaasConfigError as exc:
                raise ConfigError(f"{where}, {mechanism}: sasl.jaas.config: {exc}") from None
            if jaas.warning:
                log.warning("%s: %s", where, jaas.warning)
            if mechanism == "PLAIN":
                users = plain_users(jaas.entry)
                if not users:
                    raise ConfigError(
                        f"{where}: PLAIN needs users: set listener.name.{listener.lower()}."
                        "plain.sasl.jaas.config to org.apache.kafka.common.security.plain."
                        'PlainLoginModule required user_alice="alice-secret";'
                    )
                self.plain = plain_authenticator(users)
            elif mechanism == "OAUTHBEARER":
                options = jaas.entry.options if jaas.entry is not None else {}
                try:
                    self.oauthbearer = UnsecuredValidator.from_jaas_options(
                        options,
                        principal_claim_name=str(
                            config.listener_value(listener, "sasl.oauthbearer.sub.claim.name")
                        ),
                        scope_claim_name=str(
                            config.listener_value(listener, "sasl.oauthbearer.scope.claim.name")
                        ),
                    )
                except ValueError as exc:
                    raise ConfigError(f"{where}, OAUTHBEARER: {exc}") from None
            reauth = value(
                f"listener.name.{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
            )
            if reauth is None:
                reauth = config.listener_value(listener, "connections.max.reauth.ms")
            self.max_reauth_ms[mechanism] = int(reauth or 0)

    def _server(self, mechanism: str) -> SaslServer:
        return create_server(
            mechanism,
            plain=self.plain,
            scram_credentials=self.scram_credentials,
            oauthbearer=self.oauthbearer,
        )

    def connection(self) -> SaslConnection:
        # connections.max.reauth.ms is per mechanism; the connection learns which one at its
        # handshake, so the lookup follows the mechanism chosen
        sasl = SaslConnection(self.mechanisms, self._server, None)
        return sasl

    def gate(self, conn: Connection) -> SaslGate:
        return SaslGate(self, conn)


class SaslGate:
    """Runs one connection's SASL exchange in front of dispatch."""

    def __init__(self, listener: SaslListener, conn: Connection) -> None:
        self.listener = listener
        self.conn = conn
        self.sasl = listener.connection()

    @property
    def passive(self) -> bool:
        """Authenticated for good (no re-authentication, no session expiry): requests go
        straight to dispatch, whose SaslHandshake/SaslAuthenticate handlers refuse."""
        return self.sasl.authenticated and self.sasl.session_expiry_ms is None

    def handle(self, payload: bytes | bytearray) -> tuple[list[Piece] | None, bool, bool]:
        """(pieces to write, dispatch the request?, close after writing?)."""
        sasl = self.sasl
        if sasl.state == "authenticate" and not sasl.framed:
            return self._token(bytes(payload))
        if len(payload) < 8:
            return None, False, True
        (api_key,) = _KEY.unpack_from(payload, 0)
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
        decision = sasl.route(api_key, name)
        route = decision.route
        if route is Route.HANDLE:
            return None, True, False
        if route is Route.CLOSE:
            log.info("closing connection from %s: %s", self.conn.peer, decision.message or "")
            return None, False, True
        try:
            header = parse_fixed(payload)
            if protocol.is_flexible_request(api_key, header.api_version):
                finish_flexible(payload, header)
            request = protocol.decode_request(
                api_key, header.api_version, payload, header.body_offset
            )
        except (HeaderError, protocol.DecodeError) as exc:
            log.warning("closing connection from %s: bad SASL request: %s", self.conn.peer, exc)
            return None, False, True
        version, correlation = header.api_version, header.correlation_id
        if route is Route.REFUSE:
            log.info(
                "closing connection from %s on listener %s: %s",
                self.conn.peer,
                self.listener.listener,
                decision.message,
            )
            if decision.close:
                return None, False, True
            resp = error_response(api_key, version, request, ErrorCode.ILLEGAL_SASL_STATE)
            return [protocol.encode_response(api_key, version, correlation, resp)], False, False
        if route is Route.HANDSHAKE:
            hs = sasl.handshake(request.mechanism, version)
            if hs.error_code != ErrorCode.NONE:
                log.info(
                    "closing connection from %s: SASL mechanism %r is not enabled on %s",
                    self.conn.peer,
                    request.mechanism,
                    self.listener.listener,
                )
            elif sasl.mechanism is not None:
                sasl.max_reauth_ms = self.listener.max_reauth_ms.get(sasl.mechanism) or None
            resp = protocol.SaslHandshakeResponse(
                error_code=hs.error_code, mechanisms=hs.mechanisms
            )
            return [protocol.encode_response(api_key, version, correlation, resp)], False, hs.close
        # Route.AUTHENTICATE
        result = sasl.authenticate(bytes(request.auth_bytes))
        self._after(result)
        if not result.send_response:
            return None, False, True
        resp = protocol.SaslAuthenticateResponse(
            error_code=result.error_code,
            error_message=result.error_message,
            auth_bytes=result.auth_bytes,
            session_lifetime_ms=result.session_lifetime_ms,
        )
        return [protocol.encode_response(api_key, version, correlation, resp)], False, result.close

    def _token(self, token: bytes) -> tuple[list[Piece] | None, bool, bool]:
        """After a v0 handshake: a bare token in, a bare token out (size-prefixed)."""
        result = self.sasl.authenticate(token)
        self._after(result)
        if result.close:
            return None, False, True
        return [frame(len(result.auth_bytes)) + result.auth_bytes], False, False

    def _after(self, result: AuthenticateResult) -> None:
        if result.error_code != ErrorCode.NONE:
            log.info(
                "Failed authentication with %s (%s) on listener %s",
                self.conn.peer,
                result.error_message or "authentication failed",
                self.listener.listener,
            )
        elif result.complete and self.sasl.principal is not None:
            self.conn.principal = self.sasl.principal


__all__ = ["AuthenticationError", "SaslGate", "SaslListener"]


class PeerSasl:
    """This broker's side of SASL towards other brokers (replication, transaction markers) on
    a SASL inter-broker listener: `sasl.mechanism.inter.broker.protocol` with the `username` /
    `password` options of the listener's JAAS entry for it, as Kafka's broker logs in (for
    OAUTHBEARER: an unsecured token for `unsecuredLoginStringClaim_sub`)."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.listener = listener
        self.mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
        enabled = config.listener_value(listener, "sasl.enabled.mechanisms") or ""
        if self.mechanism not in [m.strip().upper() for m in str(enabled).split(",")]:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol {self.mechanism} must be one of the "
                f"sasl.enabled.mechanisms of the inter-broker listener {listener}"
            )

        def value(key: str) -> ConfigValue:
            if key.startswith("listener.name."):
                return config.listener_props.get(key)
            return config.get(key)

        try:
            entry = server_jaas_entry(value, listener, self.mechanism).entry
        except JaasConfigError as exc:
            raise ConfigError(f"listener {listener}, {self.mechanism}: {exc}") from None
        self.options = dict(entry.options) if entry is not None else {}
        self.sub_claim = str(config.listener_value(listener, "sasl.oauthbearer.sub.claim.name"))

    async def authenticate(self, client: PeerClient, timeout: float) -> None:
        """Run the exchange on a freshly connected PeerClient (raises PeerError)."""
        from odradek.broker.replication.client import PeerError
        from odradek.security.oauthbearer import client_initial_response, unsecured_token
        from odradek.security.sasl import plain_client_response
        from odradek.security.scram import ScramClient

        mechanism = self.mechanism
        hs = await client.request(
            ApiKey.SASL_HANDSHAKE,
            1,
            protocol.SaslHandshakeRequest(mechanism=mechanism),
            timeout,
        )
        if hs.error_code != ErrorCode.NONE:
            raise PeerError(f"SASL handshake for {mechanism}: {ErrorCode(hs.error_code).name}")

        async def step(token: bytes) -> bytes:
            resp = await client.request(
                ApiKey.SASL_AUTHENTICATE,
                2,
                protocol.SaslAuthenticateRequest(auth_bytes=token),
                timeout,
            )
            if resp.error_code != ErrorCode.NONE:
                raise PeerError(f"SASL {mechanism}: {resp.error_message}")
            return bytes(resp.auth_bytes or b"")

        username, password = self.options.get("username"), self.options.get("password")
        if mechanism == "OAUTHBEARER":
            sub = self.options.get("unsecuredLoginStringClaim_sub")
            if not sub:
                raise PeerError("OAUTHBEARER between brokers needs unsecuredLoginStringClaim_sub")
            token = unsecured_token(sub, principal_claim_name=self.sub_claim)
            await step(client_initial_response(token))
            return
        if username is None or password is None:
            raise PeerError(
                f"no inter-broker credentials: set username and password in "
                f"listener.name.{self.listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
            )
        if mechanism == "PLAIN":
            await step(plain_client_response(username, password))
            return
        scram = ScramMechanism.from_name(mechanism)
        if scram is None:
            raise PeerError(f"SASL mechanism {mechanism} cannot be used between brokers")
        scram_client = ScramClient(scram, username, password)
        server_first = await step(scram_client.first())
        server_final = await step(scram_client.final(server_first))
        try:
            scram_client.verify(server_final)
        except AuthenticationError as exc:
            raise PeerError(f"SASL {mechanism}: {exc}") from None
