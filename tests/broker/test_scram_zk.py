"""SCRAM credentials in ZooKeeper (zk_scram.py) against a real ZooKeeper: Kafka's layout
(/config/users/<sanitized user> {"version":1,"config":{"SCRAM-SHA-256":"salt=..."}}) with a
config_change_ notification, seen by another broker's store through the watch, quota keys of
the same node kept both ways, credentials written the way Kafka's own tools write them picked
up, and two ZooKeeper-mode brokers: credentials altered on one are described by, and log a
user in on, the other."""

from __future__ import annotations

import itertools
import json
import time

import pytest
from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)

from odradek.broker.cluster.metadata_store import MetadataChange
from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore
from odradek.broker.network.scram_store import for_store
from odradek.security.scram import (
    ScramClient,
    ScramMechanism,
    ScramServer,
    credential_to_string,
    generate_credential,
)
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.testing.zookeeper import ZooKeeperServer
from tests.cluster.zk_helpers import eventually, node, run, two_stores
from tests.security.scram_login import scram_login

_chroots = itertools.count()
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
WAIT_S = 15.0


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect(f"/scram-test-{next(_chroots)}")


def cred(password: str, mechanism: ScramMechanism = SHA256, iterations: int = 4096) -> str:
    return credential_to_string(generate_credential(mechanism, password, iterations))


def test_credentials_in_kafkas_layout_reach_the_other_broker(connect: str) -> None:
    async def body() -> None:
        with two_stores(connect) as (a, b, heard):
            # a quota already on the user's node (odradek quotas / kafka-configs): kept
            a.alter_client_quotas([((("user", "a b*"),), {"producer_byte_rate": 1024.0})])
            alice, weird = cred("alice-secret", iterations=8192), cred("x", SHA512)
            a.alter_scram_credentials(
                [("alice", {"SCRAM-SHA-256": alice}), ("a b*", {"SCRAM-SHA-512": weird})]
            )
            expected = {"alice": {"SCRAM-SHA-256": alice}, "a b*": {"SCRAM-SHA-512": weird}}
            assert a.scram_credentials == expected  # the writer reads its own write at once
            await eventually(lambda: b.scram_credentials == expected, timeout=WAIT_S)
            assert MetadataChange("scram") in heard

            assert node(a, "/config/users/alice") == {
                "version": 1,
                "config": {"SCRAM-SHA-256": alice},
            }
            assert node(a, "/config/users/a%20b%2A") == {
                "version": 1,
                "config": {"producer_byte_rate": "1024", "SCRAM-SHA-512": weird},
            }
            entity_paths = {
                node(a, f"/config/changes/{c}")["entity_path"]
                for c in a.zk.get_children("/config/changes")
            }
            assert {"users/alice", "users/a%20b%2A"} <= entity_paths

            # a quota change afterwards leaves the credential; deleting it leaves the quota
            b.alter_client_quotas([((("user", "a b*"),), {"consumer_byte_rate": 10.0})])
            assert node(a, "/config/users/a%20b%2A")["config"]["SCRAM-SHA-512"] == weird
            b.alter_scram_credentials([("a b*", {"SCRAM-SHA-512": None})])
            await eventually(lambda: "a b*" not in a.scram_credentials, timeout=WAIT_S)
            assert node(a, "/config/users/a%20b%2A")["config"] == {
                "producer_byte_rate": "1024",
                "consumer_byte_rate": "10",
            }
            # the quota and SCRAM watches of /config/changes re-read independently: wait for
            # the quota one too
            await eventually(
                lambda: (
                    a.client_quotas.get((("user", "a b*"),))
                    == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 10.0}
                ),
                timeout=WAIT_S,
            )

            # written as Kafka's AdminZkClient does (kafka-configs.sh --zookeeper): the node,
            # then a change notification; the other broker logs the user in with it
            carol = generate_credential(SHA512, "carol-secret", 4096)
            a.zk.create(
                "/config/users/carol",
                json.dumps(
                    {"version": 1, "config": {"SCRAM-SHA-512": credential_to_string(carol)}}
                ).encode(),
                makepath=True,
            )
            a.zk.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"users/carol"}',
                sequence=True,
            )
            await eventually(lambda: "carol" in b.scram_credentials, timeout=WAIT_S)
            assert for_store(b).get("carol", SHA512) == carol
            server = ScramServer(SHA512, for_store(b).get)
            client = ScramClient(SHA512, "carol", "carol-secret")
            client.verify(server.step(client.final(server.step(client.first()))))
            assert server.complete

    run(body)


def test_a_new_store_reads_the_credentials_at_start(connect: str) -> None:
    text = cred("s")
    a = ZooKeeperMetadataStore(connect, 0, session_timeout_ms=2000)
    try:
        a.alter_scram_credentials([("alice", {"SCRAM-SHA-256": text})])
    finally:
        a.close()
    b = ZooKeeperMetadataStore(connect, 1, session_timeout_ms=2000)
    try:
        assert b.scram_credentials == {"alice": {"SCRAM-SHA-256": text}}
    finally:
        b.close()


A = AlterUserScramCredentialsRequest
D = DescribeUserScramCredentialsRequest


def test_two_zookeeper_brokers_share_credentials(connect: str) -> None:
    def broker(node_id: int) -> Broker:
        return Broker(
            config={
                "zookeeper.connect": connect,
                "node.id": str(node_id),
                "zookeeper.session.timeout.ms": "2000",
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            }
        )

    salt = b"zk-salt"
    with broker(0) as b0, broker(1) as b1:
        upsert = A.ScramCredentialUpsertion(
            name="alice",
            mechanism=SHA256.wire_type,
            iterations=4096,
            salt=salt,
            salted_password=SHA256.salted_password("alice-secret", salt, 4096),
        )
        with RawClient(b0.bootstrap) as c:
            resp = c.request(A(deletions=[], upsertions=[upsert]), 0)
        assert [(r.user, r.error_code) for r in resp.results] == [("alice", 0)]

        def seen_by_b1() -> list[tuple[str, int, list[tuple[int, int]]]]:
            with RawClient(b1.bootstrap) as c:
                answer = c.request(D(users=None), 0)
            return [
                (r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
                for r in answer.results
            ]

        deadline = time.monotonic() + WAIT_S
        while seen_by_b1() != [("alice", 0, [(1, 4096)])]:
            assert time.monotonic() < deadline, f"broker 1 sees {seen_by_b1()}"
            time.sleep(0.05)

        # and a client logs in with it on broker 1's SASL listener (a wrong password fails)
        assert b1.server is not None
        sasl = f"127.0.0.1:{b1.server.bound[1].port}"
        assert login(sasl, "alice", "alice-secret") is None
        assert "invalid credentials" in str(login(sasl, "alice", "wrong"))


def login(bootstrap: str, user: str, password: str) -> str | None:
    """None when confluent-kafka's admin client logs in with SCRAM-SHA-256 and lists topics,
    else the error librdkafka reports."""
    return scram_login(bootstrap, user, password, "SCRAM-SHA-256", WAIT_S)
