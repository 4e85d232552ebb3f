"""Wires the transaction coordinator into the broker (KIP-98, KIP-890 part 1).

`install(broker)` creates the coordinator with a `BrokerTxnHost` (its view of this broker:
the `__transaction_state` partitions, producer ids, marker writing, the group coordinator) and
gives the partitions its `TxnAppendVerifier`: a transactional batch is appended only to a
partition of its producer's ongoing transaction, under the current producer id and epoch
(Kafka's produce-time verification), else its error code.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING

from odradek.broker.partitions import internal_topics
from odradek.broker.partitions.internal_topics import ensure_offsets_topic
from odradek.broker.partitions.partition import Partition
from odradek.broker.transactions.markers import OFFSETS_TOPIC, MarkerSender
from odradek.broker.transactions.remote_add import RemoteTxnAdder
from odradek.clock import now_ms
from odradek.coordinator.group import records as group_records
from odradek.coordinator.txn.config import STATE_TOPIC, TxnConfig
from odradek.coordinator.txn.coordinator import TransactionCoordinator
from odradek.coordinator.txn.state import TopicPartition
from odradek.log.reader import data_records
from odradek.log.validator import ValidatedBatches
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)


class BrokerTxnHost:
    """The coordinator's view of the broker (`odradek.coordinator.txn.coordinator.TxnHost`)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.markers = MarkerSender(broker)
        self.adder = RemoteTxnAdder(broker)

    def close(self) -> None:
        self.markers.close()
        self.adder.close()

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def add_partitions_at(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> Awaitable[ErrorCode]:
        return self.adder.add(node, transactional_id, producer_id, producer_epoch, partitions)

    def verify_partitions_at(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> Awaitable[dict[TopicPartition, ErrorCode]]:
        return self.adder.verify(node, transactional_id, producer_id, producer_epoch, partitions)

    def _state_partition(self, partition: int) -> Partition | None:
        return self.broker.topics.get(STATE_TOPIC, partition)

    def state_partition_count(self) -> int | None:
        info = self.broker.topics.info(STATE_TOPIC)
        return None if info is None else len(info.partitions)

    def create_state_topic(self, config: TxnConfig) -> None:
        """Start creating `__transaction_state` in the background (`internal_topics.py`): with
        the configured replication factor once enough brokers are alive, never fewer replicas
        (Kafka answers COORDINATOR_NOT_AVAILABLE meanwhile; before, a broker down at the first
        lookup left the topic under-replicated for good). The coordinator sees no partitions
        until it exists; `StateTopicListener` loads them as they open."""
        internal_topics.creator(self.broker).ensure(
            STATE_TOPIC, config.num_partitions, config.replication_factor, config.topic_configs()
        )

    def state_partition_leader(self, partition: int) -> int | None:
        info = self.broker.topics.info(STATE_TOPIC)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition].leader

    def leader_epoch(self, partition: int) -> int | None:
        part = self._state_partition(partition)
        return part.leader_epoch if part is not None and part.is_leader else None

    def read_state(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        part = self._state_partition(partition)
        if part is None:
            return iter(())
        # up to the log end, as Kafka's TransactionStateManager loads (a new leader's high
        # watermark may trail what the previous leader acknowledged)
        return data_records(part.log, part.log.log_end_offset)

    async def append_state(
        self, partition: int, key: bytes, value: bytes | None, timeout_ms: int
    ) -> ErrorCode:
        part = self._state_partition(partition)
        if part is None or not part.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        batch = build_batch([(key, value, (), now_ms())])
        limit = part.log.config.max_message_bytes
        if len(batch) > limit:
            # refused, not written, as Kafka's log append; the coordinator answers
            # UNKNOWN_SERVER_ERROR (TransactionStateManager.appendTransactionToLog)
            log.error(
                "a %d-byte record for %s-%d is over its max.message.bytes %d; not written",
                len(batch),
                STATE_TOPIC,
                partition,
                limit,
            )
            return ErrorCode.MESSAGE_TOO_LARGE
        result = part.append_internal(batch)
        if result.error != ErrorCode.NONE:
            return ErrorCode(result.error)
        # replicated: the transition counts once the ISR has it (waited for up to timeout_ms)
        await self.broker.replicas.wait_for_acks([(part, result)], timeout_ms)
        return ErrorCode(result.error)

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        return await self.markers.write(
            producer_id, producer_epoch, coordinator_epoch, commit, partitions
        )

    def allocate_producer_id(self) -> int:
        return self.broker.next_producer_id()

    def offsets_partition(self, group_id: str) -> TopicPartition | None:
        groups = self.broker.group_coordinator
        if groups.partition_for(group_id) is None:
            ensure_offsets_topic(self.broker, groups)
        index = groups.partition_for(group_id)
        if index is None:
            # still being created: Kafka's partitionFor uses offsets.topic.num.partitions, so
            # AddOffsetsToTxn succeeds before the topic exists (KafkaJS does not retry it)
            index = group_records.partition_for(group_id, groups.config.num_partitions)
        return (OFFSETS_TOPIC, index)


class StateTopicListener:
    """TopicManager listener: leadership of `__transaction_state` partitions moves the
    transactional ids they hold to or from this broker's coordinator."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def on_partition_added(self, part: Partition) -> None:
        if part.topic == STATE_TOPIC and part.is_leader:
            self.coordinator.on_election(part.index)

    def on_become_leader(self, part: Partition) -> None:
        if part.topic == STATE_TOPIC:
            self.coordinator.on_election(part.index)

    def on_become_follower(self, part: Partition) -> None:
        if part.topic == STATE_TOPIC:
            self.coordinator.on_resignation(part.index)

    def on_partition_removed(self, part: Partition) -> None:
        self.on_become_follower(part)


class TxnAppendVerifier:
    """Kafka's produce-time transaction verification (KIP-890 part 1), called by
    `Partition.append_records`: a transactional batch is appended only to a partition of its
    producer's ongoing transaction, under the current producer id and epoch."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def verify(
        self, part: Partition, validated: ValidatedBatches, transactional_id: str | None
    ) -> ErrorCode | None:
        for _pos, h in validated.batches:
            if not h.is_transactional:
                continue
            error = self.coordinator.check_append(
                transactional_id, h.producer_id, h.producer_epoch, (part.topic, part.index)
            )
            if error == ErrorCode.INVALID_TXN_STATE:
                # not in the ongoing transaction: as Kafka's verification, TRANSACTION_ABORTABLE,
                # which the produce answers as INVALID_TXN_STATE below v11
                error = ErrorCode.TRANSACTION_ABORTABLE
            if error is not None:
                log.info(
                    "transactional produce to %s-%d by producer %d (epoch %d) refused: %s",
                    part.topic,
                    part.index,
                    h.producer_id,
                    h.producer_epoch,
                    error.name,
                )
                return error
        return None


def install(broker: Broker) -> TransactionCoordinator:
    """Create the coordinator, register it as a service and a topic listener, and give the
    partitions its append verifier."""
    coordinator = TransactionCoordinator(
        BrokerTxnHost(broker), TxnConfig.from_broker(broker.config.get)
    )
    broker.services.append(coordinator)
    broker.topics.listeners.append(StateTopicListener(coordinator))
    broker.topics.verifier = TxnAppendVerifier(coordinator)
    return coordinator
