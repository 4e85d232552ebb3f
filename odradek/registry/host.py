"""The registry's view of its broker: a typed port (in `odradek/broker/registry_host.py`)
through which it finds partition 0 of `_schemas`, appends to it and reads it, as the coordinators
reach their internal topics, and learns which broker leads it and that broker's registry URL
(where writes are forwarded); the registry never goes through request handlers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from odradek.log.log import Log


class AppendOutcome(Protocol):
    @property
    def error(self) -> int: ...


class SchemasPartition(Protocol):
    @property
    def log(self) -> Log: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    def append_internal(self, batch: bytes | bytearray) -> AppendOutcome: ...


class RegistryHost(Protocol):
    def partition(self, topic: str, index: int) -> SchemasPartition | None:
        """The partition when this broker holds a replica of it."""

    def ensure_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> bool:
        """True when the topic exists; else its creation starts (replication factor: 1 on
        one broker, else the internal topics' `offsets.topic.replication.factor`)."""

    def is_replica(self, topic: str, index: int) -> bool:
        """This broker is assigned a replica of the partition (it may not hold it yet)."""

    def leader_of(self, topic: str, index: int) -> int:
        """The broker leading the partition per the cluster metadata (-1: none)."""

    def registry_url(self, node_id: int) -> str | None:
        """The registry URL a live broker registered (None: not live or no registry)."""

    async def wait_replicated(self, part: SchemasPartition, timeout_ms: int) -> int:
        """Wait until the ISR holds everything appended to `part` (acks=-1); the error code."""
