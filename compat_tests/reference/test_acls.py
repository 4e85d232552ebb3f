"""ACL denials, odradek against Apache Kafka 4.4: both with a SASL_PLAINTEXT listener (PLAIN),
StandardAuthorizer and `admin` as the super user; `alice` gets what the ACLs grant her.

Compared: the error a client reports for each refused operation, which topics Metadata shows
her, and the ACLs DescribeAcls lists after the grant.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from compat_tests.harness import BrokerProcess, free_port
from compat_tests.reference.conftest import ODRADEK_OVERRIDES, ReferencePool
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference, plain_jaas

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def sasl_odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    port = free_port()
    overrides = {
        **ODRADEK_OVERRIDES,
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
    }
    proc = BrokerProcess(tmp_path_factory.mktemp("odradek-sasl"), overrides=overrides, port=port)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def sasl_kafka(reference_pool: ReferencePool) -> Iterator[KafkaReference]:
    cluster = reference_pool.get("4.4", sasl_users=USERS)
    yield cluster
    reference_pool.release(cluster)


def conf(bootstrap: str, user: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def error_of(call: Callable[[], object]) -> str | None:
    try:
        call()
    except KafkaException as exc:
        return str(exc.args[0].name())
    return None


def produce_error(bootstrap: str, user: str, topic: str) -> str | None:
    errors: list[str] = []
    producer = Producer({**conf(bootstrap, user), "message.timeout.ms": 10_000})
    producer.produce(topic, value=b"v", on_delivery=lambda e, m: e and errors.append(e.name()))
    producer.flush(30)
    return errors[0] if errors else None


def consume_error(bootstrap: str, user: str, topic: str, group: str) -> str | None:
    consumer = Consumer({**conf(bootstrap, user), "group.id": group})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                return str(msg.error().name())
        return None
    finally:
        consumer.close()


def test_acl_denials_and_grants(sasl_odradek: BrokerProcess, sasl_kafka: KafkaReference) -> None:
    def scenario(bootstrap: str) -> object:
        token = uuid.uuid4().hex[:8]
        topic, group = f"ref_acl_{token}", f"ref_aclgroup_{token}"
        admin = AdminClient(conf(bootstrap, "admin"))
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        alice = AdminClient(conf(bootstrap, "alice"))
        out: dict[str, object] = {}
        out["produce without ACL"] = produce_error(bootstrap, "alice", topic)
        out["topics alice sees"] = sorted(
            t for t in alice.list_topics(timeout=15).topics if t.startswith("ref_acl_")
        )
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        out["describe configs without ACL"] = error_of(
            lambda: alice.describe_configs([resource])[resource].result(30)
        )
        grants = [
            AclBinding(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                "User:alice",
                "*",
                op,
                AclPermissionType.ALLOW,
            )
            for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
        ]
        for fut in admin.create_acls(grants).values():
            fut.result(30)
        listed = admin.describe_acls(
            AclBindingFilter(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ).result(30)
        out["ACLs listed"] = sorted(
            (str(b.principal), str(b.host), str(b.operation), str(b.permission_type))
            for b in listed
        )
        out["produce with ACL"] = _until_none(lambda: produce_error(bootstrap, "alice", topic))
        out["consume without group ACL"] = consume_error(bootstrap, "alice", topic, group)
        return out

    ours = scenario(sasl_odradek.bootstrap)
    theirs = scenario(sasl_kafka.bootstrap)
    # the scenario exercises denials at all (on the reference: a set-up check)
    assert isinstance(theirs, dict), theirs
    assert theirs["produce without ACL"] == "TOPIC_AUTHORIZATION_FAILED", theirs
    assert theirs["produce with ACL"] is None, theirs
    Checker("4.4").check("ACL denials and grants", ours, theirs)


def _until_none(call: Callable[[], str | None], wait_s: float = 20) -> str | None:
    """A fresh ACL reaches the authorizer shortly after CreateAcls answers (Kafka applies it
    from the metadata log): retry a denied call, bounded."""
    deadline = time.monotonic() + wait_s
    while True:
        error = call()
        if error is None or time.monotonic() > deadline:
            return error
        time.sleep(0.2)
