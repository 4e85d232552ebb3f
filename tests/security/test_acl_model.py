"""The indexed authorizer against a brute-force model of the same rules (every ACL scanned for
every decision), over random ACL sets: the fast path (per-name and per-prefix-length lookups)
must decide exactly as the plain reading of StandardAuthorizer's rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.acl import Authorizer
from odradek.security.acl_types import (
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Op = AclOperation
TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
NAMES = ["", "a", "ab", "abc", "abd", "b", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:alice"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
OPS = [Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.CREATE]
OPS += [Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]
IMPLIES = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
}

bindings = st.builds(
    lambda rt, name, pt, principal, host, op, perm: AclBinding(
        ResourcePattern(rt, name or "a", pt), AccessControlEntry(principal, host, op, perm)
    ),
    st.sampled_from(TYPES),
    st.sampled_from(NAMES),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(OPS),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)


def model(
    acls: list[AclBinding],
    allow_everyone: bool,
    principal: str,
    host: str,
    op: AclOperation,
    rt: ResourceType,
    name: str,
) -> bool:
    applies = []
    for b in acls:
        p = b.pattern
        if p.resource_type != rt:
            continue
        if p.pattern_type is PatternType.LITERAL and p.name in (name, "*"):
            applies.append(b.entry)
        elif p.pattern_type is PatternType.PREFIXED and name.startswith(p.name):
            applies.append(b.entry)
    allowed = denied = False
    for e in applies:
        if e.principal not in (principal, "User:*") or e.host not in ("*", host):
            continue
        if e.permission_type is AclPermissionType.DENY:
            denied = denied or e.operation in (op, Op.ALL)
        else:
            allowed = allowed or e.operation in (op, Op.ALL) or e.operation in IMPLIES.get(op, ())
    if denied:
        return False
    if allowed:
        return True
    return allow_everyone and not applies


@settings(max_examples=200, deadline=None)
@given(
    acls=st.lists(bindings, max_size=25),
    allow_everyone=st.booleans(),
    principal=st.sampled_from(["User:alice", "User:bob", "Group:alice"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    rt=st.sampled_from(TYPES),
    name=st.sampled_from(["a", "ab", "abc", "abcd", "abd", "b", "ba", "*", "c"]),
    removed=st.integers(min_value=0, max_value=30),
)
def test_indexed_authorizer_decides_as_the_model(
    acls: list[AclBinding],
    allow_everyone: bool,
    principal: str,
    host: str,
    rt: ResourceType,
    name: str,
    removed: int,
) -> None:
    a = Authorizer((), allow_everyone, acls)
    live = list(dict.fromkeys(acls))
    if live and removed < len(live):  # exercise removal too, so the prefix-length index shrinks
        a.remove(live[removed])
        del live[removed]
    for op in OPS[1:]:
        expected = model(live, allow_everyone, principal, host, op, rt, name)
        assert a.authorize(principal, host, op, rt, name) is expected, (op, name)
    ops = {
        op
        for op in SUPPORTED_OPERATIONS[rt]
        if model(live, allow_everyone, principal, host, op, rt, name)
    }
    assert a.authorized_operations(principal, host, rt, name) == ops
