"""Kafka Streams and Kafka Connect on a three-broker odradek cluster (`odradek cluster --brokers
3`, one process for the session), every topic at replication factor 3 with min.insync.replicas 2.

The scenarios are test_streams.py's and test_connect.py's, run with replication factor 3:
Streams' exactly-once v2 application with one instance killed -9 (with the classic rebalance
protocol and with KIP-1071's streams protocol, where the broker creates the internal topics; its
internal repartition and changelog topics, the transaction state log and the consumer
offsets all replicated), and the distributed Connect worker group with exactly-once source
support and a worker killed -9 (its config, offset and status topics replicated). Here the
partition leaders, the group coordinator and the transaction coordinator are spread over three
brokers, so every transaction crosses brokers (AddPartitionsToTxn, WriteTxnMarkers to other
leaders) and every acks=all write waits for a follower. The single-broker and Kafka 4.4 runs of
the same scenarios are in those files.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from compat_tests.harness import BrokerProcess
from compat_tests.reference import test_connect as connect
from compat_tests.reference import test_streams as streams
from compat_tests.reference.jvm_apps import CONNECT, JvmApps

pytestmark = [pytest.mark.cluster]

REPLICATION = 3


def assert_replicated(bootstrap: str, suffixes: tuple[str, ...]) -> None:
    """Every topic whose name ends with one of `suffixes`, and the coordinators' internal
    topics, has three replicas on distinct brokers, all back in sync within a bounded wait (a
    follower may lag behind for a moment on a loaded machine)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        topics = admin.list_topics(timeout=10).topics
        chosen = {n: t for n, t in topics.items() if n.endswith(suffixes)}
        assert {"__consumer_offsets", "__transaction_state"} <= set(chosen), sorted(topics)
        for name, topic in chosen.items():
            for p in topic.partitions.values():
                assert len(set(p.replicas)) == REPLICATION, (name, p.id, p.replicas)
        lagging = [
            (name, p.id, p.isrs)
            for name, topic in chosen.items()
            for p in topic.partitions.values()
            if sorted(p.isrs) != sorted(p.replicas)
        ]
        if not lagging:
            return
        assert time.monotonic() < deadline, lagging
        time.sleep(0.2)


@pytest.fixture(scope="module")
def connect_apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmApps]:
    apps = JvmApps(tmp_path_factory.mktemp("jvm-apps"), CONNECT)
    yield apps
    apps.stop_all()


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_streams_exactly_once_on_three_brokers(
    odradek_three_brokers: BrokerProcess, streams_apps: JvmApps, tmp_path: Path, protocol: str
) -> None:
    streams.test_streams_exactly_once_with_a_killed_instance(
        odradek_three_brokers.bootstrap, protocol, streams_apps, tmp_path, REPLICATION
    )
    internal = ("-changelog", "-repartition", "__consumer_offsets", "__transaction_state")
    assert_replicated(odradek_three_brokers.bootstrap, internal)


def test_connect_exactly_once_on_three_brokers(
    odradek_three_brokers: BrokerProcess, connect_apps: JvmApps, tmp_path: Path
) -> None:
    connect.test_connect_distributed_file_connectors_exactly_once(
        odradek_three_brokers.bootstrap, connect_apps, tmp_path, REPLICATION
    )
    internal = ("-configs", "-offsets", "-status", "__consumer_offsets", "__transaction_state")
    assert_replicated(odradek_three_brokers.bootstrap, internal)
