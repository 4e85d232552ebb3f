"""Broker configuration: Kafka's keys from file, environment and overrides; bad input refused."""

from __future__ import annotations

import pathlib

import pytest

from odradek.broker import config
from odradek.broker.config import (
    BROKER_KEYS,
    BrokerConfig,
    env_key,
    env_name,
    env_properties,
    parse_listeners,
)
from odradek.broker.config_docs import render
from odradek.broker.kafka_keys import KAFKA_BROKER_KEYS
from odradek.log.config import ConfigError


def test_precedence_file_then_env_then_overrides(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "# comment\nnum.partitions=3\nlog.dirs=/a\nlog.retention.hours=1\n"
        "listeners = PLAINTEXT://127.0.0.1:9999\n"
    )
    cfg = BrokerConfig.load(
        str(props), {"log.dirs": "/c"}, {"KAFKA_NUM_PARTITIONS": "5", "KAFKA_LOG_DIRS": "/b"}
    )
    assert cfg.get("num.partitions") == 5
    assert cfg.log_dirs == ["/c"]
    assert cfg.retention_ms() == 3_600_000
    assert cfg.listeners[0].port == 9999
    assert cfg.log_config({}).retention_ms == 3_600_000
    assert cfg.topic_default("retention.ms") == (3_600_000, "STATIC_BROKER_CONFIG")


def test_defaults_match_kafka_and_the_embedded_default():
    cfg = BrokerConfig({})
    assert cfg.log_dirs == ["./odradek-data"]
    assert (cfg.listeners[0].host, cfg.listeners[0].port) == ("localhost", 9092)
    lc = cfg.log_config({})
    assert (lc.segment_bytes, lc.retention_ms, lc.max_message_bytes) == (
        1073741824,
        604800000,
        1048588,
    )


@pytest.mark.parametrize(
    "props",
    [
        {"no.such.key": "1"},
        {"num.partitions": "many"},
        {"num.partitions": "0"},
        {"auto.create.topics.enable": "yes"},
        {"listeners": "PLAINTEXT//nohost"},
        {"listeners": "127.0.0.1:19094"},  # no listener name
        {"num.partitons": "3"},  # not Kafka's: a typo
        {"process.roles": "broker"},  # needs separate controllers
        {"process.roles": "controller"},
        {"process.roles": "broker,controller", "zookeeper.connect": "zk:2181"},
        {"controller.quorum.voters": "0@localhost:9093,1@b:9093"},  # a quorum of other nodes
        {"controller.quorum.bootstrap.servers": "a:9093,b:9093"},
        {"listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"},
        {"listeners": "SSL://:9093"},  # odradek serves PLAINTEXT only
        {"listener.security.protocol.map": "PLAINTEXT:SSL"},
        {"inter.broker.listener.name": "INTERNAL"},
        {"log.message.timestamp.type": "Sometimes"},
    ],
)
def test_bad_configs_are_refused(props):
    with pytest.raises(ConfigError):
        BrokerConfig(props, strict=True)


def test_unknown_keys_are_warned_once_naming_the_closest_key_and_ignored(caplog, monkeypatch):
    """As Kafka's "was supplied but isn't a known config"; strict (the flag or the key) refuses."""
    monkeypatch.setattr(config, "_warned", set())
    with caplog.at_level("WARNING", logger="odradek.broker.config"):
        cfg = BrokerConfig({"num.partitons": "3", "num.partitions": "2"})
        BrokerConfig({"num.partitons": "3"})
    assert cfg.get("num.partitions") == 2 and "num.partitons" not in cfg.ignored
    assert [r.getMessage().split(" (odradek")[0] for r in caplog.records] == [
        "the configuration 'num.partitons' was supplied but isn't a known config "
        "(did you mean 'num.partitions'?): ignored"
    ]
    with pytest.raises(ConfigError):
        BrokerConfig({"num.partitons": "3", "odradek.strict.config": "true"})


def test_env_names_map_like_kafkas_docker_images():
    env = {
        "KAFKA_LOG_DIRS": "/x",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "HOME": "/root",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
        "KAFKA_JVM_PERFORMANCE_OPTS": "-server",
        "KAFKA_LOG4J_OPTS": "-Dlog4j.configuration=x",
        "KAFKA_DEBUG": "y",
        "KAFKA_NUM_PARTITONS": "3",  # unknown keys are kept, for BrokerConfig.load to refuse
    }
    assert env_properties(env) == {
        "log.dirs": "/x",
        "auto.create.topics.enable": "false",
        "num.partitons": "3",
    }
    assert env_key("KAFKA_LISTENER_NAME_A__B___C_SSL") == "listener.name.a_b-c.ssl"
    assert env_name("listener.name.a_b-c.ssl") == "KAFKA_LISTENER_NAME_A__B___C_SSL"


@pytest.mark.parametrize(
    ("path_text", "overrides", "env", "where", "suggestion"),
    [
        ("num.partitons=3\n", {}, {}, "server.properties", "num.partitions"),
        ("", {"log.retention.hour": "1"}, {}, "--override", "log.retention.hours"),
        ("", {}, {"KAFKA_NUM_PARTITONS": "3"}, "KAFKA_NUM_PARTITONS", "KAFKA_NUM_PARTITIONS"),
    ],
)
def test_typos_name_their_source_and_the_closest_key(
    tmp_path, path_text, overrides, env, where, suggestion
):
    props = tmp_path / "server.properties"
    props.write_text(path_text)
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(str(props), overrides, env, strict=True)
    assert where in str(err.value) and suggestion in str(err.value)
    cfg = BrokerConfig.load(str(props), overrides, env)  # Kafka's default: warned, ignored
    assert cfg.explicit == {}


def test_kafka_keys_without_effect_are_accepted_and_warned_once(caplog, monkeypatch):
    monkeypatch.setattr(config, "_warned", set())
    props = {"share.coordinator.state.topic.min.isr": "1", "num.replica.fetchers": "4"}
    with caplog.at_level("WARNING", logger="odradek.broker.config"):
        cfg = BrokerConfig(props)
        BrokerConfig(props)  # a second broker of the process: no second warning
    assert cfg.ignored == props
    warned = [r.getMessage() for r in caplog.records]
    assert sorted(m.split()[0] for m in warned) == sorted(props)


def test_every_odradek_key_but_its_own_is_kafkas():
    own = {"cluster.id", "metrics.listen", "odradek.admin.listen"}
    # read from the broker config by Kafka's authorizer (StandardAuthorizer), not KafkaConfig
    own |= {"super.users", "allow.everyone.if.no.acl.found"}
    # the built-in Schema Registry (Redpanda's key; Confluent's registry has its own file)
    own |= {"schema.registry.listeners", "schema.registry.authentication.method"}
    # the first finalized level of a feature, which Kafka sets when the storage is formatted
    # (`kafka-storage format --feature transaction.version=2`); odradek has no format step
    own |= {"transaction.version"}
    assert {k for k in BROKER_KEYS if not k.startswith("odradek.")} - KAFKA_BROKER_KEYS <= own


def test_kraft_combined_node_is_the_embedded_broker():
    cfg = BrokerConfig(
        {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@localhost:9093",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
        }
    )
    assert [(x.name, x.port) for x in cfg.listeners] == [("PLAINTEXT", 9092)]
    assert [(x.name, x.host, x.port) for x in cfg.advertised] == [("PLAINTEXT", "localhost", 9092)]
    assert cfg.node_id == 1


def test_listener_forms():
    ls = parse_listeners("PLAINTEXT://:9092,INTERNAL://[::1]:9093")
    assert [(x.name, x.host, x.port) for x in ls] == [
        ("PLAINTEXT", "", 9092),
        ("INTERNAL", "::1", 9093),
    ]


def test_docs_config_table_is_current():
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "config.md"
    assert doc.read_text() == render(), "run: python -m odradek.broker.config_docs > docs/config.md"
