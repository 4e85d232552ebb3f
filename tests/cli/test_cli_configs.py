"""`odradek configs describe|alter` (kafka-configs.sh) run as a user runs it: the CLI in a
subprocess against a real broker, its effect checked with kafka-python's admin client."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource

from odradek.testing import Broker
from tests.cli.cli_run import one_line_error, run_odradek

_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config={"num.partitions": "3", "log.retention.hours": "100"}) as b:
        yield b


@pytest.fixture
def topic(broker: Broker, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"{request.node.name[:40]}-{next(_names)}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
        yield name
    finally:
        admin.close()


def cli(broker: Broker, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek(*args, bootstrap=broker.bootstrap, status=status)


def topic_configs(broker: Broker, topic: str) -> dict[str, dict]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        found = admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")
        return found["topic"][topic]
    finally:
        admin.close()


def test_alter_and_describe_topic_configs(broker: Broker, topic: str) -> None:
    out = cli(
        broker,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=1000,cleanup.policy=[compact,delete]",
        "--add-config",
        "max.message.bytes=2048",
    ).stdout
    assert out.strip() == f"Completed updating config for topic {topic}."
    stored = topic_configs(broker, topic)
    assert stored["retention.ms"]["value"] == "1000"
    assert stored["cleanup.policy"]["value"] == "compact,delete"
    assert stored["max.message.bytes"]["value"] == "2048"

    # only what is set on the topic, sorted, each with its synonyms and their sources
    described = cli(
        broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic
    )
    assert described.stdout.splitlines() == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  max.message.bytes=2048 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=2048, DEFAULT_CONFIG:message.max.bytes=1048588}",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
    ]

    # --all: defaults too, with where they come from (the broker's file, or the default)
    everything = cli(broker, "configs", "describe", "--topic", topic, "--all").stdout.splitlines()
    assert everything[0] == f"All configs for topic {topic} are:"
    assert (
        "  compression.type=producer sensitive=false "
        "synonyms={DEFAULT_CONFIG:compression.type=producer}" in everything
    )
    assert len(everything) > 20

    cli(
        broker,
        "configs",
        "alter",
        "--topic",
        topic,
        "--delete-config",
        "retention.ms,max.message.bytes",
    )
    stored = topic_configs(broker, topic)
    assert stored["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert stored["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    doc = json.loads(cli(broker, "configs", "describe", "--topic", topic, "--json").stdout)
    assert doc["entity_type"] == "topic" and doc["entity_name"] == topic
    assert [(c["name"], c["value"], c["source"], c["sensitive"]) for c in doc["configs"]] == [
        ("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG", False)
    ]


def test_broker_configs(broker: Broker) -> None:
    # nothing is set dynamically on an odradek broker: only the header, as kafka-configs.sh
    dynamic = cli(broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "0")
    assert dynamic.stdout.splitlines() == ["Dynamic configs for broker 0 are:"]
    # every broker when no name is given
    assert cli(broker, "configs", "describe", "--entity-type", "brokers").stdout == dynamic.stdout

    everything = cli(broker, "configs", "describe", "--broker", "0", "--all").stdout.splitlines()
    assert everything[0] == "All configs for broker 0 are:"
    assert (
        "  num.partitions=3 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=3, "
        "DEFAULT_CONFIG:num.partitions=1}" in everything
    )
    doc = json.loads(cli(broker, "configs", "describe", "--broker", "0", "--all", "--json").stdout)
    sources = {c["name"]: c["source"] for c in doc["configs"]}
    assert sources["num.partitions"] == "STATIC_BROKER_CONFIG"
    assert sources["auto.create.topics.enable"] == "DEFAULT_CONFIG"

    # a dynamic broker config (Kafka's DynamicBrokerConfig) is set and described with its
    # synonyms, as kafka-configs.sh shows them
    cli(broker, "configs", "alter", "--broker", "0", "--add-config", "log.retention.ms=3600000")
    dynamic = cli(broker, "configs", "describe", "--broker", "0").stdout.splitlines()
    assert dynamic == [
        "Dynamic configs for broker 0 are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=3600000, STATIC_BROKER_CONFIG:log.retention.hours=100, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    cli(broker, "configs", "alter", "--broker", "0", "--delete-config", "log.retention.ms")

    # a config Kafka cannot update dynamically: the broker refuses, the CLI says why
    err = one_line_error(
        cli(
            broker,
            "configs",
            "alter",
            "--broker",
            "0",
            "--add-config",
            "num.partitions=5",
            status=1,
        )
    )
    assert "INVALID_REQUEST" in err and "num.partitions" in err


def test_config_errors(broker: Broker, topic: str) -> None:
    err = one_line_error(
        cli(broker, "configs", "describe", "--topic", topic + "-missing", status=1)
    )
    assert "does not exist" in err
    err = one_line_error(
        cli(broker, "configs", "alter", "--topic", topic, "--add-config", "no.such.key=1", status=1)
    )
    assert "INVALID_CONFIG" in err and "no.such.key" in err
    # deleting a config that is not set is refused before anything is sent (kafka-configs.sh)
    err = one_line_error(
        cli(
            broker,
            "configs",
            "alter",
            "--topic",
            topic,
            "--delete-config",
            "retention.ms",
            status=1,
        )
    )
    assert "Invalid config(s): retention.ms" in err
    assert "needs key=value" in one_line_error(
        cli(broker, "configs", "alter", "--topic", topic, "--add-config", "oops", status=1)
    )
    assert "broker 7 is not in the cluster" in one_line_error(
        cli(broker, "configs", "describe", "--broker", "7", status=1)
    )
    assert "give one entity" in one_line_error(cli(broker, "configs", "describe", status=1))
    assert topic_configs(broker, topic)["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
