"""PeerPool (broker/replication/peers.py): the inter-broker request path the transaction
marker sender, the AddPartitionsToTxn forwarder and the share-state persister share."""

from __future__ import annotations

import pytest

from odradek.broker.replication.peers import NoEndpoint, PeerPool
from odradek.broker.server import Broker as BrokerServer
from odradek.testing import Broker
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey


def test_one_connection_per_broker_reused_and_an_unknown_broker_refused() -> None:
    async def exercise(server: BrokerServer) -> tuple[list[int], list[str], str]:
        pool = PeerPool(server, "test-peers")
        node = server.node_id
        request = protocol.ApiVersionsRequest
        try:
            answers = [
                await pool.request(node, ApiKey.API_VERSIONS, 0, request(), 5) for _ in range(2)
            ]
            clients = [f"{n}:{c.client_id}:{c.connected}" for n, c in pool.clients.items()]
            with pytest.raises(NoEndpoint) as unknown:
                await pool.request(node + 100, ApiKey.API_VERSIONS, 0, request(), 5)
            return [a.error_code for a in answers], clients, str(unknown.value)
        finally:
            pool.close()

    with Broker() as broker:
        node = broker.call(lambda s: s.node_id)
        errors, clients, unknown = broker.call(exercise)
    assert errors == [0, 0]
    assert clients == [f"{node}:test-peers-{node}:True"]  # one connection, used twice
    assert unknown == f"broker {node + 100} has no inter-broker endpoint"
