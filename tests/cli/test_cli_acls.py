"""`odradek acls` (kafka-acls.sh) run as a user runs it: the CLI in a subprocess against a real
broker with SASL PLAIN users and an authorizer, its effect checked with a real client."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from odradek.testing import Broker
from tests.cli.cli_run import run_odradek

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with Broker(topics={"orders": 1, "orders-eu": 1}, config=config) as b:
        yield b


def command_config(tmp_path: Path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{USERS[user]}";\n'
    )
    return str(path)


def acls(
    broker: Broker, config: str, *args: str, status: int = 0
) -> subprocess.CompletedProcess[str]:
    return run_odradek(
        "acls", "--command-config", config, *args, bootstrap=broker.bootstrap, status=status
    )


def alice_produces(broker: Broker, topic: str) -> list[str]:
    errors: list[str] = []
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
            "message.timeout.ms": 10_000,
        }
    )
    producer.produce(topic, value=b"v", on_delivery=lambda e, m: e and errors.append(e.name()))
    producer.flush(20)
    return errors


def test_add_list_and_remove_as_kafka_acls(broker, tmp_path):
    admin = command_config(tmp_path, "admin")
    assert alice_produces(broker, "orders-eu") == ["TOPIC_AUTHORIZATION_FAILED"]

    out = acls(
        broker,
        admin,
        "--add",
        "--allow-principal",
        "User:alice",
        "--producer",
        "--topic",
        "orders",
        "--resource-pattern-type",
        "prefixed",
    ).stdout
    assert (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=PREFIXED)`: " in out
    )
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in out
    assert alice_produces(broker, "orders-eu") == []

    listed = json.loads(
        acls(
            broker,
            admin,
            "--list",
            "--topic",
            "orders-eu",
            "--resource-pattern-type",
            "match",
            "--json",
        ).stdout  # fmt: skip
    )
    assert [(r["name"], r["pattern_type"]) for r in listed] == [("orders", "PREFIXED")]
    assert sorted(a["operation"] for a in listed[0]["acls"]) == ["CREATE", "DESCRIBE", "WRITE"]

    # a principal without ALTER on the cluster may not change ACLs: one line, status 1
    denied = acls(
        broker,
        command_config(tmp_path, "alice"),
        "--add",
        "--allow-principal",
        "User:alice",
        "--cluster",
        status=1,
    )
    assert denied.stderr.strip().startswith("odradek: CLUSTER_AUTHORIZATION_FAILED")
    assert len(denied.stderr.strip().splitlines()) == 1

    removed = acls(
        broker,
        admin,
        "--remove",
        "--force",
        "--topic",
        "orders",
        "--resource-pattern-type",
        "prefixed",
    ).stdout
    assert removed.count("principal=User:alice") == 3
    assert alice_produces(broker, "orders-eu") == ["TOPIC_AUTHORIZATION_FAILED"]
    assert json.loads(acls(broker, admin, "--list", "--json").stdout) == []


def test_bad_arguments_are_one_line(broker, tmp_path):
    admin = command_config(tmp_path, "admin")
    proc = acls(broker, admin, "--add", "--allow-principal", "alice", "--topic", "t", status=1)
    assert proc.stderr.strip() == (
        "odradek: expected a string in format principalType:principalName but got alice"
    )
    proc = acls(broker, admin, "--add", "--allow-principal", "User:a", "--topic", "t",
                "--resource-pattern-type", "match", status=1)  # fmt: skip
    assert "is not valid when adding acls" in proc.stderr
