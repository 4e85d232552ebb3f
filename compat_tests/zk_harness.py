"""Clusters of separate `odradek serve` processes sharing a ZooKeeper, as a user runs them.

    with ZooKeeperServer() as zk, ZkCluster(tmp_path, zk.connect("/t1"), brokers=3) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        cluster.kill(cluster.leader(topic, 0))        # kill -9 one process
        cluster.wait_for_isr(topic, 0, size=2)

Each broker is a `BrokerProcess` with its own port and data dir and `node.id` 0..n-1, and the
same `zookeeper.connect` (a chroot per cluster keeps clusters on one ZooKeeper apart). Timings
are shortened so failures show within seconds: a 2 s ZooKeeper session (a killed broker's
registration goes after it), followers long-poll 100 ms and leave the ISR after 2 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from compat_tests.harness import BrokerProcess

SESSION_TIMEOUT_MS = 2000
WAIT_S = 30.0

FAST: dict[str, str] = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "zookeeper.connection.timeout.ms": "10000",
    "replica.fetch.wait.max.ms": "100",
    "replica.lag.time.max.ms": "2000",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
}


class ZkCluster:
    def __init__(
        self,
        work_dir: Path,
        zookeeper_connect: str,
        brokers: int = 3,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.brokers = [
            BrokerProcess(
                work_dir / f"broker-{node}",
                overrides={
                    **FAST,
                    "node.id": str(node),
                    "zookeeper.connect": zookeeper_connect,
                    **(overrides or {}),
                },
            )
            for node in range(brokers)
        ]

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ZkCluster:
        for proc in self.brokers:
            proc.start()
        self.wait_until(lambda: len(self.describe_cluster()["brokers"]) == len(self.brokers))
        return self

    def stop(self) -> list[int | None]:
        return [proc.stop() for proc in reversed(self.brokers)][::-1]

    def kill(self, node: int) -> None:
        self.brokers[node].kill()

    def restart(self, node: int) -> None:
        self.brokers[node].start()

    def __enter__(self) -> ZkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views (through the Kafka protocol, as a user sees them) ------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.brokers if p.running)

    def admin(self, bootstrap: str | None = None) -> KafkaAdminClient:
        return KafkaAdminClient(
            bootstrap_servers=bootstrap or self.bootstrap, request_timeout_ms=10000
        )

    def describe_cluster(self, bootstrap: str | None = None) -> dict[str, Any]:
        """DescribeCluster, from any broker or from the one at `bootstrap`."""
        admin = self.admin(bootstrap)
        try:
            return admin.describe_cluster()
        finally:
            admin.close()

    def registered(self) -> list[int]:
        """Ids of the brokers the cluster believes live (their ZooKeeper sessions)."""
        return sorted(b["broker_id"] for b in self.describe_cluster()["brokers"])

    def partition(self, topic: str, index: int = 0) -> dict[str, Any]:
        """The partition as Metadata shows it: leader_id, leader_epoch, replica_nodes,
        isr_nodes, offline_replicas."""
        admin = self.admin()
        try:
            (desc,) = admin.describe_topics([topic])
        finally:
            admin.close()
        for part in desc["partitions"]:
            if part["partition_index"] == index:
                return part
        raise KeyError(f"{topic}-{index}")

    def metadata_from(self, node: int, topic: str) -> Any:
        """`topic` in broker `node`'s own Metadata answer (one connection to it alone: the
        admin client may pick any broker, a frozen one included)."""
        from kafka.protocol.metadata import MetadataRequest

        from odradek.testing.raw import RawClient

        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        with RawClient(self.brokers[node].bootstrap) as client:
            response = client.request(request, 12)
        (found,) = response.topics
        return found

    def isr_seen_by(self, node: int, topic: str, index: int = 0) -> list[int]:
        for part in self.metadata_from(node, topic).partitions:
            if part.partition_index == index:
                return sorted(part.isr_nodes)
        raise KeyError(f"{topic}-{index}")

    def leader(self, topic: str, index: int = 0) -> int:
        return int(self.partition(topic, index)["leader_id"])

    def log_tails(self) -> str:
        return "\n".join(p.log_tail(6000) for p in self.brokers)

    # -- waiting ------------------------------------------------------------------------------

    def wait_until(self, predicate: Callable[[], object], timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                if predicate():
                    return
            except Exception as exc:  # a broker still electing or starting: ask again
                last = exc
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"cluster did not reach the expected state in {timeout}s (last error: "
                    f"{last!r})\n" + self.log_tails()
                )
            time.sleep(0.1)

    def wait_for_isr(self, topic: str, index: int = 0, size: int | None = None) -> None:
        want = len(self.brokers) if size is None else size

        def ok() -> bool:
            part = self.partition(topic, index)
            return part["leader_id"] >= 0 and len(part["isr_nodes"]) == want

        self.wait_until(ok)

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 3, configs: Mapping[str, str] | None = None
    ) -> None:
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, rf, topic_configs=dict(configs or {}))])
        finally:
            admin.close()
        for index in range(partitions):
            self.wait_for_isr(name, index, rf)
