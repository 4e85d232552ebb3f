"""Dynamic broker configs (KIP-226) and topic configs as Kafka answers them, through
confluent-kafka's and kafka-python's admin clients: the BROKER resource accepts what Kafka's
DynamicBrokerConfig accepts (per broker or as the cluster default), refuses the rest with Kafka's
messages, describes it with its source and synonyms, keeps it across a restart and applies the
log defaults to topics; legacy AlterConfigs of message.format.version and an empty
cleanup.policy are accepted as on Kafka."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from odradek.testing import Broker

TIMEOUT = 15
SET = AlterConfigOpType.SET


@pytest.fixture
def broker(tmp_path) -> Iterator[Broker]:
    with Broker(topics={"t": 1}, data_dir=str(tmp_path / "data")) as b:
        yield b


@pytest.fixture
def admin(broker: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def incremental(admin: AdminClient, rtype: ResourceType, name: str, **configs: str) -> None:
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=SET) for k, v in configs.items()
    ]
    resource = ConfigResource(rtype, name, incremental_configs=entries)
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(timeout=TIMEOUT)


def cluster_default(
    broker: Broker, configs: dict[str, str | None], op: int = 0
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET (or `op`) on the cluster-wide default (the BROKER resource
    with an empty name, which confluent-kafka and kafka-python refuse to send): (error,
    message)."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        request = IncrementalAlterConfigsRequest(
            resources=[(4, "", [(k, op, v) for k, v in configs.items()])], validate_only=False
        )
        (answer,) = admin._manager.run(admin._manager.send, request).responses
        return answer.error_code, answer.error_message
    finally:
        admin.close()


def describe_cluster_default(broker: Broker) -> dict[str, tuple[str | None, int]]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        request = DescribeConfigsRequest(resources=[(4, "", None)], include_synonyms=True)
        (result,) = admin._manager.run(admin._manager.send, request).results
        assert result.error_code == 0
        return {c.name: (c.value, c.config_source) for c in result.configs}
    finally:
        admin.close()


def refused(admin: AdminClient, name: str, configs: dict[str, str]) -> KafkaError:
    entries = [ConfigEntry(k, v, incremental_operation=SET) for k, v in configs.items()]
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=entries)
    (future,) = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(KafkaException) as exc:
        future.result(timeout=TIMEOUT)
    return exc.value.args[0]


def describe(admin: AdminClient, rtype: ResourceType, name: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(rtype, name)]).values()
    return future.result(timeout=TIMEOUT)


def test_legacy_alter_configs_of_a_topic_and_a_brokers_sasl_settings(admin: AdminClient) -> None:
    """As librdkafka's AlterConfigs test sends it: one legacy request (key 33) with a topic's
    configs, message.format.version among them, and a broker's listener-level SASL setting."""
    topic = ConfigResource(
        ResourceType.TOPIC,
        "t",
        set_config={
            "compression.type": "gzip",
            "flush.ms": "12345678",
            "message.format.version": "0.10.0",
        },
    )
    brk = ConfigResource(
        ResourceType.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([topic, brk])
    for future in futures.values():
        assert future.result(timeout=TIMEOUT) is None
    topic_configs = describe(admin, ResourceType.TOPIC, "t")
    assert topic_configs["message.format.version"].value == "0.10.0"
    assert topic_configs["compression.type"].value == "gzip"
    entry = describe(admin, ResourceType.BROKER, "0")["sasl.kerberos.min.time.before.relogin"]
    assert entry.value == "58000" and not entry.is_read_only
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    # a legacy AlterConfigs replaces the broker's whole dynamic set, as on Kafka
    brk = ConfigResource(ResourceType.BROKER, "0", set_config={"num.io.threads": "16"})
    with pytest.warns(DeprecationWarning):
        (future,) = admin.alter_configs([brk]).values()
    future.result(timeout=TIMEOUT)
    described = describe(admin, ResourceType.BROKER, "0")
    assert described["num.io.threads"].value == "16"
    assert described["num.io.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert "sasl.kerberos.min.time.before.relogin" not in described


def test_dynamic_log_defaults_reach_topics_and_survive_a_restart(
    broker: Broker, admin: AdminClient
) -> None:
    assert cluster_default(broker, {"log.retention.ms": "7200000"}) == (0, None)
    retention = describe(admin, ResourceType.TOPIC, "t")["retention.ms"]
    assert retention.value == "7200000"
    assert retention.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert [(s.name, s.value, s.source) for s in retention.synonyms.values()][0] == (
        "log.retention.ms",
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert describe_cluster_default(broker) == {
        "log.retention.ms": ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        "min.insync.replicas": ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
    }
    # this broker's own value wins over the cluster default
    incremental(admin, ResourceType.BROKER, "0", log_retention_ms="3600000")
    retention = describe(admin, ResourceType.TOPIC, "t")["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert broker.call(lambda s: s.topics.get("t", 0).log.config.retention_ms) == 3600000
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = describe(admin, ResourceType.BROKER, "0")["log.retention.ms"]
    assert (described.value, described.source) == (
        "3600000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert broker.call(lambda s: s.topics.get("t", 0).log.config.retention_ms) == 3600000


def test_what_kafka_cannot_update_dynamically_is_refused_with_its_message(
    broker: Broker, admin: AdminClient
) -> None:
    err = refused(admin, "0", {"num.partitions": "3"})
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(num.partitions)" in err.str()
    err = refused(admin, "0", {"log.retention.hours": "3"})  # only log.retention.ms is dynamic
    assert "Cannot update these configs dynamically" in err.str()
    err = refused(admin, "0", {"ssl.keystore.location": "/k.p12"})
    assert "only per-listener using the listener prefix" in err.str()
    code, message = cluster_default(
        broker, {"listener.name.plaintext.sasl.kerberos.service.name": "kafka"}
    )
    assert code == KafkaError.INVALID_REQUEST and "broker id must be specified" in str(message)
    assert cluster_default(broker, {"max.connections": "100"}) == (0, None)  # cluster-wide
    err = refused(admin, "0", {"log.retention.ms": "soon"})
    assert err.code() == KafkaError.INVALID_REQUEST
    err = refused(admin, "0", {"sasl.kerberos.min.time.before.relogin": "soon"})
    assert err.code() == KafkaError.INVALID_REQUEST


def test_min_insync_replicas_is_cluster_level_as_on_kafka_41(tmp_path) -> None:
    """Kafka 4.1+ (ELR on by default, KAFKA-16540): a new cluster gets a cluster-level
    min.insync.replicas from the static value, which topics then report as a dynamic default
    (not the static or default value); it cannot be set per broker nor removed."""
    data = str(tmp_path / "data")
    with Broker(topics={"t": 1}, data_dir=data, config={"min.insync.replicas": 1}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        entry = describe(admin, ResourceType.TOPIC, "t")["min.insync.replicas"]
        assert entry.value == "1" and not entry.is_default
        assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        err = refused(admin, "0", {"min.insync.replicas": "2"})
        assert err.code() == KafkaError.INVALID_CONFIG
        assert "Broker-level min.insync.replicas cannot be altered while ELR is enabled." in (
            err.str()
        )
        assert cluster_default(broker, {"min.insync.replicas": None}, op=1) == (
            KafkaError.INVALID_CONFIG,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        )
        assert cluster_default(broker, {"min.insync.replicas": "2"}) == (0, None)
        assert describe(admin, ResourceType.TOPIC, "t")["min.insync.replicas"].value == "2"
        assert broker.call(lambda s: s.topics.get("t", 0).log.config.min_insync_replicas) == 2


def test_kafka_keys_without_effect_are_described_as_set(tmp_path) -> None:
    """A Kafka key odradek does not use, set in the broker's config, is described as Kafka
    describes it: its value, STATIC_BROKER_CONFIG, read-only unless dynamic."""
    config = {"num.replica.fetchers": 4, "auto.leader.rebalance.enable": "false"}
    with Broker(data_dir=str(tmp_path / "data"), config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = describe(admin, ResourceType.BROKER, "0")
        fetchers = described["num.replica.fetchers"]
        assert (fetchers.value, fetchers.source, fetchers.is_read_only) == (
            "4",
            ConfigSource.STATIC_BROKER_CONFIG.value,
            False,
        )
        rebalance = described["auto.leader.rebalance.enable"]
        assert (rebalance.value, rebalance.is_read_only) == ("false", True)


def test_listener_passwords_are_stored_but_never_described(admin: AdminClient) -> None:
    incremental(
        admin,
        ResourceType.BROKER,
        "0",
        **{"listener.name.plaintext.ssl.keystore.password": "s3cret"},
    )
    entry = describe(admin, ResourceType.BROKER, "0")[
        "listener.name.plaintext.ssl.keystore.password"
    ]
    assert entry.is_sensitive and entry.value is None and not entry.is_read_only
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_an_empty_cleanup_policy_is_accepted(broker: Broker, admin: AdminClient) -> None:
    """Kafka accepts the empty list: neither delete nor compact, so retention deletes nothing
    (KIP-1161's meaning)."""
    incremental(admin, ResourceType.TOPIC, "t", cleanup_policy="")
    policy = describe(admin, ResourceType.TOPIC, "t")["cleanup.policy"]
    assert policy.value == "" and policy.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    cfg = broker.call(lambda s: s.topics.get("t", 0).log.config)
    assert not cfg.delete and not cfg.compact
    kept = NewTopic("kept", 1, 1, config={"cleanup.policy": ""})
    (future,) = admin.create_topics([kept]).values()
    assert future.result(timeout=TIMEOUT) is None


def test_broker_configs_through_zookeeper(tmp_path) -> None:
    """Kafka 3.x's layout: /config/brokers/<default> and /config/brokers/<id>, heard by every
    broker through the change notifications."""
    import asyncio
    import json
    import time

    from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore
    from odradek.testing.zookeeper import ZooKeeperServer

    async def body(connect: str) -> None:
        a = ZooKeeperMetadataStore(connect, 0, session_timeout_ms=2000)
        b = ZooKeeperMetadataStore(connect, 1, session_timeout_ms=2000)
        try:
            a.subscribe(lambda change: None)
            b.subscribe(lambda change: None)
            a.alter_broker_configs("", {"log.retention.ms": "1000"})
            a.alter_broker_configs("1", {"num.io.threads": "4"})
            wanted = {"": {"log.retention.ms": "1000"}, "1": {"num.io.threads": "4"}}
            deadline = time.monotonic() + TIMEOUT
            while b.broker_configs != wanted:
                assert time.monotonic() < deadline, b.broker_configs
                await asyncio.sleep(0.01)
            data, _ = a.zk.get("/config/brokers/<default>")
            assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "1000"}}
            b.alter_broker_configs("", {})
            while "" in a.broker_configs:
                assert time.monotonic() < deadline, a.broker_configs
                await asyncio.sleep(0.01)
        finally:
            a.close()
            b.close()

    with ZooKeeperServer(str(tmp_path)) as zk:
        asyncio.run(asyncio.wait_for(body(zk.connect("/broker-configs")), 60))


# Kafka 3.9's topic configs (LogConfig.CONFIG), which DescribeConfigs of a topic lists
KAFKA_39_TOPIC_CONFIGS = {
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}


def test_a_topic_describes_and_accepts_every_kafka_topic_config(admin: AdminClient) -> None:
    assert set(describe(admin, ResourceType.TOPIC, "t")) == KAFKA_39_TOPIC_CONFIGS
    throttles = {
        "leader.replication.throttled.replicas": "0:0",
        "follower.replication.throttled.replicas": "*",
        "compression.gzip.level": "6",
        "local.retention.ms": "-2",
    }
    (future,) = admin.create_topics([NewTopic("throttled", 1, 1, config=throttles)]).values()
    assert future.result(timeout=TIMEOUT) is None
    described = describe(admin, ResourceType.TOPIC, "throttled")
    assert {k: described[k].value for k in throttles} == throttles
    for config, message in [
        ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled"),
        ({"compression.gzip.level": "10"}, "compression.gzip.level"),
        ({"leader.replication.throttled.replicas": "0-0"}, "must be the literal '*'"),
    ]:
        (future,) = admin.create_topics([NewTopic("bad", 1, 1, config=config)]).values()
        with pytest.raises(KafkaException) as exc:
            future.result(timeout=TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert message in exc.value.args[0].str()
