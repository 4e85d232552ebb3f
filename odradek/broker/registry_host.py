"""Wires the Schema Registry (`odradek/registry/`) into the broker when
`schema.registry.listeners` is set: a `RegistryHost` over the broker's partitions and its
internal topic creator, the same partition API the coordinators use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.broker.partitions.internal_topics import creator
from odradek.broker.partitions.partition import Partition
from odradek.registry.service import SchemaRegistry

if TYPE_CHECKING:
    from odradek.broker.server import Broker


class BrokerRegistryHost:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.broker.topics.get(topic, index)

    def ensure_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> bool:
        if self.broker.topics.info(name) is not None:
            return True
        return creator(self.broker).ensure(
            name, partitions, replication_factor, dict(configs), internal=False
        )


def schema_registry(broker: Broker) -> SchemaRegistry | None:
    """The registry when `schema.registry.listeners` is set (added to the broker's services)."""
    listeners = broker.config.get("schema.registry.listeners")
    if not listeners:
        return None
    return SchemaRegistry(BrokerRegistryHost(broker), str(listeners))
