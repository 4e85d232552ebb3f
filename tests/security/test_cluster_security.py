"""Three brokers with SASL_SSL between them (issue 14): they replicate (RF 3, acks=all) and fail
over, in-process (`odradek.testing.Cluster(security="sasl_ssl")`) and as `odradek serve`
processes on ZooKeeper. The brokers have no other listener in-process, so replication can only
go over SASL_SSL; the broker connections carry the brokers' principal (User:admin)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from odradek.testing import Cluster
from odradek.testing.cluster import FAST_FAILOVER
from odradek.testing.security import Security

WAIT_S = 30.0


def produce_through_a_leader_kill(conf: dict[str, Any], topic: str, kill: Any) -> list[bytes]:
    """Produce acks=all (idempotent) to partition 0; after 300 acknowledgements call kill();
    go on to 600. Returns the acknowledged values in order."""
    producer = ck.Producer(
        {
            **conf,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    acked: list[bytes] = []
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else acked.append(msg.value()))

    killed = False
    sent = 0
    deadline = time.monotonic() + 3 * WAIT_S
    while len(acked) < 600:
        assert time.monotonic() < deadline, f"{len(acked)} acknowledged, errors {errors[:3]}"
        if sent - len(acked) < 100:
            for _ in range(20):
                producer.produce(topic, value=b"m%06d" % sent, partition=0, on_delivery=delivered)
                sent += 1
        producer.poll(0.05)
        if len(acked) >= 300 and not killed:
            kill()
            killed = True
    assert producer.flush(WAIT_S) == 0
    assert errors == []
    return acked


def consume_partition0(conf: dict[str, Any], topic: str, want: int) -> list[bytes]:
    consumer = ck.Consumer({**conf, "group.id": f"reader-{topic}", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(got) < want:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_in_process_cluster_replicates_and_fails_over_over_sasl_ssl() -> None:
    config = {**FAST_FAILOVER, "min.insync.replicas": "2"}
    with Cluster(
        3, {"orders": (1, 3)}, config, security="sasl_ssl", mechanism="SCRAM-SHA-512"
    ) as cluster:
        assert cluster.security is not None
        # only SASL_SSL listeners: every broker connection is authenticated as the brokers
        listeners = cluster.call(
            lambda c: {b.name for n in c.running() for b in c.brokers[n].bound}
        )
        assert listeners == {"SASL_SSL"}
        cluster.wait_for_isr("orders", 0, size=3)
        leader = cluster.leader("orders", 0)
        conf = cluster.client_config(user="alice")
        acked = produce_through_a_leader_kill(conf, "orders", lambda: cluster.kill(leader))
        new_leader = cluster.wait_for_leader("orders", 0, not_on=leader)
        assert new_leader != leader
        got = consume_partition0(cluster.client_config(), "orders", len(acked))
        assert got == acked  # every acknowledged record, once, in order

        # followers fetched over SASL_SSL as the brokers' principal (a super user)
        principals = cluster.call(
            lambda c: {conn.principal for n in c.running() for conn in c.brokers[n].connections}
        )
        assert cluster.security.broker_principal in principals
        cluster.restart(leader)
        cluster.wait_for_isr("orders", 0, size=3)
        cluster.wait_for_replication("orders", 0)


def test_zookeeper_cluster_with_sasl_ssl_between_brokers(tmp_path: Path) -> None:
    from compat_tests.harness import free_port, unique_name
    from compat_tests.zk_harness import ZkCluster
    from odradek.testing.zookeeper import ZooKeeperServer, zookeeper_jar

    if zookeeper_jar() is None:
        pytest.skip("no ZooKeeper jar (scripts/setup.sh installs it)")
    security = Security(
        "sasl_ssl", "PLAIN", directory=str(tmp_path / "security"), plaintext_too=True
    )
    with ZooKeeperServer(str(tmp_path / "zookeeper")) as zk:
        cluster = ZkCluster(tmp_path / "cluster", zk.connect("/sasl"), 3, security.broker_config())
        secure_ports = {}
        for proc in cluster.brokers:
            # the harness's admin views use the PLAINTEXT listener (first: the harness reads
            # its port from the ready line); brokers talk to each other over SASL_SSL
            secure_ports[proc] = free_port()
            proc.overrides["listeners"] = (
                f"PLAINTEXT://127.0.0.1:{proc.port},SASL_SSL://127.0.0.1:{secure_ports[proc]}"
            )
        with cluster:
            topic = unique_name("orders")
            cluster.create_topic(topic, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
            leader = cluster.leader(topic, 0)
            secure = ",".join(f"127.0.0.1:{p}" for p in secure_ports.values())
            conf = security.client_config(secure, "alice")
            acked = produce_through_a_leader_kill(conf, topic, lambda: cluster.kill(leader))
            cluster.wait_until(lambda: cluster.leader(topic, 0) not in (leader, -1))
            running = ",".join(f"127.0.0.1:{p}" for proc, p in secure_ports.items() if proc.running)
            got = consume_partition0(security.client_config(running, "alice"), topic, len(acked))
            assert got == acked
            cluster.restart(leader)
            cluster.wait_for_isr(topic, 0, 3)  # caught up again over SASL_SSL
            for proc in cluster.brokers:  # no broker failed to authenticate to another
                log = proc.log_path.read_text(errors="replace")
                assert "Failed authentication" not in log, log[-3000:]


def test_with_acls_on_the_brokers_are_super_users_and_clients_are_checked() -> None:
    """Deny by default (an authorizer, no ACLs): the brokers still replicate and send
    transaction markers as their principal (in super.users); a user without ACLs is refused."""
    config = {
        **FAST_FAILOVER,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
    with Cluster(
        3, {"orders": (1, 3)}, config, security="sasl_ssl", mechanism="SCRAM-SHA-256"
    ) as cluster:
        cluster.wait_for_isr("orders", 0, size=3)
        outcomes: list[Any] = []
        producer = ck.Producer({**cluster.client_config("admin"), "acks": "all"})
        producer.produce("orders", b"by-admin", on_delivery=lambda e, m: outcomes.append(e))
        producer.flush(WAIT_S)
        assert outcomes == [None]
        cluster.wait_for_replication("orders", 0)

        txn = ck.Producer({**cluster.client_config("admin"), "transactional.id": "acl-txn"})
        txn.init_transactions(WAIT_S)
        txn.begin_transaction()
        txn.produce("orders", b"in-txn")
        txn.commit_transaction(WAIT_S)  # markers written broker to broker

        denied: list[Any] = []
        alice = ck.Producer({**cluster.client_config("alice"), "message.timeout.ms": 5000})
        alice.produce("orders", b"never", on_delivery=lambda e, m: denied.append(e))
        alice.flush(WAIT_S)
        assert [e.code() for e in denied] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert sorted(cluster.isr("orders", 0)) == [0, 1, 2]
        # by-admin, in-txn and its commit marker; nothing of alice's
        cluster.wait_for_replication("orders", 0)
        assert cluster.log_end_offset(cluster.leader("orders", 0), "orders", 0) == 3
