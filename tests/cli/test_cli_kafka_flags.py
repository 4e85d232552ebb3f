"""Kafka's tool flags on odradek's commands: the command lines a user copies from
kafka-topics.sh, kafka-consumer-groups.sh, kafka-configs.sh and the console tools run as
they are, in a subprocess against a real broker (only the script name changes)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer

from odradek.testing import Broker
from tests.cli.cli_run import one_line_error, run_odradek

_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{next(_names)}"


def kafka_topics(broker: Broker, *args: str, status: int = 0) -> str:
    return run_odradek(
        "topics", "--bootstrap-server", broker.bootstrap, *args, status=status
    ).stdout


def test_kafka_topics_operation_flags(broker: Broker, name: str) -> None:
    out = kafka_topics(
        broker,
        "--create",
        "--topic",
        name,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=60000",
    )
    assert f"Created topic {name}" in out
    assert name in kafka_topics(broker, "--list").split()
    described = json.loads(kafka_topics(broker, "--describe", "--topic", name, "--json"))
    assert described["name"] == name and len(described["partitions"]) == 3
    kafka_topics(broker, "--alter", "--topic", name, "--partitions", "4")
    described = json.loads(kafka_topics(broker, "--describe", "--topic", name, "--json"))
    assert len(described["partitions"]) == 4
    kafka_topics(broker, "--delete", "--topic", name)
    assert name not in kafka_topics(broker, "--list").split()


def test_subcommand_words_take_topic_option(broker: Broker, name: str) -> None:
    kafka_topics(broker, "create", "--topic", name)
    described = json.loads(kafka_topics(broker, "describe", "--topic", name, "--json"))
    assert described["name"] == name
    kafka_topics(broker, "delete", "--topic", name)


def test_two_operations_are_refused(broker: Broker, name: str) -> None:
    proc = run_odradek("topics", "--create", "--delete", "--topic", name, status=2)
    assert "give one operation, not --create, --delete" in proc.stderr


def test_no_topic_named(broker: Broker) -> None:
    proc = run_odradek(
        "topics", "--create", "--partitions", "1", bootstrap=broker.bootstrap, status=1
    )
    assert "name one topic: NAME or --topic NAME" in one_line_error(proc)


def consume_as_group(broker: Broker, topic: str, group: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send(topic, b"v").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
    )
    assert next(iter(consumer)).value == b"v"
    consumer.commit()
    consumer.close()


def test_kafka_consumer_groups_flags(broker: Broker, name: str) -> None:
    broker.create_topic(name)
    groups = [f"{name}-a", f"{name}-b"]
    for group in groups:
        consume_as_group(broker, name, group)

    def tool(*args: str, status: int = 0) -> str:
        return run_odradek(
            "groups", "--bootstrap-server", broker.bootstrap, *args, status=status
        ).stdout

    assert set(groups) <= set(tool("--list").split())
    assert set(groups) <= {
        r["group"] for r in json.loads(tool("--list", "--state", "Empty", "--json"))
    }
    assert not set(groups) & {
        r["group"] for r in json.loads(tool("--list", "--state", "Stable", "--json"))
    }
    described = json.loads(tool("--describe", "--all-groups", "--json"))
    described = described if isinstance(described, list) else [described]
    assert set(groups) <= {d["group"] for d in described}
    one = json.loads(tool("describe", "--group", groups[0], "--offsets", "--json"))
    assert one["group"] == groups[0]
    tool("--delete", "--group", groups[0])
    assert groups[0] not in tool("--list").split()
    tool("--delete", "--all-groups")
    assert groups[1] not in tool("--list").split()


def test_kafka_configs_operation_flags(broker: Broker, name: str) -> None:
    broker.create_topic(name)

    def tool(*args: str) -> str:
        return run_odradek("configs", "--bootstrap-server", broker.bootstrap, *args).stdout

    tool(
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        name,
        "--add-config",
        "retention.ms=12345",
    )
    described = tool("--describe", "--entity-type", "topics", "--entity-name", name)
    assert "retention.ms=12345" in described


def test_console_producer_flags(broker: Broker, name: str) -> None:
    broker.create_topic(name)
    run_odradek(
        "produce",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        name,
        "--timeout",
        "0",
        "--request-timeout-ms",
        "30000",
        "--message-send-max-retries",
        "3",
        "--retry-backoff-ms",
        "100",
        "--max-block-ms",
        "30000",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin="k1:v1\nk2:v2\n",
    )
    out = run_odradek(
        "consume",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        name,
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
    ).stdout
    assert out.split() == ["k1:v1", "k2:v2"]


def test_own_subcommand_keeps_its_flags() -> None:
    from odradek.cli_commands.kafka_flags import kafka_script_form

    own = ["topics", "reassign", "--list", "-b", "h:1"]
    assert kafka_script_form(own) == own
    assert kafka_script_form(["topics", "-b", "h:1", "--list"]) == ["topics", "list", "-b", "h:1"]
