"""The harness's reads of a cluster on hosts through its brokers' metadata (Metadata requests of
a librdkafka AdminClient from the control address): the seed's topic made with three in-sync
replicas, a partition's leader, every partition in sync. Shared by `hosts.HostCluster` (odradek)
and the reference's Kafka nodes on hosts (compat_tests/reference/kafka_hosts.py); brokers are
named `b<node id>`.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

TOPIC_CONFIG = {"retention.ms": str(12 * 3600 * 1000)}


class MetadataReads:
    """Mixed into a cluster that has a `bootstrap` (every broker's address)."""

    _admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def admin(self) -> AdminClient:
        if self._admin is None:
            settings: dict[str, str | int] = {"bootstrap.servers": self.bootstrap}
            self._admin = AdminClient({**settings, "socket.timeout.ms": 3000, "log_level": 0})
        return self._admin

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        error = ""
        while time.monotonic() < deadline:
            admin = self.admin()
            new = NewTopic(topic, partitions, 3, config=TOPIC_CONFIG)
            fut = admin.create_topics([new], request_timeout=5)
            try:
                fut[topic].result(10)
            except Exception as exc:  # TOPIC_ALREADY_EXISTS after a retry counts as done
                error = str(exc)
                if "TOPIC_ALREADY_EXISTS" not in error:
                    time.sleep(0.3)
                    continue
            if self.full_isr(topic, partitions):
                return
        raise TimeoutError(f"topic {topic} not created with 3 in-sync replicas: {error}")

    def full_isr(self, topic: str, partitions: int, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                md = self.admin().list_topics(topic, timeout=3).topics.get(topic)
            except Exception:
                md = None
            if (
                md is not None
                and md.error is None
                and len(md.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values())
            ):
                return True
            time.sleep(0.2)
        return False

    def metadata_in_sync(self) -> bool:
        """Every partition of every topic (the internal ones too) has a leader and all its
        replicas in the ISR, in the metadata of the broker that answers."""
        try:
            topics = self.admin().list_topics(timeout=3).topics.values()
        except Exception:
            return False
        return bool(topics) and all(
            md.error is None
            and md.partitions
            and all(
                p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in md.partitions.values()
            )
            for md in topics
        )

    def leader(self, topic: str, partition: int) -> str | None:
        try:
            md = self.admin().list_topics(topic, timeout=3).topics[topic].partitions[partition]
        except Exception:
            return None
        return f"b{md.leader}" if md.leader >= 0 else None
