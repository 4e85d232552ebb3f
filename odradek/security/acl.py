"""The ACL authorizer, with the semantics of Kafka's StandardAuthorizer (KRaft) and AclAuthorizer.

Sans-IO: it holds the ACLs in memory and answers questions; loading and persisting them is the
caller's job (``acl_store``). The rules, as ``StandardAuthorizerData`` applies them:

- a principal listed in ``super.users`` (``;``-separated ``Type:name``, compared as strings, so
  ``User:*`` there only names a user called ``*``) may do anything;
- the ACLs that apply to a resource are its LITERAL ACLs, the LITERAL ``*`` wildcard ACLs of its
  type and the PREFIXED ACLs whose name starts the resource's name;
- of those, an entry matches when its principal is the caller's or ``User:*``, its host is ``*``
  or exactly the client address, and its operation is the one asked for or ALL; an ALLOW entry
  for READ, WRITE, DELETE or ALTER also grants DESCRIBE, and one for ALTER_CONFIGS also grants
  DESCRIBE_CONFIGS (a DENY entry never implies anything);
- any matching DENY wins; else any matching ALLOW allows; else, when no ACL at all applies to the
  resource, ``allow.everyone.if.no.acl.found`` decides (default false); else deny.

Lookups never scan all ACLs: literal and wildcard ACLs are found by (type, name), prefixed ones by
(type, name[:n]) for each prefix length ``n`` that some prefixed ACL of that type has.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

from odradek.security.acl_types import (
    ANY_FILTER,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
    validate_filter,
    validate_new_acl,
)

log = logging.getLogger(__name__)
audit_log = logging.getLogger("odradek.authorizer")

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE}
    | {AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

_Key = tuple[ResourceType, str]
K = TypeVar("K")
V = TypeVar("V")


def parse_super_users(value: object) -> frozenset[str]:
    """``super.users`` as StandardAuthorizer reads it: split on ``;``, trimmed, empties dropped,
    each a ``Type:name`` principal (ValueError otherwise)."""
    if value is None:
        return frozenset()
    users = {v.strip() for v in str(value).split(";") if v.strip()}
    for user in users:
        parse_principal(user)
    return frozenset(users)


def parse_allow_everyone(value: object) -> bool:
    """``allow.everyone.if.no.acl.found`` as Java's Boolean.parseBoolean: only "true" (any case)."""
    return value is not None and str(value).strip().lower() == "true"


def _entry_result(
    entry: AccessControlEntry, principal: str, host: str, operation: AclOperation
) -> AclPermissionType | None:
    """ALLOW or DENY when the entry applies to (principal, host, operation), else None.
    The resource name is assumed to match already (StandardAuthorizerData.findResult)."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    if entry.operation is not AclOperation.ALL and entry.operation != operation:
        if entry.permission_type is not AclPermissionType.ALLOW:
            return None
        if operation is AclOperation.DESCRIBE:
            if entry.operation not in _IMPLIES_DESCRIBE:
                return None
        elif operation is AclOperation.DESCRIBE_CONFIGS:
            if entry.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    # Anything but ALLOW denies: an entry read back with an unknown permission fails closed.
    if entry.permission_type is AclPermissionType.ALLOW:
        return AclPermissionType.ALLOW
    return AclPermissionType.DENY


class Authorizer:
    """ACLs in memory plus ``super.users`` and ``allow.everyone.if.no.acl.found``.

    Principals are ``Type:name`` strings (``User:alice``); hosts are the client's address as the
    broker sees it (Kafka compares ``InetAddress.getHostAddress()``, so IPv6 is written out in full,
    ``0:0:0:0:0:0:0:1``). Everything is synchronous: one writer, no awaits.
    """

    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        acls: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: dict[AclBinding, None] = {}
        self._literal: dict[_Key, dict[AccessControlEntry, None]] = {}
        self._prefixed: dict[_Key, dict[AccessControlEntry, None]] = {}
        self._prefix_length_counts: dict[ResourceType, Counter[int]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._by_type: dict[ResourceType, dict[AclBinding, None]] = {}
        for binding in acls:
            self.add(binding)

    @classmethod
    def from_config(
        cls, config: Mapping[str, object], acls: Iterable[AclBinding] = ()
    ) -> Authorizer:
        """From the broker's keys ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        return cls(
            parse_super_users(config.get(SUPER_USERS_CONFIG)),
            parse_allow_everyone(config.get(ALLOW_EVERYONE_CONFIG)),
            acls,
        )

    # ----------------------------------------------------------------- the ACL set

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(list(self._bindings))

    def __contains__(self, binding: object) -> bool:
        return binding in self._bindings

    def add(self, binding: AclBinding) -> bool:
        """Add one (already valid) binding; False when it was there already."""
        if binding in self._bindings:
            return False
        pattern = binding.pattern
        if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"cannot store an ACL with pattern type {pattern.pattern_type.name}")
        self._bindings[binding] = None
        self._by_type.setdefault(pattern.resource_type, {})[binding] = None
        key = (pattern.resource_type, pattern.name)
        if pattern.pattern_type is PatternType.LITERAL:
            self._literal.setdefault(key, {})[binding.entry] = None
        else:
            self._prefixed.setdefault(key, {})[binding.entry] = None
            self._count_prefix_length(pattern.resource_type, len(pattern.name), +1)
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Remove one binding; False when it was not there."""
        if binding not in self._bindings:
            return False
        pattern = binding.pattern
        del self._bindings[binding]
        self._discard(self._by_type, pattern.resource_type, binding)
        key = (pattern.resource_type, pattern.name)
        if pattern.pattern_type is PatternType.LITERAL:
            self._discard(self._literal, key, binding.entry)
        else:
            self._discard(self._prefixed, key, binding.entry)
            self._count_prefix_length(pattern.resource_type, len(pattern.name), -1)
        return True

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Swap in a whole new ACL set (a reload from the store)."""
        fresh = Authorizer(self.super_users, self.allow_everyone_if_no_acl_found, bindings)
        self._bindings, self._literal, self._prefixed = (
            fresh._bindings,
            fresh._literal,
            fresh._prefixed,
        )
        self._prefix_length_counts = fresh._prefix_length_counts
        self._prefix_lengths, self._by_type = fresh._prefix_lengths, fresh._by_type

    def acls(self, flt: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The bindings the filter matches, in insertion order (DescribeAcls)."""
        return [b for b in self._bindings if flt.matches(b)]

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[InvalidAcl | None]:
        """CreateAcls: one result per binding, None for success. An ACL that exists already is a
        success that changes nothing (AclControlManager.createAcls)."""
        results: list[InvalidAcl | None] = []
        for binding in bindings:
            try:
                validate_new_acl(binding)
            except InvalidAcl as exc:
                results.append(exc)
                continue
            self.add(binding)
            results.append(None)
        return results

    def delete_acls(
        self, filters: Iterable[AclBindingFilter]
    ) -> list[list[AclBinding] | InvalidAcl]:
        """DeleteAcls: per filter, the bindings it matched (or the error for an invalid filter).
        Every filter sees the ACLs as they were before the request, so a binding two filters
        match is reported by both, as in AclControlManager.deleteAcls."""
        snapshot = list(self._bindings)
        results: list[list[AclBinding] | InvalidAcl] = []
        doomed: dict[AclBinding, None] = {}
        for flt in filters:
            try:
                validate_filter(flt)
            except InvalidAcl as exc:
                results.append(exc)
                continue
            matched = [b for b in snapshot if flt.matches(b)]
            doomed.update(dict.fromkeys(matched))
            results.append(matched)
        for binding in doomed:
            self.remove(binding)
        return results

    # ----------------------------------------------------------------- decisions

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the resource?"""
        if principal in self.super_users:
            return True
        allowed = self._decide(self._applicable(resource_type, name), principal, host, operation)
        if not allowed:
            level = logging.INFO if log_if_denied else logging.DEBUG
            if audit_log.isEnabledFor(level):
                audit_log.log(
                    level,
                    "Principal = %s is Denied operation = %s from host = %s on resource = %s",
                    principal,
                    operation.name,
                    host,
                    ResourcePattern(resource_type, name),
                )
        return allowed

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> set[AclOperation]:
        """The operations of the resource type (AclEntry.supportedOperations) this principal may
        do on the resource: what Metadata, DescribeGroups and DescribeCluster report
        (AuthHelper.authorizedOperations; ``operations_bitfield`` turns it into the int32)."""
        supported = SUPPORTED_OPERATIONS.get(resource_type, frozenset())
        if principal in self.super_users:
            return set(supported)
        applicable = self._applicable(resource_type, name)
        return {op for op in supported if self._decide(applicable, principal, host, op)}

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Could the principal do ``operation`` on some resource of this type (KIP-679, Kafka's
        Authorizer.authorizeByResourceType)? Used by InitProducerId without a transactional id:
        IDEMPOTENT_WRITE on the cluster or WRITE on any topic.

        Allowed when a literal resource named ``hardcode`` is allowed (super users, the
        no-ACL default), or an ALLOW ACL for the operation or ALL exists that no DENY dominates:
        a LITERAL ``*`` DENY denies everything, a LITERAL ``*`` ALLOW allows, a LITERAL allow is
        dominated by the same LITERAL deny or a PREFIXED deny on a prefix of its name, a PREFIXED
        allow by a PREFIXED deny on a prefix of its name. Implied operations do not count here.
        """
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(
                f"authorize_by_resource_type needs a concrete type, not {resource_type.name}"
            )
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(
                f"authorize_by_resource_type needs a concrete operation, not {operation.name}"
            )
        if self.authorize(
            principal, host, operation, resource_type, "hardcode", log_if_denied=False
        ):
            return True
        deny: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        allow: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        wildcard_allow = False
        for binding in self._by_type.get(resource_type, {}):
            entry, pattern = binding.entry, binding.pattern
            if entry.host not in (host, WILDCARD_HOST):
                continue
            if entry.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if entry.operation not in (operation, AclOperation.ALL):
                continue
            wildcard = (
                pattern.pattern_type is PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE
            )
            if entry.permission_type is AclPermissionType.DENY:
                if wildcard:
                    return False
                deny[pattern.pattern_type].add(pattern.name)
            elif entry.permission_type is AclPermissionType.ALLOW:
                if wildcard:
                    wildcard_allow = True
                else:
                    allow[pattern.pattern_type].add(pattern.name)
        if wildcard_allow:
            return True
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                prefixes_denied = deny[PatternType.PREFIXED]
                if not any(name[:n] in prefixes_denied for n in range(1, len(name) + 1)):
                    return True
        return False

    # ----------------------------------------------------------------- internals

    def _applicable(
        self, resource_type: ResourceType, name: str
    ) -> list[dict[AccessControlEntry, None]]:
        """The entry groups of every ACL that applies to the literal resource (type, name)."""
        groups: list[dict[AccessControlEntry, None]] = []
        literal = self._literal.get((resource_type, name))
        if literal:
            groups.append(literal)
        if name != WILDCARD_RESOURCE:
            wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard:
                groups.append(wildcard)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            prefixed = self._prefixed.get((resource_type, name[:length]))
            if prefixed:
                groups.append(prefixed)
        return groups

    def _decide(
        self,
        groups: list[dict[AccessControlEntry, None]],
        principal: str,
        host: str,
        operation: AclOperation,
    ) -> bool:
        allowed = False
        for group in groups:
            for entry in group:
                result = _entry_result(entry, principal, host, operation)
                if result is AclPermissionType.DENY:
                    return False
                if result is AclPermissionType.ALLOW:
                    allowed = True
        if allowed:
            return True
        # No ACL applies to the resource at all: the configured default. Some apply, none match:
        # deny (StandardAuthorizerData's MatchingRuleBuilder).
        return self.allow_everyone_if_no_acl_found and not groups

    def _count_prefix_length(self, resource_type: ResourceType, length: int, delta: int) -> None:
        counts = self._prefix_length_counts.setdefault(resource_type, Counter())
        counts[length] += delta
        if counts[length] <= 0:
            del counts[length]
        self._prefix_lengths[resource_type] = tuple(sorted(counts))

    @staticmethod
    def _discard(index: dict[K, dict[V, None]], key: K, item: V) -> None:
        bucket = index.get(key)
        if bucket is not None:
            bucket.pop(item, None)
            if not bucket:
                del index[key]
