"""`odradek quotas --alter|--describe` (kafka-configs.sh --entity-type users/clients) run as a
user runs it: the CLI in a subprocess against a real broker, its effect checked with raw
DescribeClientQuotas requests and with a client the quota then throttles."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import DescribeClientQuotasRequest as D
from kafka.protocol.producer import ProduceRequest

from odradek.testing import Broker
from odradek.testing.raw import RawClient, response_class
from odradek.wire.records import build_batch
from tests.cli.cli_run import one_line_error, run_odradek


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(topics={"t": 1}) as b:
        yield b


def cli(broker: Broker, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek("quotas", *args, bootstrap=broker.bootstrap, status=status)


def stored(broker: Broker) -> dict[tuple, dict[str, float]]:
    """Every quota entity, as the broker answers DescribeClientQuotas."""
    with RawClient(broker.bootstrap) as c:
        resp = c.request(D(components=[], strict=False), 1)
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def produce_throttle_ms(broker: Broker, client_id: str, size: int) -> int:
    batch = build_batch([(None, b"x" * size, (), int(time.time() * 1000))])
    Topic = ProduceRequest.TopicProduceData
    req: Any = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            Topic(name="t", partition_data=[Topic.PartitionProduceData(index=0, records=batch)])
        ],
    )
    with RawClient(broker.bootstrap) as c:
        _, data = c.encode(req, 9, client_id=client_id)
        c.send(data)
        resp = response_class(req).decode(c.read_frame(), version=9, header=True)
    throttle: int = resp.throttle_time_ms
    return throttle


def test_alter_then_describe_a_client_quota_and_it_throttles(broker: Broker) -> None:
    out = cli(
        broker,
        "--alter",
        "--add-config",
        "producer_byte_rate=1000,consumer_byte_rate=2048",
        "--entity-type",
        "clients",
        "--entity-name",
        "cli-slow",
    )
    assert out.stdout == "Completed updating config for client cli-slow.\n"
    assert stored(broker)[(("client-id", "cli-slow"),)] == {
        "producer_byte_rate": 1000.0,
        "consumer_byte_rate": 2048.0,
    }
    described = cli(broker, "--describe", "--entity-type", "clients", "--entity-name", "cli-slow")
    assert described.stdout == (
        "Quota configs for client-id 'cli-slow' are "
        "consumer_byte_rate=2048.0, producer_byte_rate=1000.0\n"
    )
    assert produce_throttle_ms(broker, "cli-slow", 12_000) > 0
    assert produce_throttle_ms(broker, "cli-other", 12_000) == 0

    cli(broker, "--alter", "--delete-config", "producer_byte_rate", "--client", "cli-slow")
    assert stored(broker)[(("client-id", "cli-slow"),)] == {"consumer_byte_rate": 2048.0}
    cli(broker, "--alter", "--delete-config", "consumer_byte_rate", "--client", "cli-slow")
    assert (("client-id", "cli-slow"),) not in stored(broker)
    gone = cli(broker, "--describe", "--entity-type", "clients", "--entity-name", "cli-slow")
    assert gone.stdout == ""


def test_user_and_client_entities_defaults_and_json(broker: Broker) -> None:
    cli(
        broker,
        "--alter",
        "--add-config",
        "request_percentage=50",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
    )
    done = cli(broker, "--alter", "--add-config", "producer_byte_rate=4096", "--user-defaults")
    assert done.stdout == "Completed updating default config for users in the cluster.\n"
    cli(broker, "--alter", "--add-config", "controller_mutation_rate=10", "--client", "named")
    assert stored(broker)[(("client-id", None), ("user", "alice"))] == {"request_percentage": 50.0}
    assert stored(broker)[(("user", None),)] == {"producer_byte_rate": 4096.0}

    both = cli(broker, "--describe", "--user", "alice", "--client-defaults")
    assert both.stdout == (
        "Quota configs for user-principal 'alice', the default client-id are "
        "request_percentage=50.0\n"
    )
    # a type without a name: every named entity of exactly that type (strict), not <default>
    users = cli(broker, "--describe", "--entity-type", "users")
    assert users.stdout == ""
    clients = cli(broker, "--describe", "--entity-type", "clients")
    assert "client-id 'named'" in clients.stdout and "alice" not in clients.stdout
    default_user = cli(broker, "--describe", "--entity-type", "users", "--entity-default")
    assert default_user.stdout == (
        "Quota configs for the default user-principal are producer_byte_rate=4096.0\n"
    )
    listed = json.loads(cli(broker, "--describe", "--json").stdout)
    assert {"entity": {"user": None}, "quotas": {"producer_byte_rate": 4096.0}} in listed
    assert {
        "entity": {"client-id": None, "user": "alice"},
        "quotas": {"request_percentage": 50.0},
    } in listed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alter", "--add-config", "producer_bytes=1", "--client", "x"], "Invalid config(s)"),
        (["--alter", "--add-config", "producer_byte_rate=1.5", "--client", "x"], "whole number"),
        (["--alter", "--add-config", "request_percentage=0", "--client", "x"], "positive"),
        (["--alter", "--add-config", "producer_byte_rate=1"], "needs an entity"),
        (["--alter", "--client", "x"], "--add-config and/or --delete-config"),
        (["--alter", "--add-config", "producer_byte_rate=1", "--entity-type", "clients"], "name"),
        (["--describe", "--entity-name", "x"], "needs an --entity-type"),
    ],
)
def test_errors_are_one_line(broker: Broker, args: list[str], message: str) -> None:
    before = stored(broker)
    assert message in one_line_error(cli(broker, *args, status=1))
    assert stored(broker) == before
