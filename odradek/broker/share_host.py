"""Wires the share coordinator into the broker (KIP-932).

`share_coordinator(broker)` makes the broker's `ShareCoordinator` on first use with a
`BrokerShareHost`, its view of this broker (`odradek.coordinator.share.host.ShareHost`): the
broker's settings and group configs, the topics and the partitions held here, the creation of
`__share_group_state`, and the connections to the other brokers (Kafka's persister sends
Read/Write/DeleteShareGroupState over them).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.broker.partitions.internal_topics import creator
from odradek.broker.partitions.partition import Partition
from odradek.broker.replication.client import PeerError
from odradek.broker.replication.peers import NoEndpoint, PeerPool
from odradek.coordinator import group_configs
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.wire.protocol import Message

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

EXTENSION = "_odradek_share_coordinator"


class BrokerShareHost:
    """The share coordinator's view of the broker (`ShareHost`)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._peers = PeerPool(broker, "share-persister")

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def setting(self, key: str) -> object | None:
        cfg = self.broker.config
        try:
            raw: object | None = cfg.get(key)
        except KeyError:  # not one of odradek's keys
            raw = cfg.ignored.get(key)
        return raw

    def group_config(self, group_id: str, name: str) -> int | str:
        value: int | str = group_configs.value(self.broker, group_id, name)
        return value

    def offsets_replication_factor(self) -> int:
        return int(self.broker.group_coordinator.config.replication_factor)

    def topic_ids(self) -> Mapping[str, tuple[uuid.UUID, int]]:
        out: dict[str, tuple[uuid.UUID, int]] = {}
        topics = self.broker.topics
        for name in list(topics.by_id.values()):
            info = topics.info(name)
            if info is not None:
                out[name] = (info.topic_id, len(info.partitions))
        return out

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.broker.topics.name_for_id(topic_id)

    def partition_leaders(self, topic: str) -> list[int] | None:
        info = self.broker.topics.info(topic)
        return None if info is None else [p.leader for p in info.partitions]

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.broker.topics.get(topic, index)

    def is_live(self, node: int) -> bool:
        return node in self.broker.live_brokers()

    def ensure_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> bool:
        return creator(self.broker).ensure(name, partitions, replication_factor, dict(configs))

    async def peer_request(
        self, node: int, api_key: int, version: int, request: Message, timeout_s: float
    ) -> Message | None:
        try:
            return await self._peers.request(node, api_key, version, request, timeout_s)
        except NoEndpoint:
            return None
        except PeerError as exc:
            log.info("share state request to broker %d failed: %s", node, exc)
            return None

    def close(self) -> None:
        self._peers.close()


def share_coordinator(broker: Broker) -> ShareCoordinator:
    """This broker's share coordinator (made on first use, stopped with the broker)."""
    coord: ShareCoordinator | None = getattr(broker, EXTENSION, None)
    if coord is None:
        coord = ShareCoordinator(BrokerShareHost(broker))
        setattr(broker, EXTENSION, coord)
        broker.services.append(coord)
        broker.topics.listeners.append(coord)
        broker.disconnect_listeners.append(coord.connection_closed)
    coord.ensure_started()
    return coord


def listed(broker: Broker, states: list[str], types: list[str]) -> list[tuple[str, str, str, str]]:
    """The share groups this broker coordinates as ListGroups lists them: (group id, protocol
    type "share", state, group type "share"), filtered by state and type as Kafka's (case
    insensitive)."""
    coord: ShareCoordinator | None = getattr(broker, EXTENSION, None)
    if coord is None or (types and "share" not in {t.lower() for t in types}):
        return []
    wanted = {s.lower() for s in states}
    return [
        (g.group_id, "share", g.state, "share")
        for g in coord.groups.values()
        if not wanted or g.state.lower() in wanted
    ]
