"""Kafka Streams and Kafka Connect on a three-broker odradek cluster (`odradek cluster --brokers
3`, one process for the session), every topic at replication factor 3 with min.insync.replicas 2.

The scenarios are test_streams.py's and test_connect.py's, run with replication factor 3:
Streams' exactly-once v2 application with one instance killed -9 (classic rebalance protocol;
its internal repartition and changelog topics, the transaction state log and the consumer
offsets all replicated), and the distributed Connect worker group with exactly-once source
support and a worker killed -9 (its config, offset and status topics replicated). Here the
partition leaders, the group coordinator and the transaction coordinator are spread over three
brokers, so every transaction crosses brokers (AddPartitionsToTxn, WriteTxnMarkers to other
leaders) and every acks=all write waits for a follower. The single-broker and Kafka 4.4 runs of
the same scenarios are in those files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference import test_connect as connect
from compat_tests.reference import test_streams as streams
from compat_tests.reference.jvm_apps import CONNECT, STREAMS, JvmApps

pytestmark = [pytest.mark.cluster]

REPLICATION = 3


@pytest.fixture(scope="module")
def streams_apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmApps]:
    apps = JvmApps(tmp_path_factory.mktemp("jvm-apps"), STREAMS, sources=["StreamsApp"])
    apps.compile()
    yield apps
    apps.stop_all()


@pytest.fixture(scope="module")
def connect_apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmApps]:
    apps = JvmApps(tmp_path_factory.mktemp("jvm-apps"), CONNECT)
    yield apps
    apps.stop_all()


def test_streams_exactly_once_on_three_brokers(
    odradek_three_brokers: BrokerProcess, streams_apps: JvmApps, tmp_path: Path
) -> None:
    streams.test_streams_exactly_once_with_a_killed_instance(
        odradek_three_brokers.bootstrap, "classic", streams_apps, tmp_path, REPLICATION
    )


def test_connect_exactly_once_on_three_brokers(
    odradek_three_brokers: BrokerProcess, connect_apps: JvmApps, tmp_path: Path
) -> None:
    connect.test_connect_distributed_file_connectors_exactly_once(
        odradek_three_brokers.bootstrap, connect_apps, tmp_path, REPLICATION
    )
