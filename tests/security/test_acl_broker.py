"""ACLs on a real broker (issue 14), as users see them through real clients.

The broker has a SASL_PLAINTEXT listener with PLAIN users admin (a super user), alice and bob,
and `authorizer.class.name` set, so everything not allowed by an ACL is denied. Each test names
its own topics and groups, so the ACLs one creates do not touch another's.
"""

from __future__ import annotations

import confluent_kafka as ck
import confluent_kafka.admin
import pytest
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    ClusterAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

TIMEOUT_S = 20.0
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
TOPICS = {
    "w-denied": 1,
    "r-denied": 1,
    "g-topic": 1,
    "c-topic": 1,
    "deny-me": 1,
    "allowed-too": 1,
    "pre-one": 1,
    "other-one": 1,
    "hidden": 1,
    "visible": 1,
    "cfg": 1,
}


def broker_config(**extra: str) -> dict[str, str]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


@pytest.fixture(scope="module")
def broker():
    with Broker(topics=TOPICS, config=broker_config()) as b:
        yield b


def admin(broker: Broker, user: str = "admin") -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=USERS[user],
        request_timeout_ms=10_000,
    )


def acl(
    user: str,
    operation: ACLOperation,
    rtype: ResourceType,
    name: str,
    pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL,
    permission: ACLPermissionType = ACLPermissionType.ALLOW,
) -> ACL:
    return ACL(f"User:{user}", "*", operation, permission, ResourcePattern(rtype, name, pattern))


def grant(broker: Broker, *acls: ACL) -> None:
    client = admin(broker)
    try:
        result = client.create_acls(list(acls))
    finally:
        client.close()
    assert not result["failed"], result["failed"]


def ck_conf(broker: Broker, user: str, **extra: object) -> dict:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def produce(broker: Broker, user: str, topic: str, values: list[bytes]) -> list[str]:
    """Delivery errors by name (empty: all delivered)."""
    errors: list[str] = []
    producer = ck.Producer(ck_conf(broker, user, **{"message.timeout.ms": 10_000}))
    for v in values:
        producer.produce(topic, value=v, on_delivery=lambda e, m: e and errors.append(e.name()))
    producer.flush(TIMEOUT_S)
    return errors


def end_offset(broker: Broker, topic: str) -> int:
    return broker.call(lambda b: b.topics.get(topic, 0).log.log_end_offset)


def consume(broker: Broker, user: str, topic: str, group: str, want: int) -> tuple[list, str]:
    """(values, first error name) of a subscribed consumer, polled until `want` values or an
    error arrives (bounded)."""
    consumer = ck.Consumer(
        ck_conf(broker, user, **{"group.id": group, "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    error = ""
    try:
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                error = msg.error().name()
                break
            values.append(msg.value())
            if len(values) >= want:
                break
    finally:
        consumer.close()
    return values, error


# -- denials as a user sees them -----------------------------------------------------------------


def test_produce_without_write_is_denied_and_nothing_is_written(broker):
    grant(broker, acl("alice", ACLOperation.DESCRIBE, ResourceType.TOPIC, "w-denied"))
    before = end_offset(broker, "w-denied")
    assert produce(broker, "alice", "w-denied", [b"no"]) == ["TOPIC_AUTHORIZATION_FAILED"]
    assert end_offset(broker, "w-denied") == before
    # the super user is not affected, and WRITE lets alice in
    assert produce(broker, "admin", "w-denied", [b"admin"]) == []
    grant(broker, acl("alice", ACLOperation.WRITE, ResourceType.TOPIC, "w-denied"))
    assert produce(broker, "alice", "w-denied", [b"yes"]) == []
    assert end_offset(broker, "w-denied") == before + 2


def test_fetch_without_read_is_denied(broker):
    assert produce(broker, "admin", "r-denied", [b"r1"]) == []
    grant(
        broker,
        acl("alice", ACLOperation.DESCRIBE, ResourceType.TOPIC, "r-denied"),
        acl("alice", ACLOperation.READ, ResourceType.GROUP, "r-group"),
    )
    values, error = consume(broker, "alice", "r-denied", "r-group", 1)
    assert (values, error) == ([], "TOPIC_AUTHORIZATION_FAILED")
    grant(broker, acl("alice", ACLOperation.READ, ResourceType.TOPIC, "r-denied"))
    values, error = consume(broker, "alice", "r-denied", "r-group", 1)
    assert (values, error) == ([b"r1"], "")


def test_group_join_without_group_read_is_denied(broker):
    grant(broker, acl("alice", ACLOperation.READ, ResourceType.TOPIC, "g-topic"))
    values, error = consume(broker, "alice", "g-topic", "g-denied", 1)
    assert (values, error) == ([], "GROUP_AUTHORIZATION_FAILED")


def test_offset_commit_is_checked_on_the_group_and_the_topic(broker):
    def commit_error(user: str) -> int:
        """The error of `user`'s commit of c-topic 0 in c-group (it must fail)."""
        consumer = ck.Consumer(ck_conf(broker, user, **{"group.id": "c-group"}))
        try:
            with pytest.raises(ck.KafkaException) as info:
                consumer.commit(offsets=[ck.TopicPartition("c-topic", 0, 1)], asynchronous=False)
            return info.value.args[0].code()
        finally:
            consumer.close()

    grant(broker, acl("alice", ACLOperation.READ, ResourceType.GROUP, "c-group"))
    assert commit_error("alice") == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # bob may find the group's coordinator (DESCRIBE) but not commit (READ)
    grant(broker, acl("bob", ACLOperation.DESCRIBE, ResourceType.GROUP, "c-group"))
    assert commit_error("bob") == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    committed = broker.call(
        lambda b: b.group_coordinator.fetch_offsets("c-group", [("c-topic", 0)], False)
    )
    assert [f.offset for f in committed[1]] == [-1]


def test_a_transactional_id_without_write_is_denied(broker):
    producer = ck.Producer(ck_conf(broker, "alice", **{"transactional.id": "txn-denied"}))
    with pytest.raises(ck.KafkaException) as info:
        producer.init_transactions(10)
    assert info.value.args[0].code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_create_topic_describe_configs_and_alter_acls_are_denied(broker):
    client = admin(broker, "alice")
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            client.create_topics([NewTopic("alice-new", 1, 1)])
        assert broker.call(lambda b: b.topics.info("alice-new")) is None
        result = client.create_acls([acl("alice", ACLOperation.ALL, ResourceType.TOPIC, "*")])
        assert not result["succeeded"]
        assert result["failed"] == [ClusterAuthorizationFailedError]
        with pytest.raises(ClusterAuthorizationFailedError):
            client.describe_acls(
                ACLFilter(
                    None,
                    None,
                    ACLOperation.ANY,
                    ACLPermissionType.ANY,
                    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
                )
            )
    finally:
        client.close()
    # DescribeConfigs through confluent-kafka's admin client, which reports the error
    ck_admin = ck.admin.AdminClient(ck_conf(broker, "alice"))
    futures = ck_admin.describe_configs([ck.admin.ConfigResource("topic", "cfg")])
    with pytest.raises(ck.KafkaException) as info:
        next(iter(futures.values())).result(TIMEOUT_S)
    assert info.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # with CREATE on the cluster alice creates topics
    grant(broker, acl("alice", ACLOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster"))
    client = admin(broker, "alice")
    try:
        client.create_topics([NewTopic("alice-new", 1, 1)])
    finally:
        client.close()
    assert broker.call(lambda b: b.topics.info("alice-new")) is not None


def test_a_deny_acl_overrides_an_allow(broker):
    grant(
        broker,
        acl("bob", ACLOperation.ALL, ResourceType.TOPIC, "*"),
        acl(
            "bob",
            ACLOperation.WRITE,
            ResourceType.TOPIC,
            "deny-me",
            permission=ACLPermissionType.DENY,
        ),
    )
    before = end_offset(broker, "deny-me")
    assert produce(broker, "bob", "deny-me", [b"x"]) == ["TOPIC_AUTHORIZATION_FAILED"]
    assert end_offset(broker, "deny-me") == before
    assert produce(broker, "bob", "allowed-too", [b"y"]) == []


def test_prefixed_acls(broker):
    grant(
        broker,
        acl(
            "alice", ACLOperation.WRITE, ResourceType.TOPIC, "pre-", ACLResourcePatternType.PREFIXED
        ),
        acl("alice", ACLOperation.DESCRIBE, ResourceType.TOPIC, "other-one"),
    )
    assert produce(broker, "alice", "pre-one", [b"p"]) == []
    assert produce(broker, "alice", "other-one", [b"o"]) == ["TOPIC_AUTHORIZATION_FAILED"]


def test_metadata_hides_topics_the_principal_may_not_describe(broker):
    grant(broker, acl("alice", ACLOperation.DESCRIBE, ResourceType.TOPIC, "visible"))
    client = admin(broker, "alice")
    try:
        topics = set(client.list_topics())
    finally:
        client.close()
    assert "visible" in topics
    assert "hidden" not in topics
    assert "__consumer_offsets" not in topics
    client = admin(broker)  # the super user sees everything
    try:
        assert {"hidden", "visible"} <= set(client.list_topics())
    finally:
        client.close()


# -- the ACL APIs ------------------------------------------------------------------------------


ANY = ACLFilter(
    None,
    None,
    ACLOperation.ANY,
    ACLPermissionType.ANY,
    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
)


def test_acl_round_trip_with_kafka_python_survives_a_restart(tmp_path):
    with Broker(config=broker_config(), data_dir=str(tmp_path / "d")) as b:
        reads = acl("alice", ACLOperation.READ, ResourceType.TOPIC, "orders")
        deny = acl(
            "bob",
            ACLOperation.WRITE,
            ResourceType.TOPIC,
            "ord",
            ACLResourcePatternType.PREFIXED,
            ACLPermissionType.DENY,
        )
        bad = acl("alice", ACLOperation.ALTER, ResourceType.CLUSTER, "not-the-cluster")
        client = admin(b)
        try:
            result = client.create_acls([reads, deny, bad])
            assert len(result["succeeded"]) == 2
            assert len(result["failed"]) == 1
            listed, error = client.describe_acls(ANY)
            assert {(a.principal, a.operation, a.permission_type) for a in listed} == {
                ("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW),
                ("User:bob", ACLOperation.WRITE, ACLPermissionType.DENY),
            }
        finally:
            client.close()
        b.restart()
        client = admin(b)
        try:
            listed, _ = client.describe_acls(ANY)
            assert len(listed) == 2
            deleted = client.delete_acls(
                [
                    ACLFilter(
                        "User:bob",
                        None,
                        ACLOperation.ANY,
                        ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY),
                    )
                ]
            )
            assert [a.principal for a in deleted[0][1]] == ["User:bob"]
        finally:
            client.close()
        b.restart()
        client = admin(b)
        try:
            listed, _ = client.describe_acls(ANY)
            assert [a.principal for a in listed] == ["User:alice"]
        finally:
            client.close()


def test_acl_apis_without_an_authorizer_answer_security_disabled():
    with Broker() as b:
        client = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10_000)
        try:
            with pytest.raises(SecurityDisabledError):
                client.describe_acls(ANY)
        finally:
            client.close()


# -- inter-broker requests and authorized operations, in exact requests ------------------------


def sasl_raw(broker: Broker, user: str) -> RawClient:
    raw = RawClient(broker.bootstrap)
    assert raw.request(protocol.SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    token = b"\x00" + user.encode() + b"\x00" + USERS[user].encode()
    assert raw.request(protocol.SaslAuthenticateRequest(auth_bytes=token), 2).error_code == 0
    return raw


def test_broker_requests_need_cluster_action_and_authorized_operations_are_filled(broker):
    assert produce(broker, "admin", "visible", [b"v"]) == []
    before = end_offset(broker, "visible")
    F = protocol.FetchRequest
    W = protocol.WriteTxnMarkersRequest.WritableTxnMarker
    M = protocol.MetadataRequest
    grant(broker, acl("alice", ACLOperation.ALL, ResourceType.TOPIC, "visible"))
    with sasl_raw(broker, "alice") as raw:
        # a follower's fetch from a principal without CLUSTER_ACTION
        fetch = F(
            replica_id=1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                F.FetchTopic(
                    topic="visible",
                    partitions=[
                        F.FetchTopic.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        resp = raw.request(fetch, 11)
        assert resp.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert not resp.responses[0].partitions[0].records
        # transaction markers from a principal that is not a broker: nothing is written
        markers = protocol.WriteTxnMarkersRequest(
            markers=[
                W(
                    producer_id=7,
                    producer_epoch=0,
                    transaction_result=True,
                    topics=[W.WritableTxnMarkerTopic(name="visible", partition_indexes=[0])],
                    coordinator_epoch=0,
                )
            ]
        )
        resp = raw.request(markers, 1)
        code = resp.markers[0].topics[0].partitions[0].error_code
        assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert end_offset(broker, "visible") == before
        # authorized operations: all topic operations on "visible", none on the cluster
        md = raw.request(
            M(
                topics=[M.MetadataRequestTopic(name="visible")],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True,
            ),
            10,
        )
        assert not md.authorized_operations
        ops = md.topics[0].authorized_operations
        assert set(ops) == {3, 4, 5, 6, 7, 8, 10, 11}
    with sasl_raw(broker, "admin") as raw:  # a super user may do everything on the cluster
        md = raw.request(
            M(
                topics=[],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=False,
            ),
            10,
        )
        assert set(md.authorized_operations) == {5, 7, 8, 9, 10, 11, 12}


def test_hosts_are_compared_in_javas_getHostAddress_form():
    from odradek.broker.network.authz import host_address

    assert host_address("127.0.0.1") == "127.0.0.1"
    assert host_address("::1") == "0:0:0:0:0:0:0:1"
    assert host_address("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1%eth0"
    assert host_address("2001:db8::ab:0") == "2001:db8:0:0:0:0:ab:0"
    assert host_address("::ffff:10.0.0.1") == "10.0.0.1"


def test_an_unknown_authorizer_class_stops_serve_with_one_line(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "serve",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "authorizer.class.name=com.example.MyAuthorizer",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("odradek: authorizer.class.name com.example.MyAuthorizer")
