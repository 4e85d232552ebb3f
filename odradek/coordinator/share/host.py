"""The share coordinator's view of its broker (KIP-932): a typed port, implemented in
`odradek/broker/share_host.py`, so the coordinator holds no broker, partition or client.

Through it the coordinator reads the broker's settings and a group's configs, finds topics and
the partitions this broker holds (to read and append `__share_group_state` records and to place
a new share-partition), creates the state topic, and sends Read/Write/DeleteShareGroupState and
ListOffsets to the broker leading a partition (Kafka's persister and its network client).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from odradek.log.log import Log


class AppendOutcome(Protocol):
    @property
    def error(self) -> int: ...


class StatePartition(Protocol):
    """A partition this broker holds, as the share coordinator reads and appends it."""

    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def index(self) -> int: ...
    @property
    def log(self) -> Log: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    def append_internal(self, batch: bytes | bytearray) -> AppendOutcome: ...


class ShareHost(Protocol):
    @property
    def node_id(self) -> int: ...

    def setting(self, key: str) -> object | None:
        """The broker's value of a key (Kafka's keys odradek does not use included); None
        when unset."""

    def group_config(self, group_id: str, name: str) -> int | str:
        """A group's effective value of a group config (`coordinator/group_configs.py`)."""

    def offsets_replication_factor(self) -> int: ...

    def topic_ids(self) -> Mapping[str, tuple[uuid.UUID, int]]:
        """Every topic: name -> (topic id, partition count)."""

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def partition_leaders(self, topic: str) -> list[int] | None:
        """The leader of each partition of the topic (-1: none); None when it does not exist."""

    def partition(self, topic: str, index: int) -> StatePartition | None:
        """The partition when this broker holds a replica of it."""

    def is_live(self, node: int) -> bool: ...

    def ensure_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> bool:
        """True when the internal topic exists; else its creation starts."""

    async def peer_request(
        self, node: int, api_key: int, version: int, request: Any, timeout_s: float
    ) -> Any | None:
        """Send a request to another broker; its response, or None when it cannot be asked."""

    def close(self) -> None:
        """Close the connections to other brokers."""
