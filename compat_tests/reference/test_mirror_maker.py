"""MirrorMaker 2 (connect-mirror 4.3.1, dedicated mode) between odradek and Apache Kafka 4.4.

One `MirrorMaker` process with two flows, odradek -> kafka and kafka -> odradek, each
replicating a topic (renamed `<source alias>.<topic>`, created with the source topic's configs),
checkpointing a consumer group (the `<source alias>.checkpoints.internal` topic on the target,
KIP-382's offset translation) and syncing its offsets onto the target cluster
(`sync.group.offsets.enabled`). A group that consumed the whole source topic must translate to
the end of the replica, in the checkpoint record and in the target's committed offsets.

The odradek side is one broker, or a three-broker cluster (`odradek_three_brokers`, default
replication factor 3, min.insync.replicas 2): MM2 creates every topic and its Connect topics
with replication factor -1, each cluster's default (KIP-464), so on the cluster they get three
replicas, checked.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from compat_tests.reference.jvm_apps import CONNECT, JvmApps, produce

MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
RECORDS = 100
RETENTION_MS = "86400001"


@pytest.fixture(scope="module")
def jvm_apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmApps]:
    apps = JvmApps(tmp_path_factory.mktemp("jvm-apps"), CONNECT)
    yield apps
    apps.stop_all()


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def read_checkpoints(bootstrap: str, topic: str) -> list[tuple[str, str, int, int, int]]:
    """Every record of a checkpoints topic: (group, topic, partition, upstream, downstream)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cp-{uuid.uuid4().hex[:8]}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + 30
        pos = 0
        while pos < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            pos = msg.offset() + 1
            key, value = msg.key() or b"", msg.value() or b""
            group, i = _string(key, 0)  # the key has no version, the value has
            tp, i = _string(key, i)
            (partition,) = struct.unpack_from(">i", key, i)
            upstream, downstream = struct.unpack_from(">qq", value, 2)
            out.append((group, tp, partition, upstream, downstream))
        return out
    finally:
        consumer.close()


def consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < n:
            assert time.monotonic() < deadline, f"read {seen} of {n} from {topic}"
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen += 1
        consumer.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
    finally:
        consumer.close()


def committed(admin: AdminClient, group: str, topic: str) -> int | None:
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    )
    result = futures[group].result(10)
    offsets = [tp.offset for tp in result.topic_partitions if tp.topic == topic]
    return offsets[0] if offsets and offsets[0] >= 0 else None


def wait(check: object, timeout: float, what: str, tail: object) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():  # type: ignore[operator]
                return
        except Exception:  # noqa: BLE001 - a cluster still creating the topic
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{tail()}")  # type: ignore[operator]
        time.sleep(0.5)


@pytest.fixture(params=["one broker", "three brokers"])
def odradek_side(request: pytest.FixtureRequest) -> object:
    if request.param == "one broker":
        return request.getfixturevalue("odradek_broker")
    return request.getfixturevalue("odradek_three_brokers")


def test_mirror_maker_both_ways_with_offset_translation(
    odradek_side: object, kafka44: object, jvm_apps: JvmApps, tmp_path: Path
) -> None:
    prefix = f"m{uuid.uuid4().hex[:8]}"
    clusters = {
        "odradek": str(odradek_side.bootstrap),  # type: ignore[attr-defined]
        "kafka": str(kafka44.bootstrap),  # type: ignore[attr-defined]
    }
    admins = {alias: AdminClient({"bootstrap.servers": b}) for alias, b in clusters.items()}
    topics = {"odradek": f"{prefix}-from-odradek", "kafka": f"{prefix}-from-kafka"}
    groups = {alias: f"{prefix}-group-{alias}" for alias in clusters}
    for alias, topic in topics.items():
        new = NewTopic(topic, 1, config={"retention.ms": RETENTION_MS})
        admins[alias].create_topics([new])[topic].result(30)
        produce(clusters[alias], topic, [(f"k{i}", f"{alias}-{i}", None) for i in range(RECORDS)])
        consume_and_commit(clusters[alias], topic, groups[alias], RECORDS)

    props = {
        "clusters": "odradek, kafka",
        "odradek.bootstrap.servers": clusters["odradek"],
        "kafka.bootstrap.servers": clusters["kafka"],
        "odradek->kafka.enabled": "true",
        "kafka->odradek.enabled": "true",
        "topics": f"{prefix}-.*",
        "groups": f"{prefix}-.*",
        "replication.factor": "-1",
        "checkpoints.topic.replication.factor": "-1",
        "heartbeats.topic.replication.factor": "-1",
        "offset-syncs.topic.replication.factor": "-1",
        "offset.storage.replication.factor": "-1",
        "status.storage.replication.factor": "-1",
        "config.storage.replication.factor": "-1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "offset.lag.max": "0",
    }
    directory = tmp_path / "mm2"
    directory.mkdir()
    conf = directory / "mm2.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    mm2 = jvm_apps.start(MM2_MAIN, str(conf), directory=directory)
    try:
        for source, target in (("odradek", "kafka"), ("kafka", "odradek")):
            replica = f"{source}.{topics[source]}"

            def replicated(target: str = target, replica: str = replica) -> bool:
                probe = Consumer({"bootstrap.servers": clusters[target], "group.id": "probe"})
                try:
                    low, high = probe.get_watermark_offsets(TopicPartition(replica, 0), 5)
                finally:
                    probe.close()
                return bool(high == RECORDS)

            wait(replicated, 120, f"{replica} on {target}", mm2.output_tail)

            def synced(target: str = target, replica: str = replica, source: str = source) -> bool:
                return committed(admins[target], groups[source], replica) == RECORDS

            wait(synced, 120, f"{groups[source]}'s offsets synced onto {target}", mm2.output_tail)
            assert mm2.running, mm2.output_tail()

            checkpoints = read_checkpoints(clusters[target], f"{source}.checkpoints.internal")
            ours = [c for c in checkpoints if c[0] == groups[source]]
            assert ours, (checkpoints, mm2.output_tail())
            assert ours[-1] == (groups[source], replica, 0, RECORDS, RECORDS)

            # the replica's records are the source's, and it was created with its configs
            res = ConfigResource(ConfigResource.Type.TOPIC, replica)
            configs = admins[target].describe_configs([res])[res].result(10)
            assert configs["retention.ms"].value == RETENTION_MS
        # every topic MM2 made on odradek has the cluster's default replication factor
        brokers = len(admins["odradek"].list_topics(timeout=10).brokers)
        made = admins["odradek"].list_topics(timeout=10).topics
        ours = {n: t for n, t in made.items() if n.startswith(("kafka.", "mm2-"))}
        assert f"kafka.{topics['kafka']}" in ours and "kafka.checkpoints.internal" in ours, made
        for name, topic in ours.items():
            for p in topic.partitions.values():
                assert len(set(p.replicas)) == brokers, (name, p.id, p.replicas)
    finally:
        mm2.stop()
