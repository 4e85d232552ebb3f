"""Transactions v2 across brokers (KIP-890 part 2): the partition leader adds a partition to a
transaction coordinated by another broker, as Kafka's AddPartitionsToTxnManager does, with
AddPartitionsToTxn v5 (the inter-broker form: transactions batched, verify_only false) over one
connection per coordinator broker. A transactional produce (v12+) or TxnOffsetCommit v5 waits for
the answer before it appends; the coordinator then writes the markers to that partition like
to any other of the transaction."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.broker.replication.client import PeerClient, PeerError
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
        self.clients: dict[int, PeerClient] = {}
        self.locks: dict[int, asyncio.Lock] = {}

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
        endpoint = next((e for e in self.broker.broker_endpoints() if e[0] == node), None)
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
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
                    verify_only=False,
                    topics=[
                        Req.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        lock = self.locks.setdefault(node, asyncio.Lock())
        async with lock:
            client = self.clients.get(node)
            if client is None or (client.host, client.port) != (endpoint[1], endpoint[2]):
                if client is not None:
                    client.close()
                client = self.clients[node] = PeerClient(
                    endpoint[1],
                    endpoint[2],
                    f"txn-add-partitions-{self.broker.node_id}",
                    self.broker.security.peer_tls(),
                    self.broker.security.peer_sasl,
                )
            try:
                if not client.connected:
                    await client.connect(5.0)
                resp = await client.request(
                    ApiKey.ADD_PARTITIONS_TO_TXN, VERSION, request, TIMEOUT_S
                )
            except PeerError as exc:
                log.info("AddPartitionsToTxn to broker %d failed: %s", node, exc)
                client.close()
                return ErrorCode.NETWORK_EXCEPTION
        if resp.error_code:
            return ErrorCode(resp.error_code)
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    if p.partition_error_code:
                        return ErrorCode(p.partition_error_code)
        return ErrorCode.NONE

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()
