"""The in-process metadata store as a cluster shares it: registrations, conditional partition
updates, persistence and change notification."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from odradek.broker.cluster.metadata_store import (
    STATE_FILE,
    BrokerRegistration,
    LocalMetadataStore,
    MetadataChange,
    PartitionState,
    TopicInfo,
)


def topic() -> TopicInfo:
    return TopicInfo("t", uuid.uuid4(), [PartitionState([0, 1], 0, 0, [0, 1])])


def test_conditional_partition_updates(tmp_path: Path) -> None:
    s = LocalMetadataStore.for_cluster(str(tmp_path))
    s.create_topic(topic())
    new = PartitionState([0, 1], 0, 0, [0])
    assert s.update_partitions([("t", 0, new, 0, 0)]) == [True]
    assert s.topics["t"].partitions[0].partition_epoch == 1
    stale = PartitionState([0, 1], 1, 1, [1])
    assert s.update_partitions([("t", 0, stale, 0, 0), ("t", 7, stale, 0, 0)]) == [False, False]
    assert s.topics["t"].partitions[0].isr == [0]
    doc = json.loads((tmp_path / STATE_FILE).read_text())
    assert doc["topics"][0]["partitions"][0]["partition_epoch"] == 1
    again = LocalMetadataStore.for_cluster(str(tmp_path))
    assert again.topics["t"].partitions[0] == s.topics["t"].partitions[0]
    assert again.cluster_id == s.cluster_id


def test_registrations_are_not_persisted(tmp_path: Path) -> None:
    s = LocalMetadataStore.for_cluster(str(tmp_path))
    s.register_broker(BrokerRegistration(2, "h", 1))
    s.register_broker(BrokerRegistration(1, "h", 2))
    assert s.live_brokers() == [1, 2] and s.controller_id() == 1
    first = s.broker(1).broker_epoch
    s.register_broker(BrokerRegistration(1, "h", 2))
    assert s.broker(1).broker_epoch > first  # a restart is told apart
    assert LocalMetadataStore.for_cluster(str(tmp_path)).live_brokers() == []
    s.unregister_broker(1)
    s.unregister_broker(2)
    assert s.controller_id() == -1


def test_subscribers_hear_of_changes_after_the_change_on_the_loop(tmp_path: Path) -> None:
    s = LocalMetadataStore.for_cluster(str(tmp_path))
    seen: list[MetadataChange] = []

    def subscriber(change: MetadataChange) -> None:
        seen.append(change)
        if change.kind == "topic":
            s.register_broker(BrokerRegistration(0, "h", 1))  # changing again re-enters no one

    async def run() -> None:
        s.subscribe(subscriber)
        s.create_topic(topic())
        assert seen == []  # not inside the change
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        s.unsubscribe(subscriber)
        s.unregister_broker(0)
        await asyncio.sleep(0)

    asyncio.run(run())
    assert seen == [MetadataChange("topic", "t"), MetadataChange("broker", node_id=0)]


def test_a_failing_subscriber_does_not_stop_the_others(tmp_path: Path) -> None:
    s = LocalMetadataStore.for_cluster(str(tmp_path))
    seen = []

    def bad(change: MetadataChange) -> None:
        raise RuntimeError("boom")

    s.subscribe(bad)
    s.subscribe(seen.append)
    s.create_topic(topic())  # no loop running: delivered at once
    assert seen == [MetadataChange("topic", "t")]


def test_a_standalone_store_is_not_clustered(tmp_path: Path) -> None:
    s = LocalMetadataStore(str(tmp_path), 0)
    assert not s.clustered
    assert "node.id=0" in (tmp_path / "meta.properties").read_text()


def test_topics_created_together_are_all_or_nothing(tmp_path: Path, monkeypatch) -> None:
    s = LocalMetadataStore(str(tmp_path), 0)
    s.create_topic(topic())
    batch = [TopicInfo(n, uuid.uuid4(), [PartitionState([0], 0)]) for n in ("a", "t", "b", "a")]
    assert [i.name for i in s.create_topics(batch)] == ["a", "b"]  # "t" exists, "a" once
    assert set(LocalMetadataStore(str(tmp_path), 0).topics) == {"t", "a", "b"}

    def refuse(path: str, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("odradek.broker.cluster.metadata_store.write_atomic", refuse)
    with pytest.raises(OSError):
        s.create_topics([TopicInfo("c", uuid.uuid4(), [PartitionState([0], 0)])])
    assert set(s.topics) == {"t", "a", "b"}  # nothing half-applied in memory
    monkeypatch.undo()
    s.delete_topic("a")
    again = LocalMetadataStore(str(tmp_path), 0)
    assert set(again.topics) == {"t", "b"}
    assert again.topics["b"].topic_id == s.topics["b"].topic_id
