"""The registry's view of its broker: a typed port (in `odradek/broker/registry_host.py`)
through which it finds partition 0 of `_schemas`, appends to it and reads it, as the coordinators
reach their internal topics; the registry never goes through request handlers."""

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
    def append_internal(self, batch: bytes | bytearray) -> AppendOutcome: ...


class RegistryHost(Protocol):
    def partition(self, topic: str, index: int) -> SchemasPartition | None:
        """The partition when this broker holds a replica of it."""

    def ensure_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> bool:
        """True when the topic exists; else its creation starts."""
