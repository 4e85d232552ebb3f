"""Cluster metadata: topics, their ids, partition assignments, topic configs, producer id blocks.

One interface, `MetadataStore`; this module has the in-process implementation, persisted as a
JSON document in the first data directory (written atomically). A ZooKeeper implementation
(Kafka's classic layout) can replace it for clusters of separate processes.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.log.checkpoints import write_atomic

log = logging.getLogger(__name__)

STATE_FILE = "odradek-cluster-metadata.json"
META_PROPERTIES = "meta.properties"
PRODUCER_ID_BLOCK = 1000


@dataclass(slots=True)
class PartitionState:
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class MetadataStore:
    """What brokers need to agree on. Implementations persist every change before returning."""

    cluster_id: str
    topics: dict[str, TopicInfo]

    def create_topic(self, info: TopicInfo) -> None:
        raise NotImplementedError

    def delete_topic(self, name: str) -> None:
        raise NotImplementedError

    def update_topic(self, info: TopicInfo) -> None:
        raise NotImplementedError

    def allocate_producer_ids(self) -> tuple[int, int]:
        raise NotImplementedError


def _load_or_create_cluster_id(data_dir: str, configured: str | None, node_id: int) -> str:
    path = os.path.join(data_dir, META_PROPERTIES)
    props: dict[str, str] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    props[k] = v
    cluster_id = props.get("cluster.id") or configured or \
        uuid.uuid4().bytes.hex()[:22]
    if configured and props.get("cluster.id") and props["cluster.id"] != configured:
        raise ValueError(f"cluster.id {configured} does not match {props['cluster.id']} in {path}")
    if not props:
        write_atomic(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    return cluster_id


class LocalMetadataStore(MetadataStore):
    """In-process store for one broker (or several in one process), kept in a JSON file."""

    def __init__(self, data_dir: str, node_id: int, cluster_id: str | None = None) -> None:
        self.path = os.path.join(data_dir, STATE_FILE)
        self.cluster_id = _load_or_create_cluster_id(data_dir, cluster_id, node_id)
        self.topics: dict[str, TopicInfo] = {}
        self.next_producer_id = 0
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
            self.next_producer_id = doc.get("next_producer_id", 0)
            for t in doc.get("topics", []):
                self.topics[t["name"]] = TopicInfo(
                    t["name"], uuid.UUID(t["id"]),
                    [PartitionState(**p) for p in t["partitions"]],
                    dict(t.get("configs", {})), bool(t.get("internal", False)))

    def _save(self) -> None:
        doc: dict[str, Any] = {
            "version": 1,
            "next_producer_id": self.next_producer_id,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "internal": t.internal,
                 "configs": t.configs,
                 "partitions": [{"replicas": p.replicas, "leader": p.leader,
                                 "leader_epoch": p.leader_epoch, "isr": p.isr}
                                for p in t.partitions]}
                for t in self.topics.values()
            ],
        }
        write_atomic(self.path, json.dumps(doc, indent=1))

    def create_topic(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self._save()

    def delete_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._save()

    def update_topic(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self._save()

    def allocate_producer_ids(self) -> tuple[int, int]:
        """A block [start, end) of producer ids, persisted before use."""
        start = self.next_producer_id
        self.next_producer_id += PRODUCER_ID_BLOCK
        self._save()
        return start, start + PRODUCER_ID_BLOCK
