"""Transactions across brokers, as Kafka's AddPartitionsToTxnManager: the partition leader asks
the transaction's coordinator on another broker with AddPartitionsToTxn v5 (the inter-broker
form: transactions batched) over one connection per coordinator broker. Transactions v2 (KIP-890
part 2): a transactional produce (v12+) or TxnOffsetCommit v5 adds its partition (verify_only
false) and waits for the answer before it appends; the coordinator then writes the markers to
that partition like to any other of the transaction. Transactions v1 (KIP-890 part 1): a
transactional produce asks whether its partitions are in the ongoing transaction (verify_only
true) before it appends."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.broker.replication.client import PeerError
from odradek.broker.replication.peers import NoEndpoint, PeerPool
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
VERSION = 5
TIMEOUT_S = 15.0


class RemoteTxnAdder:
    """Sends AddPartitionsToTxn v5 to other brokers' transaction coordinators."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.peers = PeerPool(broker, "txn-add-partitions")

    async def add(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> ErrorCode:
        """The coordinator's answer: NONE, or the first error of any partition (one
        transaction's partitions share their coordinator error)."""
        answer = await self._send(
            node, transactional_id, producer_id, producer_epoch, partitions, False
        )
        if isinstance(answer, ErrorCode):
            return answer
        return next((e for e in answer.values() if e != ErrorCode.NONE), ErrorCode.NONE)

    async def verify(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """verify_only (KIP-890 part 1, transactions v1): each partition's error, NONE when it
        is in the producer's ongoing transaction."""
        answer = await self._send(
            node, transactional_id, producer_id, producer_epoch, partitions, True
        )
        if isinstance(answer, ErrorCode):
            return dict.fromkeys(partitions, answer)
        return {tp: answer.get(tp, ErrorCode.NONE) for tp in partitions}

    async def _send(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        verify_only: bool,
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """The partitions' errors, or one error for all (unreachable, or a top-level one)."""
        Req = protocol.AddPartitionsToTxnRequest
        Txn = Req.AddPartitionsToTxnTransaction
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = Req(
            transactions=[
                Txn(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=verify_only,
                    topics=[
                        Req.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        try:
            resp = await self.peers.request(
                node, ApiKey.ADD_PARTITIONS_TO_TXN, VERSION, request, TIMEOUT_S
            )
        except NoEndpoint:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        except PeerError as exc:
            log.info("AddPartitionsToTxn to broker %d failed: %s", node, exc)
            return ErrorCode.NETWORK_EXCEPTION
        if resp.error_code:
            return ErrorCode(resp.error_code)
        return {
            (t.name, p.partition_index): ErrorCode(p.partition_error_code)
            for txn in resp.results_by_transaction
            for t in txn.topic_results
            for p in t.results_by_partition
        }

    def close(self) -> None:
        self.peers.close()
