"""Benchmark topics: created with CreateTopics through confluent-kafka's AdminClient, one per
workload with a unique name, and waited on until every partition has a leader."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

ADMIN_TIMEOUT_S = 30.0
_METADATA_POLL_S = 0.05


class TopicError(RuntimeError):
    """A benchmark topic could not be created or did not get leaders in time."""


def topic_name(label: str) -> str:
    return f"bench-{label}-{uuid.uuid4().hex[:8]}"


class Topics:
    """Creates benchmark topics on one cluster and deletes them again on request."""

    def __init__(self, bootstrap: str) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "odradek-bench"})
        self.created: list[str] = []

    def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str] | None = None,
    ) -> None:
        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(config or {}),
        )
        futures = self._admin.create_topics(
            [topic],
            operation_timeout=ADMIN_TIMEOUT_S,
        )
        try:
            futures[name].result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise TopicError(f"CreateTopics {name}: {exc}") from exc
        self.created.append(name)
        self._wait_for_leaders(name, partitions)

    def _wait_for_leaders(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while time.monotonic() < deadline:
            meta = self._admin.list_topics(name, timeout=5.0).topics.get(name)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                return
            time.sleep(_METADATA_POLL_S)
        raise TopicError(
            f"topic {name} has no leader for every partition after {ADMIN_TIMEOUT_S:.0f} s"
        )

    def delete_created(self) -> None:
        """Best effort: delete every topic this object created."""
        if not self.created:
            return
        futures = self._admin.delete_topics(self.created, operation_timeout=ADMIN_TIMEOUT_S)
        for future in futures.values():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException:
                pass
        self.created.clear()
