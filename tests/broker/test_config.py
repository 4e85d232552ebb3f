"""Broker configuration: Kafka's keys from file, environment and overrides; bad input refused."""

from __future__ import annotations

import pathlib

import pytest

from odradek.broker.config import BrokerConfig, env_properties, parse_listeners
from odradek.broker.config_docs import render
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
        {"log.message.timestamp.type": "Sometimes"},
    ],
)
def test_bad_configs_are_refused(props):
    with pytest.raises(ConfigError):
        BrokerConfig(props)


def test_env_names_map_like_kafkas_docker_images():
    env = {
        "KAFKA_LOG_DIRS": "/x",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "HOME": "/root",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
    }
    assert env_properties(env) == {"log.dirs": "/x", "auto.create.topics.enable": "false"}


def test_listener_forms():
    ls = parse_listeners("PLAINTEXT://:9092,INTERNAL://[::1]:9093")
    assert [(x.name, x.host, x.port) for x in ls] == [
        ("PLAINTEXT", "", 9092),
        ("INTERNAL", "::1", 9093),
    ]


def test_docs_config_table_is_current():
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "config.md"
    assert doc.read_text() == render(), "run: python -m odradek.broker.config_docs > docs/config.md"
