"""The broker's listeners as Kafka names them: NAME://host:port, each with its security protocol.

`listener.security.protocol.map` gives each listener name its protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL); SSL and SASL_SSL listeners get a TLS server context built from the
listener's `ssl.*` keys (tls.py), at construction, so a listener that cannot be served stops
the broker at start with one line. Clients are answered with the endpoints of the listener they
came in on (Metadata, FindCoordinator, DescribeCluster); other brokers connect to
`inter.broker.listener.name`.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.config import BrokerConfig, ConfigValue, Listener
from odradek.broker.network.sasl import CredentialLookup, PeerSasl, SaslListener
from odradek.broker.network.tls import client_context, server_context
from odradek.log.config import ConfigError
from odradek.security.principal import SslPrincipalMapper

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"


@dataclass(slots=True, frozen=True)
class ServedListener:
    """One listener: its configured address, protocol and TLS context (None without TLS)."""

    name: str
    host: str
    port: int
    protocol: str
    tls: ssl.SSLContext | None = None
    sasl: SaslListener | None = None
    # a client certificate's subject -> principal (ssl.principal.mapping.rules)
    principals: SslPrincipalMapper | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)


class ListenerSecurity:
    """Every served listener of a broker, and how it reaches other brokers."""

    def __init__(self, config: BrokerConfig, scram_credentials: CredentialLookup) -> None:
        self.config = config
        self.listeners: list[ServedListener] = []
        for x in config.listeners:
            protocol = config.protocols[x.name]
            tls = mapper = None
            if protocol in (SSL, SASL_SSL):
                tls = server_context(_values_of(config, x.name), x.name)
                rules = config.listener_value(x.name, "ssl.principal.mapping.rules")
                try:
                    mapper = SslPrincipalMapper(rules)
                except ValueError as exc:
                    raise ConfigError(
                        f"listener {x.name}: ssl.principal.mapping.rules: {exc}"
                    ) from None
            sasl = None
            if protocol in (SASL_PLAINTEXT, SASL_SSL):
                sasl = SaslListener(config, x.name, scram_credentials)
            self.listeners.append(
                ServedListener(x.name, x.host, x.port, protocol, tls, sasl, mapper)
            )
        self.inter_broker = config.inter_broker_listener
        self._peer_tls: ssl.SSLContext | None = None
        self.peer_sasl: PeerSasl | None = None
        if self.inter_broker_protocol in (SASL_PLAINTEXT, SASL_SSL):
            self.peer_sasl = PeerSasl(config, self.inter_broker)

    def by_name(self, name: str) -> ServedListener | None:
        return next((x for x in self.listeners if x.name == name), None)

    @property
    def inter_broker_protocol(self) -> str:
        return self.config.protocols[self.inter_broker]

    def peer_tls(self) -> ssl.SSLContext | None:
        """The client-side TLS context for connections to other brokers' inter-broker
        listener (None when it is not TLS)."""
        if self.inter_broker_protocol not in (SSL, SASL_SSL):
            return None
        if self._peer_tls is None:
            name = self.inter_broker
            self._peer_tls = client_context(lambda key: self.config.listener_value(name, key), name)
        return self._peer_tls


def _values_of(config: BrokerConfig, listener: str) -> Callable[[str], ConfigValue]:
    def value(key: str) -> ConfigValue:
        return config.listener_value(listener, key)

    return value


def advertised_for(config: BrokerConfig, bound: list[Listener], name: str | None) -> Listener:
    """The advertised address of listener `name` (the first advertised one when None or not
    advertised): port 0 and an empty host are filled in from where it is bound."""
    advertised = config.advertised
    adv = next((x for x in advertised if x.name == name), advertised[0])
    served = next((b for b in bound if b.name == adv.name), bound[0] if bound else None)
    if adv.port == 0 and served is not None:
        return Listener(adv.name, adv.host or served.host, served.port)
    if not adv.host and served is not None:
        return Listener(adv.name, "localhost", adv.port)
    return adv
