"""The pieces of the Jepsen soak against Apache Kafka on hosts (kafka_hosts.py, `python -m
bench.jepsen --broker kafka`): the KRaft active controller the partition-controller fault
isolates, the fault kinds left out on Kafka, and each node's configuration on its own host. The
soak itself (three JVMs in namespaces, about 15 s a seed) is a CLI, not a test (docs/jepsen.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests.reference.kafka_hosts import UNSUPPORTED, KafkaHosts, quorum_leader
from compat_tests.reference.kafka_ref import KafkaReference
from odradek.testing.jepsen import netns
from odradek.testing.jepsen.deployment import applicable
from odradek.testing.jepsen.nemesis import ALL, Fault, Nemesis


def test_quorum_leader_is_the_active_controller_on_every_node(
    kafka44_cluster: KafkaReference,
) -> None:
    """DescribeQuorum through any broker names the one active controller (Metadata's
    controller id on KRaft is a random broker, so the fault cannot use it)."""
    answers = {quorum_leader(node.bootstrap) for node in kafka44_cluster.nodes}
    assert len(answers) == 1, answers
    [answer] = answers
    assert answer is not None
    leader, epoch = answer
    assert leader in {node.node_id for node in kafka44_cluster.nodes}
    assert epoch >= 1


def test_kafka_takes_every_fault_that_needs_neither_odradek_nor_zookeeper() -> None:
    kept, skipped = applicable(ALL, UNSUPPORTED)
    assert kept == (
        "partition-leader",
        "partition-controller",
        "majority-minority",
        "bridge",
        "zk-cut",
        "netem",
        "kill",
        "pause",
        "disk-full",
    )
    assert sorted(skipped) == ["clock-jump", "eio", "power-loss"]
    assert all(skipped.values())


def test_each_node_listens_on_its_own_host_and_the_nemesis_refuses_the_rest(
    tmp_path: Path,
) -> None:
    lack = netns.missing()
    assert not lack, "hosts in network namespaces need " + ", ".join(lack)
    kafka = KafkaHosts(tmp_path)  # namespaces made, nothing started
    try:
        addrs = [kafka.addr(b) for b in kafka.brokers]
        assert len(set(addrs)) == 3 and kafka.addr("client") not in addrs
        voters = ",".join(f"{i}@{a}:9093" for i, a in enumerate(addrs))
        for i, b in enumerate(kafka.brokers):
            props = kafka.node(b).properties()
            assert props["node.id"] == str(i)
            assert props["listeners"] == f"PLAINTEXT://{addrs[i]}:9092,CONTROLLER://{addrs[i]}:9093"
            assert props["controller.quorum.voters"] == voters
            assert props["log.dirs"] == str(tmp_path / b / "data")
            assert props["min.insync.replicas"] == "2"
        assert kafka.bootstrap == ",".join(f"{a}:9092" for a in addrs)
        assert kafka.zookeeper == ()
        nemesis = Nemesis(kafka, "t", 4, {})
        for kind in UNSUPPORTED:
            with pytest.raises(ValueError, match="does not apply"):
                nemesis.begin(Fault(0.0, kind, 7, 1.0))
        assert not kafka.net.cuts
    finally:
        kafka.close()
