"""ACLs in clusters (issue 14): created on one broker, seen by every broker.

In-process: the brokers share one metadata store, and so one ACL backend (acls.json in the
cluster's metadata directory). ZooKeeper: each broker has its own session; ACLs are written in
Kafka's /kafka-acl layout with a change notification that the other brokers watch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from odradek.security.acl_types import AclOperation
from odradek.security.acl_types import ResourceType as RT
from odradek.testing import Broker, Cluster

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DEADLINE_S = 20.0
ANY = ACLFilter(
    None,
    None,
    ACLOperation.ANY,
    ACLPermissionType.ANY,
    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
)
ALICE_READS = ACL(
    "User:alice",
    "*",
    ACLOperation.READ,
    ACLPermissionType.ALLOW,
    ResourcePattern(ResourceType.TOPIC, "orders"),
)


def wait_until(ok: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alice_may_read(server: object) -> bool:
    authorizer = server.authorizer  # type: ignore[attr-defined]
    return bool(
        authorizer.authorize("User:alice", "127.0.0.1", AclOperation.READ, RT.TOPIC, "orders")
    )


def test_an_in_process_cluster_sees_acls_created_on_one_broker():
    with Cluster(3, config={"authorizer.class.name": STANDARD}) as cluster:
        # replication passes the authorizer: the brokers' principal is a super user
        cluster.create_topic("r3", 1, 3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        try:
            producer.send("r3", b"replicated").get(timeout=DEADLINE_S)
        finally:
            producer.close()
        cluster.wait_for_replication("r3", 0)
        assert {cluster.log_end_offset(n, "r3") for n in range(3)} == {1}
        admin = KafkaAdminClient(bootstrap_servers=cluster.address(0), request_timeout_ms=10_000)
        try:
            assert admin.create_acls([ALICE_READS])["failed"] == []
        finally:
            admin.close()
        for node in range(3):
            assert cluster.call(lambda c, n=node: alice_may_read(c.brokers[n]))
        admin = KafkaAdminClient(bootstrap_servers=cluster.address(2), request_timeout_ms=10_000)
        try:
            listed, _ = admin.describe_acls(ANY)
        finally:
            admin.close()
        assert [(a.principal, a.resource_pattern.resource_name) for a in listed] == [
            ("User:alice", "orders")
        ]
        # a restarted broker reads them back
        cluster.restart(1)
        assert cluster.call(lambda c: alice_may_read(c.brokers[1]))
        # the killed broker's authorizer no longer follows the shared backend
        assert cluster.call(lambda c: len(c.store._acl_backend._listeners)) == 3


zookeeper_mod = pytest.importorskip("odradek.testing.zookeeper")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    if zookeeper_mod.zookeeper_jar() is None:
        pytest.skip("no ZooKeeper jar here (scripts/setup.sh installs it)")
    with zookeeper_mod.ZooKeeperServer(str(tmp_path_factory.mktemp("zk"))) as server:
        yield server


def test_zookeeper_brokers_see_each_others_acls_in_kafkas_layout(zookeeper):
    connect = zookeeper.connect("/acl-test")
    config = {"zookeeper.connect": connect, "authorizer.class.name": STANDARD,
              "super.users": "User:ANONYMOUS"}  # fmt: skip
    with (
        Broker(config={**config, "broker.id": "1"}) as one,
        Broker(config={**config, "broker.id": "2"}) as two,
    ):
        admin = KafkaAdminClient(bootstrap_servers=one.bootstrap, request_timeout_ms=10_000)
        try:
            assert admin.create_acls([ALICE_READS])["failed"] == []
        finally:
            admin.close()
        wait_until(lambda: two.call(alice_may_read), "broker 2 to see the ACL")

        from kazoo.client import KazooClient

        zk = KazooClient(hosts=connect)
        zk.start(timeout=10)
        try:
            data, _ = zk.get("/kafka-acl/Topic/orders")
            assert json.loads(data) == {
                "version": 1,
                "acls": [
                    {
                        "principal": "User:alice",
                        "permissionType": "Allow",
                        "operation": "Read",
                        "host": "*",
                    }
                ],
            }
            assert zk.get_children("/kafka-acl-changes")
            # an ACL written by another tool (as Kafka's AclAuthorizer writes it) reaches both
            zk.create(
                "/kafka-acl/Group/g1",
                b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow",'
                b'"operation":"Read","host":"*"}]}',
                makepath=True,
            )
            zk.create("/kafka-acl-changes/acl_changes_", b"GROUP:g1", sequence=True)
        finally:
            zk.stop()
            zk.close()

        def bob_may_read(server: object) -> bool:
            authorizer = server.authorizer  # type: ignore[attr-defined]
            return bool(
                authorizer.authorize("User:bob", "127.0.0.1", AclOperation.READ, RT.GROUP, "g1")
            )

        wait_until(lambda: one.call(bob_may_read) and two.call(bob_may_read), "bob's ACL")
