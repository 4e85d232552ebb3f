"""Requests from this broker to another one, over one connection per destination broker.

Kafka's inter-broker senders (TransactionMarkerChannelManager's WriteTxnMarkers,
AddPartitionsToTxnManager's AddPartitionsToTxn v5, the share-group state persister) each keep
one NetworkClient connection per destination node and send to it in turn. `PeerPool` is that
for odradek: a `PeerClient` per node, made on first use, remade when the node's inter-broker
endpoint changes and reconnected after a failure, one request at a time per node.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from odradek.broker.replication.client import PeerClient, PeerError
from odradek.wire import protocol

if TYPE_CHECKING:
    from odradek.broker.server import Broker

CONNECT_TIMEOUT_S = 5.0


class NoEndpoint(PeerError):
    """The node is not a live broker with an inter-broker endpoint."""


class PeerPool:
    """One `PeerClient` per other broker, named `<purpose>-<this node id>` (the client id)."""

    def __init__(self, broker: Broker, purpose: str) -> None:
        self.broker = broker
        self.purpose = purpose
        self.clients: dict[int, PeerClient] = {}
        self.locks: dict[int, asyncio.Lock] = {}

    async def request(
        self, node: int, api_key: int, version: int, request: protocol.Message, timeout_s: float
    ) -> protocol.Message:
        """Send `request` to broker `node` and return its decoded response; raises
        NoEndpoint for an unknown node and PeerError when it cannot be reached or answer."""
        endpoint = next((e for e in self.broker.broker_endpoints() if e[0] == node), None)
        if endpoint is None:
            raise NoEndpoint(f"broker {node} has no inter-broker endpoint")
        host, port = endpoint[1], endpoint[2]
        async with self.locks.setdefault(node, asyncio.Lock()):
            client = self.clients.get(node)
            if client is None or (client.host, client.port) != (host, port):
                if client is not None:
                    client.close()
                security = self.broker.security
                client = self.clients[node] = PeerClient(
                    host,
                    port,
                    f"{self.purpose}-{self.broker.node_id}",
                    security.peer_tls(),
                    security.peer_sasl,
                    self.broker.config.get("socket.receive.buffer.bytes"),
                )
            if not client.connected:
                await client.connect(CONNECT_TIMEOUT_S)
            return await client.request(api_key, version, request, timeout_s)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()
