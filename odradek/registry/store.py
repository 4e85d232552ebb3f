"""Keeps the registry's state in partition 0 of the compacted `_schemas` topic (Confluent's
kafkastore.topic), through the `RegistryHost` port: created on start (compacted, one partition;
replicated as the internal topics are in a cluster), replayed into `State`, and appended to
before a change is applied, as Confluent's KafkaStore writes then reads its own record.

One writer at a time: the broker leading `_schemas`-0 (`is_writer`). It applies its own
records as it appends them and answers once the ISR holds them (acks=-1, as KafkaStore's
producer), so an id it handed out survives its death. Every other broker replays its own
replica up to the high watermark before answering (Confluent's followers read their
KafkaStoreReaderThread's view). A broker that led and no longer does replays from the start:
what it applied beyond the high watermark may have been truncated."""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.clock import now_ms
from odradek.registry.errors import RegistryError
from odradek.registry.host import RegistryHost, SchemasPartition
from odradek.registry.state import State
from odradek.wire.records import build_batch

log = logging.getLogger(__name__)

TOPIC = "_schemas"
TOPIC_CONFIGS = {"cleanup.policy": "compact"}
START_TIMEOUT_S = 30.0
WRITE_TIMEOUT_MS = 500 * 10  # Confluent's kafkastore.timeout.ms is 500; a cluster under load


class SchemaStore:
    def __init__(self, host: RegistryHost) -> None:
        self.host = host
        self.state = State()
        self.applied = 0  # the next offset to apply
        self._epoch = -1
        self._led = False

    async def load(self) -> None:
        """Wait for `_schemas` (creating it) and its replica here, then replay it. A broker
        without a replica (a cluster larger than the replication factor) serves by forwarding
        everything to the writer (`has_replica`)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.host.ensure_topic(TOPIC, 1, TOPIC_CONFIGS):
                part = self.host.partition(TOPIC, 0)
                if part is not None and (part.is_leader or self.host.leader_of(TOPIC, 0) >= 0):
                    break
                if not self.host.is_replica(TOPIC, 0) and self.host.leader_of(TOPIC, 0) >= 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the _schemas topic did not become available here")
            await asyncio.sleep(0.05)
        self.catch_up()
        log.info("schema registry loaded %d records from %s", self.applied, TOPIC)

    def _part(self) -> SchemasPartition | None:
        return self.host.partition(TOPIC, 0)

    @property
    def has_replica(self) -> bool:
        return self._part() is not None

    @property
    def is_writer(self) -> bool:
        part = self._part()
        return part is not None and part.is_leader

    def writer_url(self) -> str | None:
        """Where writes go when this broker does not lead `_schemas`-0."""
        leader = self.host.leader_of(TOPIC, 0)
        return None if leader < 0 else self.host.registry_url(leader)

    def catch_up(self) -> None:
        """Apply what the local replica holds beyond `applied`: up to the log end as leader
        (its log is the partition's), up to the high watermark as a follower."""
        part = self._part()
        if part is None:
            return
        leader = part.is_leader
        if part.leader_epoch != self._epoch:
            if self._led and not leader:
                self.state = State()
                self.applied = 0
            self._epoch = part.leader_epoch
        self._led = leader
        end = part.log.log_end_offset if leader else part.high_watermark
        if end <= self.applied:
            return
        start = max(self.applied, part.log.log_start_offset)
        for header, records in part.log.records(start, end):
            if header.is_control:
                continue
            for r in records:
                if r.offset < self.applied or r.offset >= end:
                    continue
                if r.key is not None:
                    self.state.apply(bytes(r.key), None if r.value is None else bytes(r.value))
        self.applied = end

    def write(self, key: bytes, value: bytes | None) -> None:
        """Append one record, then apply it (the single writer: no await in between);
        `replicated` must be awaited before the answer goes out."""
        part = self._part()
        if part is None or not part.is_leader:
            raise RegistryError(500, 50004, "Unknown leader: this broker does not lead _schemas")
        self.catch_up()
        now = now_ms()
        outcome = part.append_internal(build_batch([(key, value, [], now)]))
        if outcome.error:
            raise RegistryError(
                500, 50001, f"Error while storing the schema: error {outcome.error}"
            )
        self.state.apply(key, value)
        self.applied = part.log.log_end_offset

    async def replicated(self) -> None:
        """As the writer, wait until the ISR holds every record applied so far (Kafka's
        acks=-1), so that no answer, to a write or a read, shows what a failover could lose."""
        part = self._part()
        if part is None or not part.is_leader or part.high_watermark >= self.applied:
            return
        error = await self.host.wait_replicated(part, WRITE_TIMEOUT_MS)
        if error:
            raise RegistryError(
                500, 50002, f"Write to the Kafka store timed out or failed (error {error})"
            )
