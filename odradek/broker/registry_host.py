"""Wires the Schema Registry (`odradek/registry/`) into the broker when
`schema.registry.listeners` is set: a `RegistryHost` over the broker's partitions, its
internal topic creator, the cluster metadata (who leads `_schemas`, the registry URLs brokers
registered) and the replica manager's acks=-1 wait, the same parts the coordinators use."""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.broker.config import ConfigValue
from odradek.broker.network.tls import client_context, server_context
from odradek.broker.partitions.internal_topics import creator
from odradek.broker.partitions.partition import Partition
from odradek.log.config import ConfigError
from odradek.registry.host import SchemasPartition
from odradek.registry.service import BasicCheck, SchemaRegistry
from odradek.security.scram import ScramMechanism

if TYPE_CHECKING:
    from odradek.broker.server import Broker


class BrokerRegistryHost:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.broker.topics.get(topic, index)

    def ensure_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> bool:
        if self.broker.topics.info(name) is not None:
            return True
        rf = 1
        if self.broker.replication is not None:  # Confluent's kafkastore default is 3 too
            rf = min(3, int(self.broker.config.get("offsets.topic.replication.factor")))
        return creator(self.broker).ensure(name, partitions, rf, dict(configs), internal=False)

    def is_replica(self, topic: str, index: int) -> bool:
        replication = self.broker.replication
        if replication is None:
            return True
        info = replication.store.topics.get(topic)
        if info is None or index >= len(info.partitions):
            return False
        return replication.node_id in info.partitions[index].replicas

    def leader_of(self, topic: str, index: int) -> int:
        replication = self.broker.replication
        if replication is None:
            part = self.partition(topic, index)
            return -1 if part is None else part.leader
        info = replication.store.topics.get(topic)
        if info is None or index >= len(info.partitions):
            return -1
        return info.partitions[index].leader

    def registry_url(self, node_id: int) -> str | None:
        replication = self.broker.replication
        if replication is None:
            own = self.broker.schema_registry
            return own.url if own is not None else None
        reg = replication.store.broker(node_id)
        return None if reg is None else reg.registry_url

    async def wait_replicated(self, part: SchemasPartition, timeout_ms: int) -> int:
        own = self.partition("_schemas", 0)
        if own is None or own is not part:
            return 0
        return int(await self.broker.replicas.wait_for_isr(own, timeout_ms))


def _tls(broker: Broker) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The https listener's server context and the forwarding client's, from the ssl.* settings
    of the broker's first TLS listener (its ssl.client.auth decides mTLS), else the top-level
    ssl.* keys."""
    config = broker.config
    served = next((x for x in broker.security.listeners if x.uses_tls), None)
    name = served.name if served is not None else "SCHEMA_REGISTRY"

    def value(key: str) -> ConfigValue:
        return config.listener_value(name, key) if served is not None else config.get(key)

    return server_context(value, name), client_context(value, name)


def _basic(broker: Broker) -> BasicCheck:
    """HTTP Basic against the broker's users: the SASL/PLAIN users of its listeners, then the
    SCRAM credentials of the metadata store (the password salted and hashed as the stored key
    was)."""
    plains = [x.sasl.plain for x in broker.security.listeners if x.sasl and x.sasl.plain]

    def check(user: str, password: str) -> bool:
        if any(plain(user, password) for plain in plains):
            return True
        for mechanism in ScramMechanism:
            cred = broker.scram_credential(user, mechanism)
            if cred is None:
                continue
            salted = mechanism.salted_password(password, cred.salt, cred.iterations)
            stored = mechanism.stored_key(mechanism.client_key(salted))
            return hmac.compare_digest(stored, cred.stored_key)
        return False

    return check


def schema_registry(broker: Broker) -> SchemaRegistry | None:
    """The registry when `schema.registry.listeners` is set (added to the broker's services)."""
    listeners = broker.config.get("schema.registry.listeners")
    if not listeners:
        return None
    text = str(listeners)
    tls = client_tls = None
    if text.strip().lower().startswith("https:"):
        tls, client_tls = _tls(broker)
    method = str(broker.config.get("schema.registry.authentication.method") or "NONE").upper()
    if method not in ("NONE", "BASIC"):
        raise ConfigError(f"schema.registry.authentication.method {method} is not NONE or BASIC")
    basic = _basic(broker) if method == "BASIC" else None
    return SchemaRegistry(BrokerRegistryHost(broker), text, tls, client_tls, basic)
