"""The ACL types to and from the fields of DescribeAcls / CreateAcls / DeleteAcls messages, shared
by the broker's handlers and the `odradek acls` client.

The messages spell a binding as resource_type, resource_name, a pattern type field (pattern_type,
or resource_pattern_type in a CreateAcls creation), principal, host, operation and
permission_type, and a filter as the same with `_filter` on the resource and principal/host
fields. Pattern types are passed in by the caller: v0 messages have none (LITERAL).
"""

from __future__ import annotations

from typing import Any

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


def binding_from_wire(resource: Any, acl: Any, pattern_type: PatternType) -> AclBinding:
    """The binding of a message's fields: `resource` holds resource_type and resource_name, `acl`
    principal, host, operation and permission_type (one struct may hold both)."""
    return AclBinding(
        ResourcePattern(
            ResourceType.from_code(resource.resource_type), resource.resource_name, pattern_type
        ),
        AccessControlEntry(
            acl.principal,
            acl.host,
            AclOperation.from_code(acl.operation),
            AclPermissionType.from_code(acl.permission_type),
        ),
    )


def filter_from_wire(f: Any, pattern_type: PatternType) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter."""
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.from_code(f.resource_type_filter), f.resource_name_filter, pattern_type
        ),
        AccessControlEntryFilter(
            f.principal_filter,
            f.host_filter,
            AclOperation.from_code(f.operation),
            AclPermissionType.from_code(f.permission_type),
        ),
    )


def entry_fields(e: AccessControlEntry) -> dict[str, Any]:
    return {
        "principal": e.principal,
        "host": e.host,
        "operation": int(e.operation),
        "permission_type": int(e.permission_type),
    }


def binding_fields(b: AclBinding, pattern_field: str = "pattern_type") -> dict[str, Any]:
    """The fields of a binding, the pattern type under `pattern_field`."""
    return {
        "resource_type": int(b.pattern.resource_type),
        "resource_name": b.pattern.name,
        pattern_field: int(b.pattern.pattern_type),
        **entry_fields(b.entry),
    }


def filter_fields(flt: AclBindingFilter) -> dict[str, Any]:
    """The fields of a DescribeAcls request or a DeleteAcls filter."""
    return {
        "resource_type_filter": int(flt.pattern.resource_type),
        "resource_name_filter": flt.pattern.name,
        "pattern_type_filter": int(flt.pattern.pattern_type),
        "principal_filter": flt.entry.principal,
        "host_filter": flt.entry.host,
        "operation": int(flt.entry.operation),
        "permission_type": int(flt.entry.permission_type),
    }
