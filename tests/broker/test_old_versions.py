"""Old request versions, served as Kafka 3.9 serves them (issue 16): every API's floor is Kafka
3.9's (v0 for all but the Produce/Fetch handlers of the message-format work), kafka-python
speaking 0.9 to 0.11 (ListOffsets v0/v1, JoinGroup v0-2, OffsetCommit v2-3, OffsetFetch v1-3,
CreateTopics / DeleteTopics v0-2) works a group with commits, lists offsets and creates and
deletes topics; raw requests check the old meanings (Metadata v0's empty list, ListOffsets v0's
offset list, OffsetCommit v1's commit timestamp, OffsetCommit/OffsetFetch v0 in ZooKeeper);
`message.format.version` is accepted, stored and described, with Kafka's warning."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, NewTopic
from kafka.errors import InvalidConfigurationError, UnsupportedVersionError
from kafka.structs import OffsetAndMetadata

from odradek.broker import config as broker_config
from odradek.broker.config import BrokerConfig
from odradek.log.config import ConfigError
from odradek.testing import Broker
from odradek.testing.polling import poll_until
from odradek.testing.raw import RawClient
from odradek.testing.zookeeper import ZooKeeperServer
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

WAIT_S = 30.0
LO = protocol.ListOffsetsRequest
OC = protocol.OffsetCommitRequest
OF = protocol.OffsetFetchRequest
DAY_MS = 24 * 3600 * 1000

# Kafka 3.9's lowest version of each key (its *Request.json validVersions), but Produce (0) and
# Fetch (1), whose legacy message formats are other work of issue 16
KAFKA_39_FLOORS = {
    2: 0, 3: 0, 8: 0, 9: 0, 10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0, 17: 0, 18: 0,
    19: 0, 20: 0, 21: 0, 22: 0, 23: 0, 24: 0, 25: 0, 26: 0, 27: 0, 28: 0, 29: 0, 30: 0, 31: 0,
    32: 0, 33: 0, 34: 0, 35: 0, 36: 0, 37: 0, 42: 0, 43: 0, 44: 0,
}  # fmt: skip

OLD_CLIENTS = [(0, 9), (0, 10, 0), (0, 10, 1), (0, 11)]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = {"offsets.retention.check.interval.ms": 200, "group.initial.rebalance.delay.ms": 0}
    with Broker(topics={"t": 2}, config=config, shared_loop=True, tmpfs=True) as b:
        yield b


def wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def produce(b: Broker, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=b.bootstrap)
    try:
        for i in range(count):  # one batch each
            producer.send(topic, f"v{i:03d}".encode() * 20, partition=0).get(WAIT_S)
    finally:
        producer.close()


def list_v0(c: RawClient, topic: str, timestamp: int, max_num: int, replica: int = -1) -> object:
    P = LO.ListOffsetsTopic.ListOffsetsPartition
    req = LO(
        replica_id=replica,
        topics=[
            LO.ListOffsetsTopic(
                name=topic,
                partitions=[P(partition_index=0, timestamp=timestamp, max_num_offsets=max_num)],
            )
        ],
    )
    return c.request(req, 0).topics[0].partitions[0]


def commit_request(group: str, offset: int, commit_timestamp: int = -1) -> object:
    T = OC.OffsetCommitRequestTopic
    return OC(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[
            T(
                name="t",
                partitions=[
                    T.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        commit_timestamp=commit_timestamp,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )


def fetch_request(group: str) -> object:
    return OF(group_id=group, topics=[OF.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])


def committed(c: RawClient, group: str, version: int = 1) -> tuple[int, int]:
    part = c.request(fetch_request(group), version).topics[0].partitions[0]
    return part.error_code, part.committed_offset


# -- advertised versions and raw old meanings -------------------------------------------------


def test_api_versions_advertise_kafka_39_floors(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = c.request(protocol.ApiVersionsRequest(), 0)
    floors = {k.api_key: k.min_version for k in resp.api_keys}
    assert {k: floors.get(k) for k in KAFKA_39_FLOORS} == KAFKA_39_FLOORS


def test_metadata_v0_empty_list_means_every_topic(broker: Broker) -> None:
    broker.create_topic("meta-other")
    with RawClient(broker.bootstrap) as c:
        v0 = c.request(protocol.MetadataRequest(topics=[]), 0)
        v1 = c.request(protocol.MetadataRequest(topics=[]), 1)
    assert {"t", "meta-other"} <= {t.name for t in v0.topics}
    assert v1.topics == []  # from v1 an empty list is no topic (null is all)


def test_list_offsets_v0_answers_segment_starts(broker: Broker) -> None:
    topic = broker.create_topic("lo-v0", config={"segment.bytes": 1024})
    produce(broker, topic, 30)  # ~170-byte batches: six to a segment
    bases = broker.call(lambda s: [seg.base_offset for seg in s.topics.get(topic, 0).log.segments])
    assert len(bases) >= 3
    with RawClient(broker.bootstrap) as c:
        latest = list_v0(c, topic, -1, 100)
        assert latest.error_code == ErrorCode.NONE
        # the log end offset, then every segment's base offset, newest first
        assert latest.old_style_offsets == [30, *reversed(bases)]
        assert list_v0(c, topic, -1, 2).old_style_offsets == [30, bases[-1]]
        assert list_v0(c, topic, -2, 5).old_style_offsets == [0]
        # a time before every segment was written: nothing; a time in the future: from the end
        assert list_v0(c, topic, 1, 5).old_style_offsets == []
        future = int(time.time() * 1000) + DAY_MS
        assert list_v0(c, topic, future, 1).old_style_offsets == [30]
        # v0 knows only -1 and -2 of the negative timestamps
        assert list_v0(c, topic, -3, 1).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert list_v0(c, "no-such-topic", -1, 1).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )


def test_offset_commit_v1_commit_timestamp_ages_the_offset(broker: Broker) -> None:
    """A v1 commit stamped eight days ago is past the seven-day retention: the next expiry
    check removes it, while the same commit stamped now (-1) stays."""
    old = int(time.time() * 1000) - 8 * DAY_MS
    with RawClient(broker.bootstrap) as c:
        find = protocol.FindCoordinatorRequest(key="old-ts", key_type=0)
        wait_for(lambda: c.request(find, 0).error_code == ErrorCode.NONE, "the coordinator")
        for group, stamp in (("old-ts", old), ("now-ts", -1)):
            resp = c.request(commit_request(group, 11, stamp), 1)
            assert resp.topics[0].partitions[0].error_code == ErrorCode.NONE
        wait_for(lambda: committed(c, "old-ts") == (ErrorCode.NONE, -1), "the offset to expire")
        assert committed(c, "now-ts") == (ErrorCode.NONE, 11)


def test_offset_commit_and_fetch_v0_without_zookeeper_are_unsupported(broker: Broker) -> None:
    """As a Kafka 3.9 KRaft broker: v0 offsets live in ZooKeeper, which this broker has not."""
    with RawClient(broker.bootstrap) as c:
        resp = c.request(commit_request("zk-less", 5), 0)
        assert resp.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        assert committed(c, "zk-less", 0) == (ErrorCode.UNSUPPORTED_VERSION, -1)


def test_offset_commit_and_fetch_v0_use_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> None:
    """As a Kafka 3.9 ZooKeeper-mode broker: v0 offsets are /consumers/<group>/offsets/<topic>/
    <partition> nodes (what ZooKeeper-era tools read), apart from the coordinator's offsets."""
    with ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper"))) as zk:
        config = {
            "zookeeper.connect": zk.connect("/old-versions"),
            "node.id": "0",
            "offsets.topic.replication.factor": "1",
        }
        with Broker(topics={"t": 1}, config=config) as b, RawClient(b.bootstrap) as c:
            resp = c.request(commit_request("zk-group", 42), 0)
            assert resp.topics[0].partitions[0].error_code == ErrorCode.NONE
            node = b.call(lambda s: s.store.zk.get("/consumers/zk-group/offsets/t/0")[0])
            assert node == b"42"
            assert committed(c, "zk-group", 0) == (ErrorCode.NONE, 42)
            assert committed(c, "zk-other", 0) == (ErrorCode.NONE, -1)
            find = protocol.FindCoordinatorRequest(key="zk-group", key_type=0)
            wait_for(lambda: c.request(find, 0).error_code == ErrorCode.NONE, "the coordinator")
            assert committed(c, "zk-group", 1) == (ErrorCode.NONE, -1)  # not the group's


# -- kafka-python speaking old versions --------------------------------------------------------


@pytest.mark.parametrize("api_version", OLD_CLIENTS, ids=lambda v: ".".join(map(str, v)))
def test_kafka_python_old_group_offsets_and_admin(
    broker: Broker, api_version: tuple[int, ...]
) -> None:
    name = "-".join(map(str, api_version))
    topic = broker.create_topic(f"old-{name}", partitions=2)
    produce(broker, topic, 5)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    def member() -> KafkaConsumer:
        return KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=f"group-{name}",
            api_version=api_version,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )

    def read(consumer: KafkaConsumer, count: int) -> list[bytes]:
        got = poll_until(consumer, lambda got: len(got) >= count, WAIT_S, max_records=count)
        assert len(got) == count, f"read {got}, assigned {consumer.assignment()}"
        return [r.value for r in got]

    consumer = member()
    try:
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 5, tp1: 0}
        # the group's only member (JoinGroup/SyncGroup of that version) gets both partitions
        assert read(consumer, 3) == [f"v{i:03d}".encode() * 20 for i in range(3)]
        assert consumer.assignment() == {tp0, tp1}
        consumer.commit()
        assert consumer.committed(tp0) == 3
    finally:
        consumer.close()
    # the next member of the group goes on from the commit
    again = member()
    try:
        assert read(again, 2) == [f"v{i:03d}".encode() * 20 for i in (3, 4)]
    finally:
        again.close()
    if api_version < (0, 10, 1):
        return  # CreateTopics came with Kafka 0.10.1
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=api_version)
    try:
        created = admin.create_topics([NewTopic(f"made-{name}", 3, 1)])
        assert [t["error_code"] for t in created["topics"]] == [0]
        assert admin.describe_topics([f"made-{name}"])[0]["partitions"].__len__() == 3
        deleted = admin.delete_topics([f"made-{name}"])
        assert [t["error_code"] for t in deleted["topics"]] == [0]
        wait_for(lambda: f"made-{name}" not in admin.list_topics(), "the topic to go")
    finally:
        admin.close()


def test_librdkafka_with_0_9_0_fallback_consumes_in_a_group(broker: Broker) -> None:
    """confluent-kafka with api.version.request=false and broker.version.fallback=0.9.0 (the
    only fallback below 0.10 it honours: 0.10+ asks ApiVersions): Metadata v0, ListOffsets v0,
    JoinGroup v0, OffsetCommit v2 / OffsetFetch v1, Fetch v1."""
    topic = broker.create_topic("rdkafka-0.9", partitions=2)
    produce(broker, topic, 5)
    config = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "rdkafka-0.9",
        "api.version.request": False,
        "broker.version.fallback": "0.9.0",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,  # not the deprecation warnings of those two settings
    }

    def read(consumer: Consumer, count: int) -> list[bytes]:
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {got}"
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
                consumer.commit(message=msg, asynchronous=False)
        return got

    first = Consumer(config)
    try:
        assert first.get_watermark_offsets(CTopicPartition(topic, 0), timeout=WAIT_S) == (0, 5)
        first.subscribe([topic])
        assert read(first, 3) == [f"v{i:03d}".encode() * 20 for i in range(3)]
        (done,) = first.committed([CTopicPartition(topic, 0)], timeout=WAIT_S)
        assert done.offset == 3
    finally:
        first.close()
    second = Consumer(config)
    try:
        second.subscribe([topic])
        assert read(second, 2) == [f"v{i:03d}".encode() * 20 for i in (3, 4)]
    finally:
        second.close()


def test_kafka_python_082_commits_without_group_management(broker: Broker) -> None:
    """Kafka 0.8.2's Kafka-stored offsets (OffsetCommit/OffsetFetch v1, no JoinGroup); 0.8.1's
    ZooKeeper ones (v0) are refused as a KRaft broker refuses them."""
    tp = TopicPartition("t", 1)
    for api_version in ((0, 8, 2), (0, 8, 1)):
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id="group-0.8",
            api_version=api_version,
            enable_auto_commit=False,
        )
        try:
            consumer.assign([tp])
            if api_version == (0, 8, 2):
                consumer.commit({tp: OffsetAndMetadata(9, "", -1)})
                assert consumer.committed(tp) == 9
            else:
                with pytest.raises(UnsupportedVersionError):
                    consumer.commit({tp: OffsetAndMetadata(10, "", -1)})
        finally:
            consumer.close()


# -- message.format.version --------------------------------------------------------------------


def test_message_format_version_is_accepted_described_and_warned(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """Through kafka-python speaking 0.11 (CreateTopics v2, DescribeConfigs / AlterConfigs v0),
    as a tool that still sets the message format would."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(0, 11))
    try:
        with caplog.at_level(logging.WARNING, logger="odradek.broker.partitions.topics"):
            old = {"message.format.version": "0.10.0"}
            admin.create_topics([NewTopic("mfv", 1, 1, topic_configs=old)])
        assert "message.format.version with value `0.10.0` is ignored for `mfv`" in caplog.text

        def described() -> dict:
            return admin.describe_configs([ConfigResource("TOPIC", "mfv")])["topic"]["mfv"]

        assert described()["message.format.version"]["value"] == "0.10.0"
        new = {"message.format.version": "2.8-IV1"}
        assert admin.alter_configs([ConfigResource("TOPIC", "mfv", new)])["topic"]["mfv"] == "OK"
        assert described()["message.format.version"]["value"] == "2.8-IV1"
        bad = {"message.format.version": "0.10"}  # 0.x versions have three parts
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("mfv-bad", 1, 1, topic_configs=bad)], raise_errors=True)
    finally:
        admin.close()
    # records still go in format v2: headers are kept
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        producer.send("mfv", b"x", headers=[("h", b"1")]).get(WAIT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        "mfv",
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(WAIT_S * 1000),
    )
    try:
        record = next(iter(consumer))
        assert (record.value, record.headers) == (b"x", [("h", b"1")])
    finally:
        consumer.close()
    # a restart loads the topic with its setting, warning again only for a format below v2
    broker.call(lambda s: s.topics.set_configs("mfv", {"message.format.version": "0.9.0"}))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="odradek.broker.partitions.topics"):
        broker.restart()
    assert "message.format.version with value `0.9.0` is ignored for `mfv`" in caplog.text


def test_broker_log_message_format_version(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker default: a valid version string, warned about below v2, the topics' default."""
    monkeypatch.setattr(broker_config, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="odradek.broker.config"):
        cfg = BrokerConfig({"log.message.format.version": "0.10.2"})
        BrokerConfig({"log.message.format.version": "2.8"})
    assert [r.getMessage() for r in caplog.records] == [
        "Broker configuration log.message.format.version with value 0.10.2 is ignored because "
        "the inter-broker protocol version `3.9-IV0` is greater or equal than 3.0. This "
        "configuration is deprecated and it will be removed in Apache Kafka 4.0."
    ]
    assert cfg.topic_default("message.format.version") == ("0.10.2", "STATIC_BROKER_CONFIG")
    with pytest.raises(ConfigError):
        BrokerConfig({"log.message.format.version": "4.0"})  # not a Kafka 3.9 version
