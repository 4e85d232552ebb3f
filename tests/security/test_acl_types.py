"""ACL types: Kafka's codes and names, filter matching (ANY, MATCH, null fields), validation,
and the CreateAcls / DescribeAcls / DeleteAcls operations of the authorizer."""

from __future__ import annotations

import pytest

from odradek.security.acl import Authorizer
from odradek.security.acl_types import (
    AUTHORIZATION_ERRORS,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    MalformedAclRequest,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    group_by_pattern,
    request_creation,
    request_filter,
    validate_filter,
    validate_new_acl,
)
from odradek.wire.errors import ErrorCode

Op = AclOperation
T = ResourceType
P = PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def b(
    rt: ResourceType,
    name: str,
    pt: PatternType,
    principal: str = "User:bob",
    op: AclOperation = Op.READ,
) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, "*", op, ALLOW))


def test_codes_are_kafkas() -> None:
    assert [(m.name, int(m)) for m in ResourceType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("TOPIC", 2),
        ("GROUP", 3),
        ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6),
        ("USER", 7),
    ]
    assert [int(m) for m in PatternType] == [0, 1, 2, 3, 4]
    assert (Op.ALL, Op.DESCRIBE, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_TOKENS) == (2, 8, 12, 14)
    assert [int(m) for m in AclPermissionType] == [0, 1, 2, 3]
    assert (
        AUTHORIZATION_ERRORS[T.TRANSACTIONAL_ID] is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    assert AUTHORIZATION_ERRORS[T.GROUP] == 30


def test_names_as_security_utils() -> None:
    assert T.TRANSACTIONAL_ID.pascal == "TransactionalId"
    assert Op.DESCRIBE_CONFIGS.pascal == "DescribeConfigs" and ALLOW.pascal == "Allow"
    assert P.PREFIXED.pascal == "Prefixed"
    for text in ("TransactionalId", "TRANSACTIONALID", "transactional_id", "TRANSACTIONAL_ID"):
        assert T.parse(text) is T.TRANSACTIONAL_ID
    assert Op.parse("ClusterAction") is Op.CLUSTER_ACTION
    assert Op.parse("Frobnicate") is Op.UNKNOWN
    assert T.from_code(99) is T.UNKNOWN and Op.from_code(4) is Op.WRITE


ACLS = [
    b(T.TOPIC, "orders", P.LITERAL),
    b(T.TOPIC, "*", P.LITERAL),
    b(T.TOPIC, "ord", P.PREFIXED),
    b(T.TOPIC, "other", P.PREFIXED),
    b(T.GROUP, "orders", P.LITERAL, "User:alice", Op.DESCRIBE),
]


def names(flt: AclBindingFilter) -> list[tuple[str, str]]:
    return [(x.pattern.name, x.pattern.pattern_type.name) for x in ACLS if flt.matches(x)]


def test_pattern_filter_any_match_and_exact() -> None:
    any_orders = AclBindingFilter(ResourcePatternFilter(T.TOPIC, "orders", P.ANY))
    assert names(any_orders) == [("orders", "LITERAL")]
    match_orders = AclBindingFilter(ResourcePatternFilter(T.TOPIC, "orders", P.MATCH))
    assert names(match_orders) == [("orders", "LITERAL"), ("*", "LITERAL"), ("ord", "PREFIXED")]
    prefixed = AclBindingFilter(ResourcePatternFilter(T.TOPIC, None, P.PREFIXED))
    assert names(prefixed) == [("ord", "PREFIXED"), ("other", "PREFIXED")]
    exact_prefixed = AclBindingFilter(ResourcePatternFilter(T.TOPIC, "ord", P.PREFIXED))
    assert names(exact_prefixed) == [("ord", "PREFIXED")]
    assert len(names(AclBindingFilter())) == len(ACLS)
    assert names(AclBindingFilter(ResourcePatternFilter(T.ANY, "orders", P.LITERAL))) == [
        ("orders", "LITERAL"),
        ("orders", "LITERAL"),
    ]


def test_entry_filter_null_fields_and_exact_strings() -> None:
    alice = AclBindingFilter(entry=AccessControlEntryFilter(principal="User:alice"))
    assert names(alice) == [("orders", "LITERAL")]
    describe = AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.DESCRIBE))
    assert names(describe) == [("orders", "LITERAL")]
    deny = AclBindingFilter(entry=AccessControlEntryFilter(permission_type=DENY))
    assert names(deny) == []
    # a filter for a principal does not match the User:* ACLs that would apply to it
    wild = AclBinding(
        ResourcePattern(T.TOPIC, "t"), AccessControlEntry("User:*", "*", Op.READ, ALLOW)
    )
    assert not AccessControlEntryFilter(principal="User:bob").matches(wild.entry)
    assert not AccessControlEntryFilter(host="10.0.0.1").matches(wild.entry)


def test_indefinite_fields() -> None:
    exact = AclBindingFilter(
        ResourcePatternFilter(T.TOPIC, "t", P.LITERAL),
        AccessControlEntryFilter("User:bob", "*", Op.READ, ALLOW),
    )
    assert exact.matches_at_most_one()
    assert AclBindingFilter().find_indefinite_field() == "Resource type is ANY."
    assert (
        AclBindingFilter(ResourcePatternFilter(T.TOPIC, "t", P.MATCH)).find_indefinite_field()
        == "Resource pattern type is MATCH."
    )
    loose = AclBindingFilter(
        ResourcePatternFilter(T.TOPIC, "t", P.LITERAL), AccessControlEntryFilter()
    )
    assert loose.find_indefinite_field() == "Principal is NULL"


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (b(T.ANY, "t", P.LITERAL), "Invalid resourceType ANY"),
        (b(T.TOPIC, "t", P.MATCH), "Invalid patternType MATCH"),
        (b(T.TOPIC, "t", P.LITERAL, op=Op.ANY), "Invalid operation ANY"),
        (b(T.TOPIC, "", P.LITERAL), "Resource name should not be empty"),
        (
            b(T.CLUSTER, "c", P.LITERAL),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            b(T.TOPIC, "t", P.LITERAL, principal="bob"),
            "expected a string in format principalType:principalName",
        ),
        (
            AclBinding(
                ResourcePattern(T.TOPIC, "t"),
                AccessControlEntry("User:b", "*", Op.READ, AclPermissionType.ANY),
            ),
            "Invalid permissionType ANY",
        ),
    ],
)
def test_validate_new_acl(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message) as info:
        validate_new_acl(binding)
    assert info.value.error_code is ErrorCode.INVALID_REQUEST


def test_validate_filter() -> None:
    validate_filter(AclBindingFilter())
    with pytest.raises(InvalidAcl, match="Unknown patternFilter"):
        validate_filter(AclBindingFilter(ResourcePatternFilter(T.UNKNOWN)))
    with pytest.raises(InvalidAcl, match="Unknown entryFilter"):
        validate_filter(AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.UNKNOWN)))


def test_create_describe_delete() -> None:
    a = Authorizer()
    good, dup, bad = (
        b(T.TOPIC, "t", P.LITERAL),
        b(T.TOPIC, "t", P.LITERAL),
        b(T.TOPIC, "", P.LITERAL),
    )
    results = a.create_acls([good, dup, bad, b(T.GROUP, "g", P.PREFIXED)])
    assert results[:2] == [None, None] and isinstance(results[2], InvalidAcl) and results[3] is None
    assert len(a) == 2  # the duplicate is a success that adds nothing
    assert a.acls(AclBindingFilter(ResourcePatternFilter(T.GROUP))) == [b(T.GROUP, "g", P.PREFIXED)]
    # two filters matching the same ACL both report it; an invalid filter reports its error
    deleted = a.delete_acls(
        [
            AclBindingFilter(ResourcePatternFilter(T.TOPIC, "t", P.MATCH)),
            AclBindingFilter(entry=AccessControlEntryFilter(principal="User:bob")),
            AclBindingFilter(ResourcePatternFilter(T.UNKNOWN)),
        ]
    )
    assert deleted[0] == [good]
    assert deleted[1] == [good, b(T.GROUP, "g", P.PREFIXED)]
    assert isinstance(deleted[2], InvalidAcl)
    assert len(a) == 0 and a.delete_acls([AclBindingFilter()]) == [[]]


def test_request_filter_normalization_as_kafkas_request_classes() -> None:
    any_v0 = AclBindingFilter(ResourcePatternFilter(T.TOPIC, "t", P.ANY))
    assert request_filter(any_v0, 0).pattern.pattern_type is P.LITERAL
    assert request_filter(any_v0, 1) == any_v0
    with pytest.raises(MalformedAclRequest, match="Version 0"):
        request_filter(AclBindingFilter(ResourcePatternFilter(T.TOPIC, "t", P.PREFIXED)), 0)
    with pytest.raises(MalformedAclRequest, match="UNKNOWN"):
        request_filter(
            AclBindingFilter(
                entry=AccessControlEntryFilter(permission_type=AclPermissionType.UNKNOWN)
            ),
            2,
        )
    prefixed = b(T.TOPIC, "t", P.PREFIXED)
    assert request_creation(prefixed, 1) is prefixed
    with pytest.raises(MalformedAclRequest, match="Version 0"):
        request_creation(prefixed, 0)
    with pytest.raises(MalformedAclRequest, match="unknown"):
        request_creation(b(T.UNKNOWN, "t", P.LITERAL), 3)


def test_group_by_pattern_as_describe_acls_response() -> None:
    t, g = b(T.TOPIC, "t", P.LITERAL), b(T.GROUP, "g", P.PREFIXED)
    t2 = b(T.TOPIC, "t", P.LITERAL, principal="User:alice")
    grouped = group_by_pattern([t, g, t2, t])
    assert list(grouped) == [t.pattern, g.pattern]
    assert grouped[t.pattern] == [t.entry, t2.entry]
