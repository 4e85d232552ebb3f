"""Wires the Schema Registry (`odradek/registry/`) into the broker when
`schema.registry.listeners` is set: a `RegistryHost` over the broker's partitions, its
internal topic creator, the cluster metadata (who leads `_schemas`, the registry URLs brokers
registered) and the replica manager's acks=-1 wait, the same parts the coordinators use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.broker.partitions.internal_topics import creator
from odradek.broker.partitions.partition import Partition
from odradek.registry.host import SchemasPartition
from odradek.registry.service import SchemaRegistry

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


def schema_registry(broker: Broker) -> SchemaRegistry | None:
    """The registry when `schema.registry.listeners` is set (added to the broker's services)."""
    listeners = broker.config.get("schema.registry.listeners")
    if not listeners:
        return None
    return SchemaRegistry(BrokerRegistryHost(broker), str(listeners))
