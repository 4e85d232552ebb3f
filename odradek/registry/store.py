"""Keeps the registry's state in partition 0 of the compacted `_schemas` topic (Confluent's
kafkastore.topic), through the `RegistryHost` port: created on start (compacted, one partition),
replayed in full into `State`, and appended to before a change is applied, as Confluent's
KafkaStore writes then reads its own record."""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.registry.errors import RegistryError
from odradek.registry.host import RegistryHost
from odradek.registry.state import State
from odradek.wire.records import build_batch

log = logging.getLogger(__name__)

TOPIC = "_schemas"
TOPIC_CONFIGS = {"cleanup.policy": "compact"}
START_TIMEOUT_S = 30.0


class SchemaStore:
    def __init__(self, host: RegistryHost, replication_factor: int = 1) -> None:
        self.host = host
        self.rf = replication_factor
        self.state = State()

    async def load(self) -> None:
        """Wait for `_schemas` (creating it), then replay it."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.host.ensure_topic(TOPIC, 1, self.rf, TOPIC_CONFIGS):
                part = self.host.partition(TOPIC, 0)
                if part is not None and part.is_leader:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the _schemas topic did not become available")
            await asyncio.sleep(0.05)
        count = 0
        for _header, records in part.log.records(None, part.high_watermark):
            for r in records:
                if r.key is not None:
                    self.state.apply(bytes(r.key), None if r.value is None else bytes(r.value))
                    count += 1
        log.info("schema registry loaded %d records from %s", count, TOPIC)

    def write(self, key: bytes, value: bytes | None) -> None:
        """Append one record, then apply it (the single writer: no await in between)."""
        part = self.host.partition(TOPIC, 0)
        if part is None or not part.is_leader:
            raise RegistryError(500, 50001, "Error while storing the schema: no _schemas leader")
        now = int(time.time() * 1000)
        outcome = part.append_internal(build_batch([(key, value, [], now)]))
        if outcome.error:
            raise RegistryError(
                500, 50001, f"Error while storing the schema: error {outcome.error}"
            )
        self.state.apply(key, value)
