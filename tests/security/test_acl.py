"""The authorizer against the cases Kafka's StandardAuthorizerTest and BaseAuthorizerTest check."""

from __future__ import annotations

import logging

import pytest

from odradek.security.acl import Authorizer, parse_allow_everyone, parse_super_users
from odradek.security.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    operations_bitfield,
    operations_from_bitfield,
)

Op = AclOperation
T = ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
H = "127.0.0.1"


def acl(
    rt: ResourceType,
    name: str,
    pt: PatternType,
    principal: str,
    op: AclOperation,
    perm: AclPermissionType,
    host: str = "*",
) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


def authz(*bindings: AclBinding, allow_everyone: bool = False) -> Authorizer:
    return Authorizer(["User:superman"], allow_everyone, bindings)


def check(
    a: Authorizer, user: str, cases: list[tuple[AclOperation, ResourceType, str]], host: str = H
) -> list[bool]:
    return [a.authorize(f"User:{user}", host, op, rt, name) for op, rt, name in cases]


def test_config_parsing_as_standard_authorizer() -> None:
    assert parse_super_users(" User:alice ; User:chris;;") == {"User:alice", "User:chris"}
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("alice")
    assert parse_allow_everyone("TRUE ") and not parse_allow_everyone("yes")
    assert not parse_allow_everyone(None)
    a = Authorizer.from_config(
        {"super.users": "User:alice;User:chris", "allow.everyone.if.no.acl.found": "true"}
    )
    assert a.super_users == {"User:alice", "User:chris"} and a.allow_everyone_if_no_acl_found
    assert not Authorizer.from_config({}).allow_everyone_if_no_acl_found


def test_default_deny_and_allow_everyone_only_where_no_acl_applies() -> None:
    rule = acl(T.TOPIC, "topic1", LIT, "User:Alice", Op.READ, ALLOW)
    on = authz(rule, allow_everyone=True)
    # topic1 has an ACL (for someone else): deny; topic2 has none: the default allows.
    assert check(on, "Bob", [(Op.READ, T.TOPIC, "topic1"), (Op.READ, T.TOPIC, "topic2")]) == [
        False,
        True,
    ]
    off = authz(rule)
    assert check(off, "Bob", [(Op.READ, T.TOPIC, "topic1"), (Op.READ, T.TOPIC, "topic2")]) == [
        False,
        False,
    ]
    # a prefixed or wildcard ACL counts as "an ACL applies" too
    on.add(acl(T.TOPIC, "top", PRE, "User:Alice", Op.READ, ALLOW))
    assert check(on, "Bob", [(Op.READ, T.TOPIC, "topic2"), (Op.READ, T.TOPIC, "other")]) == [
        False,
        True,
    ]
    on.add(acl(T.TOPIC, "*", LIT, "User:Alice", Op.READ, ALLOW))
    assert check(on, "Bob", [(Op.READ, T.TOPIC, "other"), (Op.READ, T.GROUP, "g")]) == [False, True]


def test_super_users_bypass_deny_and_compare_as_strings() -> None:
    a = Authorizer(
        parse_super_users("User:superman;User:*"),
        False,
        [acl(T.TOPIC, "*", LIT, "User:*", Op.ALL, DENY)],
    )
    assert a.authorize("User:superman", H, Op.WRITE, T.TOPIC, "t")
    assert a.authorized_operations("User:superman", H, T.GROUP, "g") == {
        Op.READ,
        Op.DESCRIBE,
        Op.DELETE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    }
    # "User:*" in super.users names a user called "*", it is not a wildcard (Kafka compares strings)
    assert not a.authorize("User:bob", H, Op.WRITE, T.TOPIC, "t")


def foo_acl(op: AclOperation, perm: AclPermissionType) -> AclBinding:
    return acl(T.TOPIC, "foo_", PRE, "User:bob", op, perm)


@pytest.mark.parametrize("op", [Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_allow_implies_describe(op: AclOperation) -> None:
    assert authz(foo_acl(op, ALLOW)).authorize("User:bob", H, Op.DESCRIBE, T.TOPIC, "foo_bar")


@pytest.mark.parametrize(
    "op", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE]
)
def test_other_operations_do_not_imply_describe(op: AclOperation) -> None:
    assert not authz(foo_acl(op, ALLOW)).authorize("User:bob", H, Op.DESCRIBE, T.TOPIC, "foo_bar")


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_deny_implies_nothing(op: AclOperation) -> None:
    a = authz(foo_acl(op, DENY), foo_acl(Op.DESCRIBE, ALLOW))
    assert a.authorize("User:bob", H, Op.DESCRIBE, T.TOPIC, "foo_bar")
    assert not a.authorize("User:bob", H, op, T.TOPIC, "foo_bar")


def test_describe_configs_implied_by_alter_configs_only() -> None:
    assert authz(foo_acl(Op.ALTER_CONFIGS, ALLOW)).authorize(
        "User:bob", H, Op.DESCRIBE_CONFIGS, T.TOPIC, "foo_x"
    )
    assert not authz(foo_acl(Op.ALTER, ALLOW)).authorize(
        "User:bob", H, Op.DESCRIBE_CONFIGS, T.TOPIC, "foo_x"
    )
    a = authz(foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW))
    assert a.authorize("User:bob", H, Op.DESCRIBE_CONFIGS, T.TOPIC, "foo_x")
    assert not a.authorize("User:bob", H, Op.ALTER_CONFIGS, T.TOPIC, "foo_x")


def test_wildcard_principal_matches_anyone() -> None:
    a = authz(
        acl(T.GROUP, "bar", LIT, "User:*", Op.READ, DENY),
        acl(T.GROUP, "bar", LIT, "User:alice", Op.READ, ALLOW),
    )
    assert not a.authorize("User:alice", H, Op.READ, T.GROUP, "bar")
    b = authz(foo_acl(Op.READ, ALLOW))
    assert check(b, "bob", [(Op.READ, T.TOPIC, "foo_bar")]) == [True]
    assert check(b, "alice", [(Op.READ, T.TOPIC, "foo_bar")]) == [False]
    # User:* matches every principal, whatever its type (Kafka always adds User:* to the set of
    # principals an ACL may name); a Group:* ACL is not a wildcard
    c = authz(acl(T.TOPIC, "t", LIT, "User:*", Op.READ, ALLOW))
    assert c.authorize("Group:ops", H, Op.READ, T.TOPIC, "t")
    d = authz(acl(T.TOPIC, "t", LIT, "Group:*", Op.READ, ALLOW))
    assert not d.authorize("Group:ops", H, Op.READ, T.TOPIC, "t")


def test_deny_precedence_with_operation_all() -> None:
    a = authz(
        acl(T.TOPIC, "foo", LIT, "User:alice", Op.ALL, DENY),
        acl(T.TOPIC, "foo", PRE, "User:alice", Op.READ, ALLOW),
        acl(T.TOPIC, "foo", LIT, "User:*", Op.ALL, DENY),
        acl(T.TOPIC, "foo", PRE, "User:*", Op.DESCRIBE, ALLOW),
    )
    cases = [(Op.WRITE, T.TOPIC, "foo"), (Op.READ, T.TOPIC, "foo"), (Op.DESCRIBE, T.TOPIC, "foo")]
    assert check(a, "alice", [*cases, (Op.READ, T.TOPIC, "foobar")]) == [False, False, False, True]
    bob = [(Op.DESCRIBE, T.TOPIC, "foo"), (Op.READ, T.TOPIC, "foo"), (Op.WRITE, T.TOPIC, "foo")]
    bob += [(Op.DESCRIBE, T.TOPIC, "foobaz"), (Op.READ, T.TOPIC, "foobaz")]
    assert check(a, "bob", bob) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    a = authz(
        acl(T.TOPIC, "foo", LIT, "User:*", Op.ALL, ALLOW),
        acl(T.TOPIC, "bar", PRE, "User:alice", Op.ALL, ALLOW),
        acl(T.TOPIC, "baz", LIT, "User:bob", Op.ALL, ALLOW),
    )
    assert check(
        a,
        "alice",
        [
            (Op.WRITE, T.TOPIC, "foo"),
            (Op.DESCRIBE_CONFIGS, T.TOPIC, "bar"),
            (Op.DESCRIBE, T.TOPIC, "baz"),
        ],
    ) == [
        True,
        True,
        False,
    ]
    assert check(
        a,
        "bob",
        [(Op.WRITE, T.TOPIC, "foo"), (Op.READ, T.TOPIC, "bar"), (Op.DESCRIBE, T.TOPIC, "baz")],
    ) == [True, False, True]
    assert check(
        a,
        "malory",
        [(Op.DESCRIBE, T.TOPIC, "foo"), (Op.WRITE, T.TOPIC, "bar"), (Op.READ, T.TOPIC, "baz")],
    ) == [
        True,
        False,
        False,
    ]


def test_host_matching_is_wildcard_or_exact() -> None:
    h1, h2, local = "192.168.1.1", "192.168.1.2", "10.0.0.7"
    a = authz(
        acl(T.TOPIC, "foo", LIT, "User:alice", Op.READ, DENY, host=h1),
        acl(T.TOPIC, "foo", LIT, "User:alice", Op.READ, ALLOW),
        acl(T.TOPIC, "bar", LIT, "User:bob", Op.READ, ALLOW, host=h2),
        acl(T.TOPIC, "bar", LIT, "User:*", Op.DESCRIBE, ALLOW, host=local),
    )
    cases = [(Op.READ, T.TOPIC, "foo"), (Op.READ, T.TOPIC, "bar"), (Op.DESCRIBE, T.TOPIC, "bar")]
    assert check(a, "alice", cases, local) == [True, False, True]
    assert check(a, "alice", cases, h1) == [False, False, False]
    assert check(a, "alice", cases, h2) == [True, False, False]
    assert check(a, "bob", cases, local) == [False, False, True]
    assert check(a, "bob", cases, h1) == [False, False, False]
    assert check(a, "bob", cases, h2) == [False, True, True]


def test_many_acls_prefix_literal_and_wildcard() -> None:
    a = authz(
        acl(T.TOPIC, "green2", LIT, "User:*", Op.READ, ALLOW),
        acl(T.TOPIC, "green", PRE, "User:bob", Op.READ, ALLOW),
        acl(T.TOPIC, "betamax4", LIT, "User:bob", Op.READ, ALLOW),
        acl(T.TOPIC, "betamax", LIT, "User:bob", Op.READ, ALLOW),
        acl(T.TOPIC, "beta", PRE, "User:*", Op.READ, ALLOW),
        acl(T.TOPIC, "alpha", PRE, "User:*", Op.READ, ALLOW),
        acl(T.TOPIC, "alp", PRE, "User:bob", Op.READ, DENY),
        acl(T.GROUP, "*", LIT, "User:bob", Op.WRITE, ALLOW),
        acl(T.GROUP, "wheel", LIT, "User:*", Op.WRITE, DENY),
    )
    assert check(a, "bob", [(Op.READ, T.TOPIC, "green1"), (Op.WRITE, T.GROUP, "wheel")]) == [
        True,
        False,
    ]
    cases = [
        (Op.READ, T.TOPIC, "alpha"),
        (Op.WRITE, T.GROUP, "arbitrary"),
        (Op.READ, T.TOPIC, "ala"),
    ]
    assert check(a, "bob", cases) == [False, True, False]
    # a literal ACL whose name is a prefix of the resource does not apply to it
    assert check(a, "bob", [(Op.READ, T.TOPIC, "betamax4x"), (Op.READ, T.TOPIC, "betamax")]) == [
        True,
        True,
    ]
    assert check(a, "carol", [(Op.READ, T.TOPIC, "betamax"), (Op.READ, T.TOPIC, "gamma")]) == [
        True,
        False,
    ]


def test_prefix_acls() -> None:
    a = authz(
        acl(T.TOPIC, "fooa", PRE, "User:alice", Op.ALL, ALLOW),
        acl(T.TOPIC, "foobar", LIT, "User:bob", Op.ALL, ALLOW),
        acl(T.TOPIC, "f", PRE, "User:bob", Op.ALL, ALLOW),
    )
    assert check(
        a,
        "bob",
        [(Op.WRITE, T.TOPIC, "foobarr"), (Op.READ, T.TOPIC, "goobar"), (Op.READ, T.TOPIC, "fooa")],
    ) == [
        True,
        False,
        True,
    ]
    assert check(
        a,
        "alice",
        [(Op.DESCRIBE, T.TOPIC, "fooa"), (Op.WRITE, T.TOPIC, "bar"), (Op.READ, T.TOPIC, "baz")],
    ) == [
        True,
        False,
        False,
    ]


def test_resource_types_are_separate() -> None:
    a = authz(
        acl(T.TOPIC, "x", LIT, "User:bob", Op.READ, ALLOW),
        acl(T.GROUP, "x", PRE, "User:bob", Op.READ, DENY),
    )
    assert a.authorize("User:bob", H, Op.READ, T.TOPIC, "x")
    assert not a.authorize("User:bob", H, Op.READ, T.GROUP, "x")
    assert not a.authorize("User:bob", H, Op.READ, T.TRANSACTIONAL_ID, "x")


def test_remove_and_replace_keep_the_index_right() -> None:
    short = acl(T.TOPIC, "a", PRE, "User:bob", Op.READ, ALLOW)
    long = acl(T.TOPIC, "abc", PRE, "User:bob", Op.READ, DENY)
    a = authz(short, long)
    assert not a.authorize("User:bob", H, Op.READ, T.TOPIC, "abcd")
    assert a.remove(long) and not a.remove(long)
    assert a.authorize("User:bob", H, Op.READ, T.TOPIC, "abcd")
    assert a.add(long) and not a.add(long)
    assert len(a) == 2
    a.replace_all([short])
    assert list(a) == [short] and a.authorize("User:bob", H, Op.READ, T.TOPIC, "abcd")
    a.replace_all([])
    assert len(a) == 0 and not a.authorize("User:bob", H, Op.READ, T.TOPIC, "abcd")


def test_authorized_operations() -> None:
    a = authz(
        acl(T.TOPIC, "t", LIT, "User:bob", Op.WRITE, ALLOW),
        acl(T.TOPIC, "t", PRE, "User:bob", Op.ALTER_CONFIGS, ALLOW),
        acl(T.TOPIC, "*", LIT, "User:*", Op.DELETE, DENY),
        acl(T.GROUP, "g", LIT, "User:bob", Op.ALL, ALLOW),
        acl(T.CLUSTER, "kafka-cluster", LIT, "User:bob", Op.IDEMPOTENT_WRITE, ALLOW),
    )
    ops = a.authorized_operations("User:bob", H, T.TOPIC, "t")
    assert ops == {Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert a.authorized_operations("User:bob", H, T.GROUP, "g") == {
        Op.READ,
        Op.DESCRIBE,
        Op.DELETE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    }
    assert a.authorized_operations("User:bob", H, T.CLUSTER, "kafka-cluster") == {
        Op.IDEMPOTENT_WRITE
    }
    assert a.authorized_operations("User:eve", H, T.TOPIC, "t") == set()
    # the int32 bit field of the Metadata/DescribeGroups authorized-operations fields
    assert (
        operations_bitfield({Op.READ, Op.DESCRIBE, Op.DELETE})
        == (1 << 3) | (1 << 8) | (1 << 6)
        == 328
    )
    assert operations_from_bitfield(328) == {Op.READ, Op.DESCRIBE, Op.DELETE}


U1, H1, H2 = "User:user1", "192.168.1.1", "192.168.1.2"


def by_type(
    a: Authorizer, op: AclOperation, rt: ResourceType, principal: str = U1, host: str = H1
) -> bool:
    return a.authorize_by_resource_type(principal, host, op, rt)


def test_by_resource_type_add_remove_and_deny_precedence() -> None:
    a = authz()
    allow_read = acl(T.TOPIC, "sb1", LIT, U1, Op.READ, ALLOW, host=H1)
    deny_read = acl(T.TOPIC, "sb1", LIT, U1, Op.READ, DENY, host=H1)
    assert not by_type(a, Op.READ, T.TOPIC)
    a.add(allow_read)
    assert by_type(a, Op.READ, T.TOPIC)
    a.add(deny_read)
    assert not by_type(a, Op.READ, T.TOPIC)
    a.remove(deny_read)
    assert by_type(a, Op.READ, T.TOPIC)
    a.remove(allow_read)
    assert not by_type(a, Op.READ, T.TOPIC)


def test_by_resource_type_unrelated_deny_does_not_dominate() -> None:
    a = authz(
        acl(T.TOPIC, "sb1", LIT, U1, Op.READ, DENY, host=H1),
        acl(T.TOPIC, "sb1", LIT, "User:user2", Op.READ, DENY, host=H1),
        acl(T.TOPIC, "sb1", LIT, U1, Op.WRITE, DENY, host=H2),
        acl(T.TOPIC, "sb1", LIT, "User:user2", Op.READ, DENY, host=H2),
        acl(T.TOPIC, "sb1", LIT, U1, Op.READ, ALLOW, host=H2),
        acl(T.TOPIC, "sb2", LIT, U1, Op.READ, DENY, host=H2),
        acl(T.GROUP, "s", PRE, U1, Op.READ, DENY, host=H2),
    )
    for rt in (T.TOPIC, T.GROUP, T.TRANSACTIONAL_ID, T.CLUSTER):
        assert not by_type(a, Op.READ, rt, host=H1)
    assert by_type(a, Op.READ, T.TOPIC, host=H2)


def test_by_resource_type_prefixed_deny_dominates() -> None:
    a = authz()

    def add(name: str, perm: AclPermissionType) -> None:
        a.add(acl(T.GROUP, name, PRE, U1, Op.READ, perm, host=H1))

    add("abcde", ALLOW)
    assert by_type(a, Op.READ, T.GROUP)
    add("abcd", DENY)
    assert not by_type(a, Op.READ, T.GROUP)
    add("abc", ALLOW)
    assert by_type(a, Op.READ, T.GROUP)
    add("a", DENY)
    assert not by_type(a, Op.READ, T.GROUP)
    add("ab", ALLOW)
    assert not by_type(a, Op.READ, T.GROUP)


def test_by_resource_type_wildcard_deny_dominates() -> None:
    a = authz(acl(T.GROUP, "hello", PRE, U1, Op.WRITE, ALLOW, host=H1))
    assert by_type(a, Op.WRITE, T.GROUP)
    a.add(acl(T.GROUP, "*", LIT, U1, Op.WRITE, DENY, host=H1))
    assert not by_type(a, Op.WRITE, T.GROUP)
    a.add(acl(T.GROUP, "*", LIT, U1, Op.WRITE, ALLOW, host=H1))
    a.add(acl(T.GROUP, "aloha", LIT, U1, Op.WRITE, ALLOW, host=H1))
    assert not by_type(a, Op.WRITE, T.GROUP)


def test_by_resource_type_all_operation_host_and_principal_wildcards() -> None:
    a = authz(
        acl(T.TOPIC, "sb1", LIT, U1, Op.WRITE, DENY, host=H1),
        acl(T.TOPIC, "sb1", LIT, U1, Op.ALL, ALLOW, host=H1),
    )
    assert by_type(a, Op.READ, T.TOPIC)
    a.add(acl(T.TOPIC, "sb1", LIT, U1, Op.ALL, DENY, host=H1))
    assert not by_type(a, Op.READ, T.TOPIC)

    b = authz(acl(T.TOPIC, "sb2", LIT, "User:*", Op.READ, ALLOW, host="*"))
    assert by_type(b, Op.READ, T.TOPIC, principal="User:user2", host=H2)
    b.add(acl(T.TOPIC, "sb2", LIT, "User:*", Op.READ, DENY, host="*"))
    assert not by_type(b, Op.READ, T.TOPIC, principal="User:user2", host=H2)
    # implied operations do not count here: WRITE on a topic does not make DESCRIBE "somewhere"
    c = authz(acl(T.TOPIC, "t", LIT, U1, Op.WRITE, ALLOW))
    assert not by_type(c, Op.DESCRIBE, T.TOPIC)


def test_by_resource_type_super_user_default_and_bad_arguments() -> None:
    a = authz(acl(T.TOPIC, "*", LIT, "User:*", Op.ALL, DENY))
    assert by_type(a, Op.WRITE, T.TOPIC, principal="User:superman")
    assert not by_type(a, Op.WRITE, T.TOPIC)
    assert by_type(authz(allow_everyone=True), Op.WRITE, T.TOPIC)
    with pytest.raises(ValueError):
        by_type(a, Op.ANY, T.TOPIC)
    with pytest.raises(ValueError):
        by_type(a, Op.READ, T.ANY)


def test_denials_are_audited_on_the_authorizer_logger(caplog: pytest.LogCaptureFixture) -> None:
    a = authz()
    with caplog.at_level(logging.INFO, logger="odradek.authorizer"):
        assert not a.authorize("User:eve", H, Op.READ, T.TOPIC, "secret")
        assert not a.authorize("User:eve", H, Op.READ, T.TOPIC, "quiet", log_if_denied=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.authorizer"]
    expected = (
        "Principal = User:eve is Denied operation = READ from host = 127.0.0.1 on resource = "
    )
    assert lines == [expected + "Topic:LITERAL:secret"]


def test_lookup_does_not_scan_unrelated_acls() -> None:
    # 20k literal ACLs on other topics: a decision still only looks at its own buckets
    many = [acl(T.TOPIC, f"t{i}", LIT, "User:bob", Op.READ, ALLOW) for i in range(20_000)]
    a = authz(*many, acl(T.TOPIC, "t1", PRE, "User:bob", Op.READ, DENY))
    assert a._applicable(T.TOPIC, "t5") == [a._literal[(T.TOPIC, "t5")]]
    assert len(a._applicable(T.TOPIC, "t10")) == 2  # literal t10 + prefixed t1
    assert not a.authorize("User:bob", H, Op.READ, T.TOPIC, "t10")
    assert a.authorize("User:bob", H, Op.READ, T.TOPIC, "t20")


def test_unknown_permission_read_back_from_a_store_fails_closed() -> None:
    odd = AclBinding(
        ResourcePattern(T.TOPIC, "t"),
        AccessControlEntry("User:bob", "*", Op.READ, AclPermissionType.UNKNOWN),
    )
    a = authz(odd, acl(T.TOPIC, "t", LIT, "User:bob", Op.ALL, ALLOW))
    assert not a.authorize("User:bob", H, Op.READ, T.TOPIC, "t")
    assert a.authorize("User:bob", H, Op.WRITE, T.TOPIC, "t")
