"""Client quotas in ZooKeeper (zk_quotas.py) against a real ZooKeeper: Kafka's layout and change
notifications, seen by another broker's store, a user node's SCRAM credentials kept, and a quota
written the way Kafka's own tools write it picked up."""

from __future__ import annotations

import itertools

import pytest

from odradek.broker.cluster.metadata_store import MetadataChange
from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore
from odradek.testing.zookeeper import ZooKeeperServer
from tests.cluster.zk_helpers import eventually, node, run, two_stores

_chroots = itertools.count()


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect(f"/quota-test-{next(_chroots)}")


def test_quotas_in_kafkas_layout_reach_the_other_broker(connect: str) -> None:
    async def body() -> None:
        with two_stores(connect) as (a, b, heard):
            # a user node that already holds SCRAM credentials (kafka-configs.sh --add-config
            # 'SCRAM-SHA-256=[...]' writes them there): quotas must leave them alone
            a.zk.create(
                "/config/users/alice",
                b'{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,iterations=4096"}}',
                makepath=True,
            )
            a.alter_client_quotas(
                [
                    ((("client-id", "a b*"),), {"producer_byte_rate": 1024.0}),
                    ((("user", "alice"),), {"consumer_byte_rate": 2048.0}),
                    ((("client-id", None), ("user", "alice")), {"request_percentage": 12.5}),
                ]
            )
            expected = {
                (("client-id", "a b*"),): {"producer_byte_rate": 1024.0},
                (("user", "alice"),): {"consumer_byte_rate": 2048.0},
                (("client-id", None), ("user", "alice")): {"request_percentage": 12.5},
            }
            assert a.client_quotas == expected
            await eventually(lambda: b.client_quotas == expected)
            assert MetadataChange("quota") in heard

            assert node(a, "/config/clients/a%20b%2A") == {
                "version": 1,
                "config": {"producer_byte_rate": "1024"},
            }
            assert node(a, "/config/users/alice")["config"] == {
                "SCRAM-SHA-256": "salt=c2FsdA==,iterations=4096",
                "consumer_byte_rate": "2048",
            }
            assert node(a, "/config/users/alice/clients/<default>")["config"] == {
                "request_percentage": "12.5"
            }
            changes = sorted(a.zk.get_children("/config/changes"))
            assert changes[0].startswith("config_change_") and len(changes) == 3
            assert {node(a, f"/config/changes/{c}")["entity_path"] for c in changes} == {
                "clients/a%20b%2A",
                "users/alice",
                "users/alice/clients/<default>",
            }

            # removing the last quota key leaves the SCRAM credentials and drops the entity
            b.alter_client_quotas([((("user", "alice"),), {"consumer_byte_rate": None})])
            await eventually(lambda: (("user", "alice"),) not in a.client_quotas)
            assert node(a, "/config/users/alice")["config"] == {
                "SCRAM-SHA-256": "salt=c2FsdA==,iterations=4096"
            }

            # written as Kafka's AdminZkClient does: the node, then a change notification
            a.zk.create(
                "/config/clients/<default>",
                b'{"version":1,"config":{"consumer_byte_rate":"500"}}',
                makepath=True,
            )
            a.zk.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"clients/<default>"}',
                sequence=True,
            )
            await eventually(
                lambda: b.client_quotas.get((("client-id", None),)) == {"consumer_byte_rate": 500.0}
            )

    run(body)


def test_a_new_store_reads_the_quotas_at_start(connect: str) -> None:
    a = ZooKeeperMetadataStore(connect, 0, session_timeout_ms=2000)
    try:
        a.alter_client_quotas([((("user", None),), {"controller_mutation_rate": 5.0})])
    finally:
        a.close()
    b = ZooKeeperMetadataStore(connect, 1, session_timeout_ms=2000)
    try:
        assert b.client_quotas == {(("user", None),): {"controller_mutation_rate": 5.0}}
    finally:
        b.close()
