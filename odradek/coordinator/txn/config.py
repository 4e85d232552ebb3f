"""Configuration and surroundings of the transaction coordinator: Kafka's config keys, the
`__transaction_state` topic and its partitioning, and `TxnHost`, the coordinator's view of the
broker it runs in (so this package never imports the broker).

A transactional id belongs to partition `Utils.abs(transactionalId.hashCode) % partitions` of
`__transaction_state` (Java's String.hashCode; Utils.abs maps Integer.MIN_VALUE to 0):
`coordinator/codec.py`'s `partition_for`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

# re-exported: callers name the state topic's partitioning through this module
from odradek.coordinator.codec import partition_for as partition_for
from odradek.coordinator.txn.state import TopicPartition
from odradek.wire.errors import ErrorCode

STATE_TOPIC = "__transaction_state"


@dataclass(slots=True, frozen=True)
class TxnConfig:
    num_partitions: int = 50
    replication_factor: int = 1
    min_isr: int = 1
    segment_bytes: int = 104857600
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    expire_interval_ms: int = 3600000

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> TxnConfig:
        """From a broker config's `get(key)` with Kafka's keys."""
        return cls(
            num_partitions=int(get("transaction.state.log.num.partitions")),
            replication_factor=int(get("transaction.state.log.replication.factor")),
            min_isr=int(get("transaction.state.log.min.isr")),
            segment_bytes=int(get("transaction.state.log.segment.bytes")),
            max_timeout_ms=int(get("transaction.max.timeout.ms")),
            id_expiration_ms=int(get("transactional.id.expiration.ms")),
            abort_interval_ms=int(
                get("transaction.abort.timed.out.transaction.cleanup.interval.ms")
            ),
            expire_interval_ms=int(
                get("transaction.remove.expired.transaction.cleanup.interval.ms")
            ),
        )

    def topic_configs(self) -> dict[str, str]:
        """Configs of `__transaction_state`, as Kafka's transactionTopicConfigs."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.segment_bytes),
            "min.insync.replicas": str(self.min_isr),
            "unclean.leader.election.enable": "false",
        }


class TxnHost(Protocol):
    """What the coordinator needs from the broker that runs it."""

    @property
    def node_id(self) -> int:
        """This broker's id."""

    def state_partition_count(self) -> int | None:
        """Partitions of `__transaction_state`, None before it exists."""

    def create_state_topic(self, config: TxnConfig) -> None: ...

    def state_partition_leader(self, partition: int) -> int | None:
        """The broker leading a state partition (-1 or None when there is none)."""

    def leader_epoch(self, partition: int) -> int | None:
        """The state partition's leader epoch when this broker leads it, else None."""

    def read_state(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every (key, value) of a state partition up to its high watermark, in order."""

    def append_state(
        self, partition: int, key: bytes, value: bytes | None, timeout_ms: int
    ) -> Awaitable[ErrorCode]:
        """Append one record (acks=all) to a state partition, waiting up to `timeout_ms` for
        the ISR: its error (REQUEST_TIMED_OUT when the wait ran out)."""

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: list[TopicPartition],
    ) -> Awaitable[dict[TopicPartition, ErrorCode]]: ...

    def allocate_producer_id(self) -> int: ...

    def add_partitions_at(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> Awaitable[ErrorCode]:
        """AddPartitionsToTxn v5 (verify_only false) to the coordinator on broker `node`: one
        error for all the partitions."""

    def verify_partitions_at(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> Awaitable[dict[TopicPartition, ErrorCode]]:
        """AddPartitionsToTxn v5 verify_only to the coordinator on broker `node`: each
        partition's error (NONE: in the producer's ongoing transaction)."""

    def offsets_partition(self, group_id: str) -> TopicPartition | None:
        """The `__consumer_offsets` partition of a group (AddOffsetsToTxn)."""


@dataclass(slots=True)
class TxnDescription:
    """One transactional id as DescribeTransactions reports it."""

    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
