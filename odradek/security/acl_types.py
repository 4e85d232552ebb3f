"""ACL value types with Kafka's codes, names and filter rules (common.acl, common.resource).

The enums carry Kafka's wire codes (CreateAcls/DescribeAcls/DeleteAcls v0-3 send them as int8).
``AclBinding`` is one ACL: a ``ResourcePattern`` (type, name, LITERAL or PREFIXED) and an
``AccessControlEntry`` (principal, host, operation, permission). ``AclBindingFilter`` is what
DescribeAcls and DeleteAcls carry: ``None`` fields and the ANY values match anything, and the MATCH
pattern type matches every ACL that would apply to the named resource (the literal, the ``*``
wildcard and every prefix), as Kafka's ``ResourcePatternFilter.matches``.

Names follow ``SecurityUtils``: Pascal case for storage and tools (``TransactionalId``,
``DescribeConfigs``, ``Allow``), parsing accepts that or the upper-case enum name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Self

from odradek.wire.errors import ErrorCode

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class _Named(IntEnum):
    """Kafka's enum naming: ``pascal`` for storage, ``parse`` for Pascal or upper-case names."""

    @property
    def pascal(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> Self:
        """The member named ``text`` (``TransactionalId``, ``TRANSACTIONAL_ID``,
        ``transactional_id``); UNKNOWN when there is none, as SecurityUtils does."""
        key = text.strip().upper()
        for member in cls:
            if key in (member.name, member.pascal.upper()):
                return member
        return cls(0)

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member for a wire code; UNKNOWN for codes this version does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation

# AclEntry.supportedOperations: what authorized-operations fields report, per resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER}
        | {_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    # Kafka 4's AclEntry: the configs operations came with the group configs (KIP-848)
    ResourceType.GROUP: frozenset(
        {_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
        | {_O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}

# AclEntry.authorizationError: the error a denial on this resource type answers with.
AUTHORIZATION_ERRORS: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def operations_bitfield(operations: set[AclOperation] | frozenset[AclOperation]) -> int:
    """The int32 of authorized-operations fields: bit ``code`` set per operation, as Kafka's
    ``Utils.to32BitField`` (Metadata v8+, DescribeGroups v3+, DescribeCluster)."""
    value = 0
    for op in operations:
        value |= 1 << int(op)
    return value


def operations_from_bitfield(value: int) -> set[AclOperation]:
    """The operations whose bits are set (``Utils.from32BitField``), unknown bits dropped."""
    return {op for op in AclOperation if value & (1 << int(op))}


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` split at the first colon, as ``SecurityUtils.parseKafkaPrincipal``."""
    kind, sep, name = text.partition(":")
    if not text or not sep:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return kind, name


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource an ACL applies to (Kafka's ResourcePattern): LITERAL or PREFIXED in stored ACLs,
    LITERAL in authorization requests."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.pascal}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who may (ALLOW) or may not (DENY) do what from where (Kafka's AccessControlEntry)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a pattern and an entry (Kafka's AclBinding)."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        e = self.entry
        return (
            f"(pattern={self.pattern}, principal={e.principal}, host={e.host}, "
            f"operation={e.operation.name}, permission={e.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ResourcePatternFilter; ``name=None`` matches any name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def is_unknown(self) -> bool:
        return (
            self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN
        )

    def matches(self, pattern: ResourcePattern) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type != pattern.resource_type
        ):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: every stored pattern that applies to the resource called ``name``.
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def find_indefinite_field(self) -> str | None:
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's AccessControlEntryFilter; ``None`` principal/host and ANY match anything.
    Principal and host compare as exact strings: a filter for ``User:alice`` does not match an
    ACL for ``User:*``."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or (
            self.permission_type == entry.permission_type
        )

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}"
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return f"Permission type is {self.permission_type.name}"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and each DeleteAcls filter carry (Kafka's AclBindingFilter)."""

    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return self.pattern.find_indefinite_field() or self.entry.find_indefinite_field()


ANY_FILTER = AclBindingFilter()


class InvalidAcl(ValueError):
    """A binding or filter CreateAcls/DeleteAcls refuses; answered as INVALID_REQUEST (42) with
    this message, as Kafka's AclControlManager and AclApis do."""

    error_code = ErrorCode.INVALID_REQUEST


def validate_new_acl(binding: AclBinding) -> None:
    """Raise ``InvalidAcl`` for a binding CreateAcls must refuse (AclApis + AclControlManager)."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {p.pattern_type.name}")
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {e.operation.name}")
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl(f"Invalid permissionType {e.permission_type.name}")
    if not p.name:
        raise InvalidAcl("Resource name should not be empty")
    if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        parse_principal(e.principal)
    except ValueError as exc:
        raise InvalidAcl(str(exc)) from None


def validate_filter(flt: AclBindingFilter) -> None:
    """Raise ``InvalidAcl`` for a DeleteAcls filter with UNKNOWN fields (AclControlManager)."""
    if flt.pattern.is_unknown():
        raise InvalidAcl("Unknown patternFilter.")
    if flt.entry.is_unknown():
        raise InvalidAcl("Unknown entryFilter.")


# ------------------------------------------------------------------------------ wire helpers


class MalformedAclRequest(ValueError):
    """A CreateAcls / DescribeAcls / DeleteAcls body Kafka's request classes refuse while parsing
    (UNKNOWN codes; v0 with a pattern type other than LITERAL or ANY): a protocol violation that
    closes the connection, not an error code."""


def request_filter(flt: AclBindingFilter, version: int) -> AclBindingFilter:
    """A DescribeAcls filter or DeleteAcls filter as Kafka's request normalizes it: v0 knows
    only literal patterns, so ANY becomes LITERAL there (a ``*`` ACL is literal too) and
    anything else is refused; UNKNOWN codes are refused in every version."""
    pattern = flt.pattern
    if version == 0:
        if pattern.pattern_type is PatternType.ANY:
            flt = AclBindingFilter(
                ResourcePatternFilter(pattern.resource_type, pattern.name, PatternType.LITERAL),
                flt.entry,
            )
        elif pattern.pattern_type is not PatternType.LITERAL:
            raise MalformedAclRequest(
                f"Version 0 does not support pattern type {pattern.pattern_type.name} "
                "(only LITERAL and ANY are supported)"
            )
    if (
        flt.pattern.pattern_type is PatternType.UNKNOWN
        or flt.pattern.resource_type is ResourceType.UNKNOWN
        or flt.entry.operation is AclOperation.UNKNOWN
        or flt.entry.permission_type is AclPermissionType.UNKNOWN
    ):
        raise MalformedAclRequest(f"Filters contain UNKNOWN elements: {flt}")
    return flt


def request_creation(binding: AclBinding, version: int) -> AclBinding:
    """A CreateAcls creation as Kafka's CreateAclsRequest checks it while parsing: v0 only
    LITERAL patterns; no UNKNOWN codes. (ANY / MATCH and names are checked later, per creation,
    by ``validate_new_acl``.)"""
    p, e = binding.pattern, binding.entry
    if version == 0 and p.pattern_type is not PatternType.LITERAL:
        raise MalformedAclRequest("Version 0 only supports literal resource pattern types")
    if (
        p.pattern_type is PatternType.UNKNOWN
        or p.resource_type is ResourceType.UNKNOWN
        or e.permission_type is AclPermissionType.UNKNOWN
        or e.operation is AclOperation.UNKNOWN
    ):
        raise MalformedAclRequest(f"CreatableAcls contain unknown elements: {binding}")
    return binding


def group_by_pattern(bindings: list[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """DescribeAcls' ``resources`` (DescribeAclsResponse.aclsResources): one entry per resource
    pattern with its ACLs, in first-seen order."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        entries = grouped.setdefault(binding.pattern, [])
        if binding.entry not in entries:
            entries.append(binding.entry)
    return grouped
