"""KIP-714 client metrics subscriptions in the metadata store: ZooKeeper in Kafka 3.7+'s layout
(/config/client-metrics/<name> {"version":1,"config":{...}} and a config_change_ notification),
seen by another broker's store through the watch, a subscription written as Kafka writes it
picked up, deletion; two ZooKeeper-mode brokers: a subscription made with `odradek
client-metrics` on one is what a client of the other is told; and the local store keeping them
across a restart."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from odradek.broker.cluster.metadata_store import LocalMetadataStore, MetadataChange
from odradek.broker.telemetry import manager as tm
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.testing.zookeeper import ZooKeeperServer
from odradek.wire import protocol
from tests.cluster.zk_helpers import eventually, run, two_stores

_chroots = itertools.count()
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 15.0


def test_subscriptions_in_kafkas_layout_reach_the_other_broker(zookeeper: ZooKeeperServer) -> None:
    connect = zookeeper.connect(f"/client-metrics-test-{next(_chroots)}")

    async def body() -> None:
        with two_stores(connect) as (a, b, heard):
            configs = {"metrics": "*", "interval.ms": "1000", "match": "client_id=a b.*"}
            a.alter_client_metrics("all apps", configs)
            assert a.client_metrics == {"all apps": configs}
            await eventually(lambda: b.client_metrics == {"all apps": configs}, timeout=WAIT_S)
            assert MetadataChange("client-metrics") in heard
            data, _ = a.zk.get("/config/client-metrics/all%20apps")
            assert json.loads(data) == {"version": 1, "config": configs}
            paths = {
                json.loads(a.zk.get(f"/config/changes/{c}")[0])["entity_path"]
                for c in a.zk.get_children("/config/changes")
            }
            assert "client-metrics/all%20apps" in paths

            # written as Kafka's AdminZkClient writes it: the node, then a notification
            a.zk.create(
                "/config/client-metrics/java",
                json.dumps({"version": 1, "config": {"metrics": "org.apache.kafka."}}).encode(),
            )
            a.zk.create(
                "/config/changes/config_change_",
                json.dumps({"version": 2, "entity_path": "client-metrics/java"}).encode(),
                sequence=True,
            )
            await eventually(lambda: "java" in b.client_metrics, timeout=WAIT_S)
            assert b.client_metrics["java"] == {"metrics": "org.apache.kafka."}

            b.alter_client_metrics("all apps", {})  # no configs left: the node goes
            await eventually(lambda: set(a.client_metrics) == {"java"}, timeout=WAIT_S)
            assert a.zk.exists("/config/client-metrics/all%20apps") is None

    run(body)


def test_local_store_keeps_subscriptions(tmp_path: Path) -> None:
    store = LocalMetadataStore(str(tmp_path), 0)
    store.alter_client_metrics("s", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"})
    store.alter_client_metrics("gone", {"metrics": "*"})
    store.alter_client_metrics("gone", {})
    again = LocalMetadataStore(str(tmp_path), 0)
    assert again.client_metrics == {
        "s": {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}
    }


def test_two_zookeeper_brokers_share_subscriptions(zookeeper: ZooKeeperServer) -> None:
    connect = zookeeper.connect(f"/client-metrics-test-{next(_chroots)}")

    def broker(node_id: int) -> Broker:
        return Broker(
            config={
                "zookeeper.connect": connect,
                "node.id": str(node_id),
                "zookeeper.session.timeout.ms": "2000",
            }
        )

    def told(b: Broker) -> list[str]:
        with RawClient(b.bootstrap) as raw:
            req = protocol.GetTelemetrySubscriptionsRequest(client_instance_id=tm.ZERO_UUID)
            return list(raw.request(req, 0).requested_metrics)

    with broker(0) as b0, broker(1) as b1:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": b0.bootstrap}
        subprocess.run(
            [sys.executable, "-m", "odradek", "client-metrics", "--alter", "--name", "all"]
            + ["--metrics", "org.apache.kafka.", "--interval", "1000"],
            check=True,
            capture_output=True,
            timeout=60,
            env=env,
        )
        deadline = time.monotonic() + WAIT_S
        while told(b1) != ["org.apache.kafka."]:
            assert time.monotonic() < deadline, "broker 1 never saw the subscription"
            time.sleep(0.05)
