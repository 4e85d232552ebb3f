"""ACL filter matching and names checked against Kafka's own classes (kafka-clients 3.9 via the
Java harness): AclBindingFilter.matches over thousands of filter/binding pairs, and
SecurityUtils' names and parsing of every enum value."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TypeVar

import pytest

from compat_tests.java_harness import JavaPrograms
from odradek.security.acl import Authorizer
from odradek.security.acl_types import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
NAMES = ["orders", "ord", "orders-eu", "o", "*", "other", "ORDERS"]
PRINCIPALS = ["User:alice", "User:*", "User:bob", "Group:alice"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
T = TypeVar("T")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(tmp_path_factory.mktemp("acl-oracle"), source_dir=JAVA_SOURCES)


def ask(oracle: JavaPrograms, lines: list[str]) -> list[str]:
    rc, out, err = oracle.run("AclOracle", input="\n".join(lines) + "\n", timeout=120)
    assert rc == 0, err
    return out.splitlines()


def _or(rnd: random.Random, wildcard: T, same: T, values: list[T]) -> T:
    """The wildcard (None / ANY), the binding's own value or any value, so that both outcomes
    are common."""
    x = rnd.random()
    return wildcard if x < 0.4 else same if x < 0.7 else rnd.choice(values)


def cases(n: int) -> list[tuple[AclBindingFilter, AclBinding]]:
    rnd = random.Random(14)
    concrete_ops = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]
    out = []
    for _ in range(n):
        binding = AclBinding(
            ResourcePattern(
                rnd.choice([ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER]),
                rnd.choice(NAMES),
                rnd.choice([PatternType.LITERAL, PatternType.PREFIXED]),
            ),
            AccessControlEntry(
                rnd.choice(PRINCIPALS),
                rnd.choice(HOSTS),
                rnd.choice(concrete_ops),
                rnd.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
            ),
        )
        p, e = binding.pattern, binding.entry
        flt = AclBindingFilter(
            ResourcePatternFilter(
                _or(
                    rnd, ResourceType.ANY, p.resource_type, [ResourceType.TOPIC, ResourceType.GROUP]
                ),
                _or(rnd, None, p.name, NAMES),
                rnd.choice(
                    [PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]
                ),
            ),
            AccessControlEntryFilter(
                _or(rnd, None, e.principal, PRINCIPALS),
                _or(rnd, None, e.host, HOSTS),
                _or(rnd, AclOperation.ANY, e.operation, [AclOperation.READ, AclOperation.ALL]),
                _or(rnd, AclPermissionType.ANY, e.permission_type, [AclPermissionType.DENY]),
            ),
        )
        out.append((flt, binding))
    return out


def _match_line(flt: AclBindingFilter, b: AclBinding) -> str:
    p, e, fp, fe = b.pattern, b.entry, flt.pattern, flt.entry
    fields = [
        "MATCH",
        int(fp.resource_type),
        fp.name if fp.name is not None else "-",
        int(fp.pattern_type),
        fe.principal or "-",
        fe.host or "-",
        int(fe.operation),
        int(fe.permission_type),
        int(p.resource_type),
        p.name,
        int(p.pattern_type),
        e.principal,
        e.host,
        int(e.operation),
        int(e.permission_type),
    ]
    return "\t".join(map(str, fields))


def test_filter_matching_agrees_with_kafka(oracle: JavaPrograms) -> None:
    pairs = cases(4000)
    kafka = ask(oracle, [_match_line(f, b) for f, b in pairs])
    ours = ["1" if f.matches(b) else "0" for f, b in pairs]
    mismatches = [
        (str(f), str(b), k) for (f, b), k, o in zip(pairs, kafka, ours, strict=True) if k != o
    ]
    assert mismatches == []
    assert 400 < ours.count("1") < 3600  # the pairs exercise both outcomes


def test_names_and_parsing_agree_with_kafka(oracle: JavaPrograms) -> None:
    kafka = ask(oracle, ["NAMES"])
    ours = [f"R {int(t)} {t.pascal}" for t in ResourceType]
    ours += [f"O {int(o)} {o.pascal}" for o in AclOperation]
    ours += [f"P {int(p)} {p.pascal}" for p in AclPermissionType]
    ours += [f"T {int(p)} {p.name}" for p in PatternType]
    assert kafka == ours
    spellings = []
    for kind, enum in (("R", ResourceType), ("O", AclOperation), ("P", AclPermissionType)):
        for member in enum:
            for text in (
                member.pascal,
                member.pascal.upper(),
                member.name,
                member.pascal.lower(),
                "Nope",
            ):
                spellings.append((kind, enum, text))
    kafka_codes = ask(oracle, [f"PARSE\t{kind}\t{text}" for kind, _, text in spellings])
    for (_, enum, text), code in zip(spellings, kafka_codes, strict=True):
        ours_code = int(enum.parse(text))
        # we also read the enum's own name (TRANSACTIONAL_ID, as Kafka's change events write it)
        assert ours_code == int(code) or (int(code) == 0 and text.upper() == enum(ours_code).name)


BY_TYPE_NAMES = ["a", "ab", "abc", "abd", "b", "*", "h", "hardcode", "hard"]


def test_authorize_by_resource_type_agrees_with_kafka(oracle: JavaPrograms) -> None:
    """Kafka's default Authorizer.authorizeByResourceType, run over the same ACLs, with its
    "hardcode" probe answered by our authorize (which test_acl_model checks on its own)."""
    rnd = random.Random(679)
    ops = [AclOperation.READ, AclOperation.WRITE, AclOperation.ALL, AclOperation.DESCRIBE]
    lines, ours = [], []
    for _ in range(1500):
        acls = [
            AclBinding(
                ResourcePattern(
                    rnd.choice([ResourceType.TOPIC, ResourceType.GROUP]),
                    rnd.choice(BY_TYPE_NAMES),
                    rnd.choice([PatternType.LITERAL, PatternType.PREFIXED]),
                ),
                AccessControlEntry(
                    rnd.choice(["User:alice", "User:*", "User:bob"]),
                    rnd.choice(["*", "10.0.0.1", "10.0.0.2"]),
                    rnd.choice(ops),
                    rnd.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
                ),
            )
            for _ in range(rnd.randint(0, 8))
        ]
        op = rnd.choice(ops[:2])
        rt = rnd.choice([ResourceType.TOPIC, ResourceType.GROUP])
        a = Authorizer((), rnd.random() < 0.2, acls)
        hardcode = a.authorize("User:alice", "10.0.0.1", op, rt, "hardcode", log_if_denied=False)
        fields: list[object] = ["BYTYPE", int(hardcode), "User:alice", "10.0.0.1", int(op), int(rt)]
        for b in acls:
            p, e = b.pattern, b.entry
            fields += [int(p.resource_type), p.name, int(p.pattern_type), e.principal, e.host]
            fields += [int(e.operation), int(e.permission_type)]
        lines.append("\t".join(map(str, fields)))
        ours.append("1" if a.authorize_by_resource_type("User:alice", "10.0.0.1", op, rt) else "0")
    kafka = ask(oracle, lines)
    mismatches = [line for line, k, o in zip(lines, kafka, ours, strict=True) if k != o]
    assert mismatches == []
    assert 300 < ours.count("1") < 1200
