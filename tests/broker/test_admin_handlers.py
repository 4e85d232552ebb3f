"""Admin APIs driven by real clients over TCP: kafka-python's KafkaAdminClient and confluent-kafka's
AdminClient against an in-process broker (CreateTopics, DeleteTopics, CreatePartitions,
DeleteRecords, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster,
DescribeTopicPartitions)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator

import kafka.errors as kerrors
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from odradek.broker.server import Broker

TIMEOUT = 15


@pytest.fixture
def kadmin(inproc_broker: Broker) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=inproc_broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


@pytest.fixture
def cadmin(inproc_broker: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": inproc_broker.bootstrap})


def send(admin: KafkaAdminClient, request):
    """One raw request through kafka-python's connection (version negotiated as usual)."""
    return admin._manager.run(admin._manager.send, request)


def cresult(future):
    return future.result(timeout=TIMEOUT)


def ccode(exc_info: pytest.ExceptionInfo) -> int:
    return exc_info.value.args[0].code()


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    for i in range(count):
        producer.send(topic, value=f"m{i}".encode(), partition=partition)
    producer.flush(TIMEOUT)
    producer.close()


# -- CreateTopics -------------------------------------------------------------------------------


def test_create_topic_answers_partitions_configs_and_id(kadmin: KafkaAdminClient) -> None:
    result = kadmin.create_topics(
        {
            "orders": {
                "num_partitions": 3,
                "replication_factor": 1,
                "configs": {"retention.ms": "1000", "cleanup.policy": "compact"},
            }
        }
    )
    (topic,) = result["topics"]
    assert topic["error_code"] == 0 and topic["error_message"] is None
    assert topic["num_partitions"] == 3 and topic["replication_factor"] == 1
    assert uuid.UUID(str(topic["topic_id"])) != uuid.UUID(int=0)
    configs = topic["configs"]
    assert configs["retention.ms"]["value"] == "1000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    (described,) = kadmin.describe_topics(["orders"])
    assert len(described["partitions"]) == 3
    assert str(described["topic_id"]) == str(topic["topic_id"])


MakeBroker = Callable[[dict[str, str]], Broker]


@pytest.fixture
def admin_for(make_broker: MakeBroker) -> Iterator[Callable[[dict[str, str]], KafkaAdminClient]]:
    """A KafkaAdminClient on a broker started with extra config."""
    admins: list[KafkaAdminClient] = []

    def make(config: dict[str, str]) -> KafkaAdminClient:
        admins.append(KafkaAdminClient(bootstrap_servers=make_broker(config).bootstrap))
        return admins[-1]

    yield make
    for admin in admins:
        admin.close()


def test_create_topic_with_broker_defaults(admin_for) -> None:
    admin = admin_for({"num.partitions": "4", "log.retention.hours": "2"})
    (topic,) = admin.create_topics(["defaults"])["topics"]
    assert topic["num_partitions"] == 4 and topic["replication_factor"] == 1
    assert topic["configs"]["retention.ms"]["value"] == str(2 * 3600 * 1000)
    assert topic["configs"]["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"


def test_create_validate_only_creates_nothing(
    kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    (topic,) = kadmin.create_topics({"dry": {"num_partitions": 2}}, validate_only=True)["topics"]
    assert topic["error_code"] == 0 and topic["num_partitions"] == 2
    futures = cadmin.create_topics(
        [NewTopic("dry2", 5, 1, config={"retention.ms": "60000"})], validate_only=True
    )
    assert cresult(futures["dry2"]) is None
    assert "dry" not in kadmin.list_topics() and "dry2" not in kadmin.list_topics()
    bad = cadmin.create_topics(
        [NewTopic("dry3", 1, 1, config={"retention.ms": "soon"})], validate_only=True
    )
    with pytest.raises(KafkaException) as exc:
        cresult(bad["dry3"])
    assert ccode(exc) == KafkaError.INVALID_CONFIG


def test_confluent_create_topic_with_configs(cadmin: AdminClient, kadmin: KafkaAdminClient) -> None:
    futures = cadmin.create_topics([NewTopic("events", 2, 1, config={"max.message.bytes": "2000"})])
    assert cresult(futures["events"]) is None
    again = cadmin.create_topics([NewTopic("events", 2, 1)])
    with pytest.raises(KafkaException) as exc:
        cresult(again["events"])
    assert ccode(exc) == KafkaError.TOPIC_ALREADY_EXISTS
    described = kadmin.describe_configs([KConfigResource("TOPIC", "events")])
    assert described["topic"]["events"]["max.message.bytes"]["value"] == "2000"


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ({"bad name!": {}}, kerrors.InvalidTopicError.errno),
        ({"zero": {"num_partitions": 0}}, kerrors.InvalidPartitionsError.errno),
        (
            {"rf3": {"num_partitions": 1, "replication_factor": 3}},
            kerrors.InvalidReplicationFactorError.errno,
        ),
        (
            {"unknown-config": {"configs": {"no.such.key": "1"}}},
            kerrors.InvalidConfigurationError.errno,
        ),
        (
            {"bad-value": {"configs": {"retention.ms": "forever"}}},
            kerrors.InvalidConfigurationError.errno,
        ),
        (
            {"null-value": {"configs": {"retention.ms": None}}},
            kerrors.InvalidConfigurationError.errno,
        ),
        (
            {"bad-choice": {"configs": {"cleanup.policy": "shred"}}},
            kerrors.InvalidConfigurationError.errno,
        ),
    ],
)
def test_create_topic_errors(kadmin: KafkaAdminClient, spec: dict, code: int) -> None:
    (topic,) = kadmin.create_topics(spec, raise_errors=False)["topics"]
    assert topic["error_code"] == code
    assert topic["error_message"]
    assert topic["name"] not in kadmin.list_topics()


def test_create_existing_duplicate_and_colliding_topics(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics(["a.b"])
    with pytest.raises(kerrors.TopicAlreadyExistsError):
        kadmin.create_topics(["a.b"])
    (collide,) = kadmin.create_topics(["a_b"], raise_errors=False)["topics"]
    assert collide["error_code"] == kerrors.InvalidTopicError.errno
    assert "collides" in collide["error_message"]
    (dupe,) = kadmin.create_topics(["twice", "twice"], raise_errors=False)["topics"]
    assert dupe["error_code"] == kerrors.InvalidRequestError.errno
    assert "twice" not in kadmin.list_topics()


def test_create_topic_with_manual_assignment(kadmin: KafkaAdminClient) -> None:
    (ok,) = kadmin.create_topics({"manual": {"assignments": {0: [0], 1: [0]}}})["topics"]
    assert ok["error_code"] == 0 and ok["num_partitions"] == 2
    cases = [
        ({"assignments": {0: [7]}}, kerrors.InvalidReplicationAssignmentError.errno),
        ({"assignments": {0: [0, 0]}}, kerrors.InvalidReplicationAssignmentError.errno),
        ({"assignments": {1: [0]}}, kerrors.InvalidReplicationAssignmentError.errno),
        ({"assignments": {0: []}}, kerrors.InvalidReplicationAssignmentError.errno),
        ({"num_partitions": 1, "assignments": {0: [0]}}, kerrors.InvalidRequestError.errno),
        ({"replication_factor": 1, "assignments": {0: [0]}}, kerrors.InvalidRequestError.errno),
    ]
    for i, (spec, code) in enumerate(cases):
        (topic,) = kadmin.create_topics({f"m{i}": spec}, raise_errors=False)["topics"]
        assert topic["error_code"] == code, (spec, topic)


# -- DeleteTopics -------------------------------------------------------------------------------


def test_delete_topics_by_name_and_id(kadmin: KafkaAdminClient, cadmin: AdminClient) -> None:
    created = kadmin.create_topics(["gone1", "gone2", "gone3"])["topics"]
    ids = {t["name"]: uuid.UUID(str(t["topic_id"])) for t in created}
    result = kadmin.delete_topics(["gone1", ids["gone2"]])
    assert sorted(t["error_code"] for t in result["topics"]) == [0, 0]
    assert cresult(cadmin.delete_topics(["gone3"])["gone3"]) is None
    assert not {"gone1", "gone2", "gone3"} & set(kadmin.list_topics())
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kadmin.delete_topics(["gone1"])
    (unknown_id,) = kadmin.delete_topics([uuid.uuid4()], raise_errors=False)["topics"]
    assert unknown_id["error_code"] == kerrors.UnknownTopicIdError.errno
    with pytest.raises(KafkaException) as exc:
        cresult(cadmin.delete_topics(["never-was"])["never-was"])
    assert ccode(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # a deleted topic's name can be used again, from offset zero
    kadmin.create_topics(["gone1"])
    produce(kadmin_bootstrap(kadmin), "gone1", 2)


def kadmin_bootstrap(admin: KafkaAdminClient) -> str:
    return admin.config["bootstrap_servers"]


def test_delete_topics_request_checks(kadmin: KafkaAdminClient) -> None:
    (created,) = kadmin.create_topics(["dt"])["topics"]
    topic_id = uuid.UUID(str(created["topic_id"]))
    T = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(
        topics=[
            T(name="dup"),
            T(name="dup"),
            T(name="dt", topic_id=topic_id),
            T(name=None),
            T(topic_id=topic_id),
            T(name="dt"),
        ],
        timeout_ms=1000,
    )
    answers = [(r.name, r.error_code, r.error_message) for r in send(kadmin, request).responses]
    invalid = kerrors.InvalidRequestError.errno
    assert sorted(answers, key=str) == sorted(
        [
            ("dup", invalid, "Duplicate topic name."),
            ("dt", invalid, "You may not specify both topic name and topic id."),
            (None, invalid, "Neither topic name nor id were specified."),
            ("dt", invalid, "The provided topic name maps to an ID that was already supplied."),
        ],
        key=str,
    )
    assert "dt" in kadmin.list_topics()


def test_delete_topics_disabled(admin_for) -> None:
    admin = admin_for({"delete.topic.enable": "false"})
    admin.create_topics(["kept"])
    (topic,) = admin.delete_topics(["kept"], raise_errors=False)["topics"]
    assert topic["error_code"] == kerrors.TopicDeletionDisabledError.errno
    assert "kept" in admin.list_topics()


# -- CreatePartitions ---------------------------------------------------------------------------


def test_create_partitions(kadmin: KafkaAdminClient, cadmin: AdminClient) -> None:
    kadmin.create_topics({"grow": {"num_partitions": 1}})
    kadmin.create_partitions({"grow": 3}, validate_only=True)
    assert len(kadmin.describe_topics(["grow"])[0]["partitions"]) == 1
    kadmin.create_partitions({"grow": 3})
    assert len(kadmin.describe_topics(["grow"])[0]["partitions"]) == 3
    assert cresult(cadmin.create_partitions([NewPartitions("grow", 5)])["grow"]) is None
    assert len(kadmin.describe_topics(["grow"])[0]["partitions"]) == 5
    produce(kadmin_bootstrap(kadmin), "grow", 1, partition=4)

    response = kadmin.create_partitions({"grow": 2}, raise_errors=False)
    assert response.results[0].error_code == kerrors.InvalidPartitionsError.errno
    assert "higher than the requested 2" in response.results[0].error_message
    response = kadmin.create_partitions({"grow": 5}, raise_errors=False)
    assert response.results[0].error_message == "Topic already has 5 partition(s)."
    response = kadmin.create_partitions({"nope": 2}, raise_errors=False)
    assert response.results[0].error_code == kerrors.UnknownTopicOrPartitionError.errno
    response = kadmin.create_partitions(
        {"grow": {"count": 7, "assignments": [[0]]}}, raise_errors=False
    )
    assert response.results[0].error_code == kerrors.InvalidReplicationAssignmentError.errno
    kadmin.create_partitions({"grow": {"count": 6, "assignments": [[0]]}})
    assert len(kadmin.describe_topics(["grow"])[0]["partitions"]) == 6


# -- DeleteRecords ------------------------------------------------------------------------------


def earliest_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


def first_consumed_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=TIMEOUT * 1000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        return next(iter(consumer)).offset
    finally:
        consumer.close()


def test_delete_records(
    inproc_broker: Broker, kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    bootstrap = inproc_broker.bootstrap
    kadmin.create_topics({"trim": {"num_partitions": 1}})
    produce(bootstrap, "trim", 10)
    tp = TopicPartition("trim", 0)
    result = kadmin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4 and result[tp]["error_code"] == 0
    assert earliest_offset(bootstrap, "trim") == 4
    assert first_consumed_offset(bootstrap, "trim") == 4
    # an offset below the log start changes nothing
    assert kadmin.delete_records({tp: 2})[tp]["low_watermark"] == 4
    with pytest.raises(kerrors.OffsetOutOfRangeError):
        kadmin.delete_records({tp: 11})
    futures = cadmin.delete_records([CTopicPartition("trim", 0, 7)])
    (future,) = futures.values()
    assert cresult(future).low_watermark == 7
    offsets = cadmin.list_offsets({CTopicPartition("trim", 0): OffsetSpec.earliest()})
    assert cresult(next(iter(offsets.values()))).offset == 7
    # -1 means the high watermark: the partition is emptied
    assert kadmin.delete_records({tp: -1})[tp]["low_watermark"] == 10
    assert earliest_offset(bootstrap, "trim") == 10
    produce(bootstrap, "trim", 1)
    assert first_consumed_offset(bootstrap, "trim") == 10


def test_delete_records_errors(inproc_broker: Broker, kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics({"compacted": {"configs": {"cleanup.policy": "compact"}}})
    produce(inproc_broker.bootstrap, "compacted", 3)
    with pytest.raises(kerrors.PolicyViolationError):
        kadmin.delete_records({TopicPartition("compacted", 0): 1}, partition_leader_id=0)
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kadmin.delete_records({TopicPartition("compacted", 5): 1}, partition_leader_id=0)
    kadmin.create_topics(["plain"])
    with pytest.raises(kerrors.OffsetOutOfRangeError):
        kadmin.delete_records({TopicPartition("plain", 0): -5}, partition_leader_id=0)


# -- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs -----------------------------------


def test_describe_configs_sources_synonyms_and_types(admin_for, tmp_path) -> None:
    admin = admin_for({"log.retention.hours": "5", "log.segment.bytes": "2000000"})
    admin.create_topics({"t": {"configs": {"cleanup.policy": "compact,delete"}}})
    described = admin.describe_configs(
        [KConfigResource("TOPIC", "t")], include_synonyms=True, config_filter="all"
    )
    configs = described["topic"]["t"]
    assert set(configs) >= {"retention.ms", "cleanup.policy", "segment.bytes"}
    policy = configs["cleanup.policy"]
    assert policy["value"] == "compact,delete"
    assert policy["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert policy["config_type"] == "LIST" and policy["read_only"] is False
    retention = configs["retention.ms"]
    assert retention["value"] == str(5 * 3600 * 1000)
    assert retention["config_source"] == "STATIC_BROKER_CONFIG"
    assert retention["config_type"] == "LONG"
    # Kafka lists a topic key's broker synonyms from its primary key (log.retention.ms) on:
    # with only log.retention.hours set, none (ConfigHelper.configSynonyms)
    assert retention["synonyms"] == []
    assert configs["segment.bytes"]["value"] == "2000000"
    assert configs["preallocate"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["preallocate"]["config_type"] == "BOOLEAN"
    assert configs["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"
    modified = admin.describe_configs([KConfigResource("TOPIC", "t")])["topic"]["t"]
    assert set(modified) == {"cleanup.policy"}  # kafka-python: only topic overrides
    only = admin.describe_configs(
        [KConfigResource("TOPIC", "t", {"retention.ms": None})], config_filter="all"
    )["topic"]["t"]
    assert set(only) == {"retention.ms"}
    brokers = admin.describe_configs([KConfigResource("BROKER", "0")], config_filter="all")[
        "broker"
    ]["0"]
    assert brokers["log.retention.hours"]["value"] == "5"
    assert brokers["log.retention.hours"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert brokers["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert brokers["num.partitions"]["read_only"] is True
    assert brokers["log.dirs"]["value"] == str(tmp_path / "broker-0")


def test_describe_configs_documentation_and_errors(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics(["docs"])
    request = DescribeConfigsRequest(
        resources=[
            (2, "docs", ["retention.ms"]),
            (2, "missing", None),
            (2, "bad name!", None),
            (4, "7", None),
            (4, "zero", None),
            (4, "", None),
            (32, "group", None),
            (32, "", None),
        ],
        include_synonyms=False,
        include_documentation=True,
    )
    response = send(kadmin, request)
    docs, missing, bad, other_broker, not_int, cluster_default, group, no_group = response.results
    (entry,) = docs.configs
    assert entry.name == "retention.ms" and entry.documentation and entry.config_type == 5
    assert missing.error_code == kerrors.UnknownTopicOrPartitionError.errno
    assert bad.error_code == kerrors.InvalidTopicError.errno
    assert other_broker.error_code == kerrors.InvalidRequestError.errno
    assert not_int.error_code == kerrors.InvalidRequestError.errno
    # the cluster-wide dynamic defaults: min.insync.replicas, as a Kafka 4.1+ cluster has it
    assert cluster_default.error_code == 0
    assert [(c.name, c.value) for c in cluster_default.configs] == [("min.insync.replicas", "1")]
    # GROUP (32): Kafka 4.1's per-group configs, any group name but the empty one
    assert group.error_code == 0
    assert {c.name: c.value for c in group.configs}["share.auto.offset.reset"] == "latest"
    assert no_group.error_code == kerrors.InvalidRequestError.errno


def test_confluent_describe_configs(cadmin: AdminClient) -> None:
    cresult(cadmin.create_topics([NewTopic("c", 1, 1, config={"retention.bytes": "5000"})])["c"])
    (future,) = cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, "c")]).values()
    entries = cresult(future)
    assert entries["retention.bytes"].value == "5000"
    assert entries["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["retention.ms"].is_default
    (future,) = cadmin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert cresult(future)["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    (future,) = cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, "nope")]).values()
    with pytest.raises(KafkaException) as exc:
        cresult(future)
    assert ccode(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART


def topic_overrides(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    configs = admin.describe_configs([KConfigResource("TOPIC", topic)])["topic"][topic]
    return {k: v["value"] for k, v in configs.items()}


def test_alter_configs_replaces_the_override_set(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics({"alt": {"configs": {"retention.ms": "1000", "segment.ms": "60000"}}})
    result = kadmin.alter_configs(
        [KConfigResource("TOPIC", "alt", {"retention.ms": "2000"})],
        validate_only=True,
        incremental=False,
    )
    assert result["topic"]["alt"] == "OK"
    assert topic_overrides(kadmin, "alt") == {"retention.ms": "1000", "segment.ms": "60000"}
    # raw AlterConfigs: keys not named are removed (kafka-python would re-send them itself)
    request = kadmin._alter_configs_request(
        [KConfigResource("TOPIC", "alt", {"max.message.bytes": "3000"})], incremental=False
    )
    (answer,) = send(kadmin, request).responses
    assert answer.error_code == 0
    assert topic_overrides(kadmin, "alt") == {"max.message.bytes": "3000"}
    result = kadmin.alter_configs(
        [KConfigResource("TOPIC", "alt", {"retention.ms": "x"})], incremental=False
    )
    assert result["topic"]["alt"].startswith("[Error 40] InvalidConfigurationError")
    result = kadmin.alter_configs(
        [KConfigResource("TOPIC", "ghost", {"retention.ms": "1"})],
        incremental=False,
        raise_on_unknown=False,
    )
    assert "UnknownTopicOrPartitionError" in result["topic"]["ghost"]


def test_incremental_alter_configs(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics(["inc"])
    res = KConfigResource(
        "TOPIC", "inc", {"retention.ms": "1234", "cleanup.policy": ("APPEND", "compact")}
    )
    assert kadmin.alter_configs([res])["topic"]["inc"] == "OK"
    assert topic_overrides(kadmin, "inc") == {
        "retention.ms": "1234",
        "cleanup.policy": "delete,compact",
    }
    res = KConfigResource(
        "TOPIC", "inc", {"retention.ms": ("DELETE", None), "cleanup.policy": ("SUBTRACT", "delete")}
    )
    assert kadmin.alter_configs([res])["topic"]["inc"] == "OK"
    assert topic_overrides(kadmin, "inc") == {"cleanup.policy": "compact"}
    res = KConfigResource("TOPIC", "inc", {"segment.ms": "1000"})
    assert kadmin.alter_configs([res], validate_only=True)["topic"]["inc"] == "OK"
    assert topic_overrides(kadmin, "inc") == {"cleanup.policy": "compact"}
    res = KConfigResource("TOPIC", "inc", {"retention.ms": ("APPEND", "5")})
    assert "InvalidConfigurationError" in kadmin.alter_configs([res])["topic"]["inc"]
    res = KConfigResource("TOPIC", "inc", {"no.such": "1"})
    answer = kadmin.alter_configs([res], raise_on_unknown=False)["topic"]["inc"]
    assert "InvalidConfigurationError" in answer


def test_alter_configs_request_checks(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics(["chk"])
    Incremental = IncrementalAlterConfigsRequest
    request = Incremental(
        resources=[
            (2, "chk", [("retention.ms", 0, "1"), ("retention.ms", 0, "2")]),
            (2, "chk", [("retention.ms", 1, None)]),
            (2, "chk2", [("retention.ms", 0, None)]),
            (2, "chk3", [("retention.ms", 9, "1")]),
            (4, "0", [("log.retention.ms", 0, "1")]),
            (4, "", []),
            (4, "3", [("log.retention.ms", 0, "1")]),
            (8, "0", [("kafka", 0, "DEBUG")]),
        ],
        validate_only=False,
    )
    answers = [(r.error_code, r.error_message) for r in send(kadmin, request).responses]
    invalid = kerrors.InvalidRequestError.errno
    assert answers[0] == (invalid, "Each resource must appear at most once.")
    assert answers[1] == (invalid, "Each resource must appear at most once.")
    assert answers[2] == (invalid, "Null value not supported for : retention.ms")
    assert answers[3] == (invalid, "Unknown operations type 9")
    assert answers[4] == (0, None)  # log.retention.ms is a dynamic broker config
    assert answers[5] == (0, None)
    assert answers[6][0] == invalid and "Unexpected broker id" in answers[6][1]
    assert answers[7][0] == invalid
    legacy = AlterConfigsRequest(
        resources=[
            (2, "chk", [("retention.ms", "1"), ("retention.ms", "2")]),
            (4, "0", [("num.partitions", "3")]),
        ],
        validate_only=True,
    )
    answers = [(r.error_code, r.error_message) for r in send(kadmin, legacy).responses]
    assert answers[0] == (invalid, "Error due to duplicate config keys")
    assert answers[1][0] == invalid


def test_confluent_incremental_alter_and_broker_refusal(cadmin: AdminClient) -> None:
    cresult(cadmin.create_topics([NewTopic("ci", 1, 1)])["ci"])
    resource = ConfigResource(
        ResourceType.TOPIC,
        "ci",
        incremental_configs=[
            ConfigEntry("retention.ms", "999", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = cadmin.incremental_alter_configs([resource]).values()
    cresult(future)
    (future,) = cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, "ci")]).values()
    assert cresult(future)["retention.ms"].value == "999"
    broker = ConfigResource(
        ResourceType.BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = cadmin.incremental_alter_configs([broker]).values()
    with pytest.raises(KafkaException) as exc:
        cresult(future)
    assert ccode(exc) == KafkaError.INVALID_REQUEST
    assert "dynamically" in exc.value.args[0].str()


# -- DescribeCluster / DescribeTopicPartitions --------------------------------------------------


def test_describe_cluster(
    inproc_broker: Broker, kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    cluster = kadmin.describe_cluster()
    assert cluster["cluster_id"] == inproc_broker.cluster_id
    assert cluster["controller_id"] == 0
    (node,) = cluster["brokers"]
    assert (node["broker_id"], node["port"]) == (0, inproc_broker.bound[0].port)
    assert "DESCRIBE" in cluster["authorized_operations"]
    # librdkafka describes the cluster with Metadata v10, not DescribeCluster
    result = cresult(
        cadmin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT)
    )
    assert result.cluster_id == inproc_broker.cluster_id
    assert [n.id for n in result.nodes] == [0]
    assert result.controller.id == 0


def test_describe_cluster_endpoint_types(kadmin: KafkaAdminClient) -> None:
    controller = send(
        kadmin, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2)
    )
    assert controller.error_code == kerrors.MismatchedEndpointTypeError.errno
    assert controller.brokers == []
    unknown = send(
        kadmin, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=9)
    )
    assert unknown.error_code == kerrors.UnsupportedEndpointTypeError.errno
    plain = send(kadmin, DescribeClusterRequest(include_cluster_authorized_operations=False))
    assert plain.error_code == 0 and plain.authorized_operations is None


def test_describe_topic_partitions_pages(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics({"pa": {"num_partitions": 5}, "pb": {"num_partitions": 2}})
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        page = kadmin.describe_topic_partitions(
            ["pb", "pa"], response_partition_limit=3, cursor=cursor
        )
        pages += 1
        for topic in page["topics"]:
            assert topic["error_code"] == 0 and not topic["is_internal"]
            for p in topic["partitions"]:
                assert p["leader_id"] == 0 and p["replica_nodes"] == [0]
                assert p["isr_nodes"] == [0] and not p["eligible_leader_replicas"]
                seen.append((topic["name"], p["partition_index"]))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [("pa", i) for i in range(5)] + [("pb", 0), ("pb", 1)]
    assert pages == 3
    answer = kadmin.describe_topic_partitions(["pa", "missing", "bad name!"])
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    assert codes == {
        "pa": 0,
        "missing": kerrors.UnknownTopicOrPartitionError.errno,
        "bad name!": kerrors.InvalidTopicError.errno,
    }
    everything = kadmin.describe_topic_partitions([])
    assert [t["name"] for t in everything["topics"]] == ["pa", "pb"]
    refused = kadmin.describe_topic_partitions(
        ["pa"], cursor={"topic_name": "pb", "partition_index": 0}
    )
    assert [t["error_code"] for t in refused["topics"]] == [kerrors.InvalidRequestError.errno]


# -- aiokafka: the non-flexible versions ---------------------------------------------------------


def test_aiokafka_admin_round_trip(inproc_broker: Broker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.admin import NewPartitions as ANewPartitions
    from aiokafka.admin import NewTopic as ANewTopic
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType
    from aiokafka.structs import TopicPartition as ATopicPartition

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=inproc_broker.bootstrap)
        await admin.start()
        try:
            created = await admin.create_topics(
                [ANewTopic("aio", 1, 1, topic_configs={"retention.ms": "7000"})]
            )
            assert [t[1] for t in created.topic_errors] == [0]
            (described,) = await admin.describe_configs(
                [AConfigResource(ConfigResourceType.TOPIC, "aio", {"retention.ms": None})]
            )
            (resource,) = described.resources
            assert resource[0] == 0 and resource[4][0][:2] == ("retention.ms", "7000")
            altered = await admin.alter_configs(
                [AConfigResource(ConfigResourceType.TOPIC, "aio", {"retention.ms": "8000"})]
            )
            assert [r[0] for resp in altered for r in resp.resources] == [0]
            grown = await admin.create_partitions({"aio": ANewPartitions(2)})
            assert [r[1] for r in grown.topic_errors] == [0]
            produce(inproc_broker.bootstrap, "aio", 3)
            low = await admin.delete_records({ATopicPartition("aio", 0): RecordsToDelete(2)})
            assert low == {ATopicPartition("aio", 0): 2}
            cluster = await admin.describe_cluster()
            assert cluster["cluster_id"] == inproc_broker.cluster_id
            deleted = await admin.delete_topics(["aio"])
            assert [t[1] for t in deleted.topic_error_codes] == [0]
        finally:
            await admin.close()

    asyncio.run(scenario())
