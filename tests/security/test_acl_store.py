"""ACL storage: Kafka's ZooKeeper layout and JSON (ZkData / AclEntry of Kafka 3.9), change
notifications, and the embedded broker's acls.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from odradek.security import acl_store
from odradek.security.acl import Authorizer
from odradek.security.acl_store import (
    AclFormatError,
    decode_acl_change,
    decode_local,
    decode_zk_acls,
    encode_acl_change,
    encode_local,
    encode_zk_acls,
    load_local,
    save_local,
    zk_acl_path,
    zk_acl_roots,
    zk_bindings,
    zk_group_by_node,
    zk_pattern_from_path,
    zk_plan,
)
from odradek.security.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Op = AclOperation
T = ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def entry(
    principal: str = "User:alice",
    op: AclOperation = Op.READ,
    perm: AclPermissionType = ALLOW,
    host: str = "*",
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def test_zk_paths_as_kafka() -> None:
    assert zk_acl_roots() == ["/kafka-acl", "/kafka-acl-extended/prefixed"]
    assert zk_acl_path(ResourcePattern(T.TOPIC, "topic-1", LIT)) == "/kafka-acl/Topic/topic-1"
    assert (
        zk_acl_path(ResourcePattern(T.CLUSTER, "kafka-cluster", LIT))
        == "/kafka-acl/Cluster/kafka-cluster"
    )
    assert (
        zk_acl_path(ResourcePattern(T.GROUP, "group-1", PRE))
        == "/kafka-acl-extended/prefixed/Group/group-1"
    )
    assert (
        zk_acl_path(ResourcePattern(T.TRANSACTIONAL_ID, "tx", LIT))
        == "/kafka-acl/TransactionalId/tx"
    )
    for pattern in (
        ResourcePattern(T.TOPIC, "*", LIT),
        ResourcePattern(T.DELEGATION_TOKEN, "a.b", PRE),
    ):
        assert zk_pattern_from_path(zk_acl_path(pattern)) == pattern
    for bad in (
        "/kafka-acl/Topic",
        "/kafka-acl/Nope/x",
        "/brokers/ids/1",
        "/kafka-acl-extended/prefixed/Topic/",
    ):
        with pytest.raises(AclFormatError):
            zk_pattern_from_path(bad)
    with pytest.raises(ValueError):
        zk_acl_path(ResourcePattern(T.TOPIC, "t", PatternType.MATCH))


def test_zk_node_json_as_acl_entry_writes_it() -> None:
    data = encode_zk_acls([entry()])
    assert (
        data == b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}'
    )
    many = [
        entry("User:bob", Op.DESCRIBE_CONFIGS, DENY, "10.0.0.1"),
        entry(),
        entry("User:*", Op.IDEMPOTENT_WRITE),
    ]
    decoded = decode_zk_acls(encode_zk_acls(many))
    assert sorted(decoded, key=str) == sorted(many, key=str)
    assert json.loads(encode_zk_acls(many))["acls"][0]["operation"] in {
        "Read",
        "IdempotentWrite",
        "DescribeConfigs",
    }


def test_zk_node_json_as_kafka_reads_it() -> None:
    # what Kafka's own writer produced (key order and spacing vary with its HashMap and Jackson)
    kafka = (
        b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny",'
        b'"operation": "Read","principal": "User:alice"}]}'
    )
    assert decode_zk_acls(kafka) == [entry(host="host1", perm=DENY)]
    # upper-case enum names are accepted too; unknown names read as UNKNOWN, as SecurityUtils does
    odd = (
        b'{"version":1,"acls":[{"host":"*","permissionType":"ALLOW","operation":"Frob",'
        b'"principal":"User:x"}]}'
    )
    assert decode_zk_acls(odd) == [AccessControlEntry("User:x", "*", Op.UNKNOWN, ALLOW)]
    assert decode_zk_acls(b"") == [] and decode_zk_acls(None) == []
    for bad in (
        b'{"version":2,"acls":[]}',
        b"not json",
        b'{"version":1,"acls":[{"host":"*"}]}',
        b'{"version":1}',
    ):
        with pytest.raises(AclFormatError):
            decode_zk_acls(bad)
    with pytest.raises(AclFormatError, match="principalType:principalName"):
        decode_zk_acls(
            b'{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Read","principal":"alice"}]}'
        )


def test_zk_bindings_and_grouping_round_trip() -> None:
    bindings = [
        AclBinding(ResourcePattern(T.TOPIC, "orders", LIT), entry()),
        AclBinding(ResourcePattern(T.TOPIC, "orders", LIT), entry("User:bob", Op.WRITE)),
        AclBinding(ResourcePattern(T.TOPIC, "orders", PRE), entry(perm=DENY)),
    ]
    nodes = zk_group_by_node(bindings)
    assert sorted(nodes) == ["/kafka-acl-extended/prefixed/Topic/orders", "/kafka-acl/Topic/orders"]
    back = [
        b for path, entries in nodes.items() for b in zk_bindings(path, encode_zk_acls(entries))
    ]
    assert sorted(back, key=str) == sorted(bindings, key=str)


def test_change_notifications_as_kafka() -> None:
    path, data = encode_acl_change(ResourcePattern(T.TOPIC, "orders", LIT))
    assert (path, data) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    path, data = encode_acl_change(ResourcePattern(T.TRANSACTIONAL_ID, "tx-", PRE))
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert (
        data
        == b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}'
    )
    assert decode_acl_change("/kafka-acl-extended-changes", data) == ResourcePattern(
        T.TRANSACTIONAL_ID, "tx-", PRE
    )
    # the name may contain the separator; only the first colon splits
    assert decode_acl_change("/kafka-acl-changes", b"Group:a:b") == ResourcePattern(
        T.GROUP, "a:b", LIT
    )
    for where, bad in (
        ("/kafka-acl-changes", b"orders"),
        ("/kafka-acl-changes", b"Nope:x"),
        (
            "/kafka-acl-extended-changes",
            b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}',
        ),
        (
            "/kafka-acl-extended-changes",
            b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"Bad"}',
        ),
        ("/elsewhere", b"TOPIC:x"),
    ):
        with pytest.raises(AclFormatError):
            decode_acl_change(where, bad)


BINDINGS = [
    AclBinding(ResourcePattern(T.GROUP, "g-", PRE), entry("User:bob", Op.READ, DENY, "10.1.1.1")),
    AclBinding(ResourcePattern(T.TOPIC, "orders", LIT), entry()),
    AclBinding(ResourcePattern(T.CLUSTER, "kafka-cluster", LIT), entry("User:admin", Op.ALTER)),
]


def test_local_file_round_trip_and_format(tmp_path: Path) -> None:
    assert load_local(str(tmp_path)) == []
    save_local(str(tmp_path), BINDINGS)
    assert sorted(load_local(str(tmp_path)), key=str) == sorted(BINDINGS, key=str)
    doc = json.loads((tmp_path / "acls.json").read_text())
    assert doc["version"] == 1
    assert doc["acls"][0] == {
        "resourceType": "Topic",
        "patternType": "Literal",
        "name": "orders",
        "principal": "User:alice",
        "host": "*",
        "operation": "Read",
        "permissionType": "Allow",
    }
    assert sorted(os.listdir(tmp_path)) == ["acls.json"]
    # what an authorizer loads from it decides as the ACLs say
    a = Authorizer(acls=load_local(str(tmp_path)))
    assert a.authorize("User:alice", "1.2.3.4", Op.DESCRIBE, T.TOPIC, "orders")
    save_local(str(tmp_path), [])
    assert load_local(str(tmp_path)) == []


def test_local_file_is_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_local(str(tmp_path), BINDINGS[:1])
    before = (tmp_path / "acls.json").read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(acl_store.os, "replace", crash)
    with pytest.raises(OSError):
        save_local(str(tmp_path), BINDINGS)
    assert (tmp_path / "acls.json").read_bytes() == before
    monkeypatch.undo()
    save_local(str(tmp_path), BINDINGS)  # a leftover tmp file from the crash is simply overwritten
    assert len(load_local(str(tmp_path))) == 3 and not (tmp_path / "acls.json.tmp").exists()


def test_local_file_errors() -> None:
    assert decode_local(encode_local([])) == []
    for bad in (
        b'{"version":7,"acls":[]}',
        b"{",
        b'{"version":1,"acls":[{"resourceType":"Any","patternType":"Literal","name":"x",'
        b'"principal":"User:a","host":"*","operation":"Read","permissionType":"Allow"}]}',
        b'{"version":1,"acls":[{"resourceType":"Topic","patternType":"Match","name":"x",'
        b'"principal":"User:a","host":"*","operation":"Read","permissionType":"Allow"}]}',
        b'{"version":1,"acls":[{"resourceType":"Topic"}]}',
    ):
        with pytest.raises(AclFormatError):
            decode_local(bad)


def test_zk_plan_writes_only_changed_resources_and_announces_them() -> None:
    orders_alice = AclBinding(ResourcePattern(T.TOPIC, "orders", LIT), entry())
    orders_bob = AclBinding(ResourcePattern(T.TOPIC, "orders", LIT), entry("User:bob"))
    group = AclBinding(ResourcePattern(T.GROUP, "g-", PRE), entry(op=Op.DESCRIBE))
    cluster = AclBinding(ResourcePattern(T.CLUSTER, "kafka-cluster", LIT), entry(op=Op.ALTER))
    writes, notes = zk_plan([orders_alice, group, cluster], [orders_alice, orders_bob, cluster])
    assert [(w.path, w.data is None) for w in writes] == [
        ("/kafka-acl/Topic/orders", False),
        ("/kafka-acl-extended/prefixed/Group/g-", True),
    ]
    assert writes[0].data is not None
    assert sorted(decode_zk_acls(writes[0].data), key=str) == sorted(
        [orders_alice.entry, orders_bob.entry], key=str
    )
    assert notes == [
        ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders"),
        (
            "/kafka-acl-extended-changes/acl_changes_",
            b'{"version":1,"resourceType":"GROUP","name":"g-","patternType":"PREFIXED"}',
        ),
    ]
    assert zk_plan([cluster], [cluster]) == ([], [])
