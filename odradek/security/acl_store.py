"""ACL storage formats: Kafka's ZooKeeper layout and odradek's local ``acls.json``.

ZooKeeper, as Kafka 3.9's ZkAclStore / AclEntry / ZkAclChangeStore write it (ZkData.scala):

- LITERAL ACLs of a resource live in ``/kafka-acl/<ResourceType>/<name>``, PREFIXED ones in
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; ``<ResourceType>`` is Pascal case
  (``Topic``, ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``, ``User``).
- The node's data is compact JSON, one object per entry, names in Pascal case::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                          "operation":"Read","host":"*"}]}

- A change is announced by a sequential node ``acl_changes_<10 digits>`` under
  ``/kafka-acl-changes`` for LITERAL patterns, data ``TOPIC:orders`` (the enum name, a colon, the
  resource name), or under ``/kafka-acl-extended-changes`` for the others, data
  ``{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}``. A broker
  that sees one re-reads that resource's node.

Local (embedded mode): ``acls.json`` in the data dir, rewritten whole on every change with a
temporary file, fsync, rename and a directory fsync, so a crash leaves the old or the new set::

    {"version":1,"acls":[{"resourceType":"Topic","patternType":"Literal","name":"orders",
      "principal":"User:alice","host":"*","operation":"Read","permissionType":"Allow"}]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from odradek.security.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
)

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_NODE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1
LOCAL_ACL_FILE = "acls.json"

_COMPACT = (",", ":")


class AclFormatError(ValueError):
    """Stored ACL data this version cannot read."""


# ------------------------------------------------------------------------------ ZooKeeper


def zk_acl_root(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for LITERAL, ``/kafka-acl-extended/<pattern type, lower case>`` otherwise."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_ROOT
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_ROOT}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def zk_acl_roots() -> list[str]:
    """The roots a broker reads at start: one per storable pattern type."""
    return [zk_acl_root(PatternType.LITERAL), zk_acl_root(PatternType.PREFIXED)]


def zk_acl_path(pattern: ResourcePattern) -> str:
    """The znode holding the ACLs of one resource pattern."""
    return f"{zk_acl_root(pattern.pattern_type)}/{pattern.resource_type.pascal}/{pattern.name}"


def zk_pattern_from_path(path: str) -> ResourcePattern:
    """The resource pattern a ``zk_acl_path`` names (inverse of it)."""
    for pattern_type in (PatternType.PREFIXED, PatternType.LITERAL):
        root = zk_acl_root(pattern_type) + "/"
        if path.startswith(root):
            type_name, sep, name = path[len(root) :].partition("/")
            resource_type = ResourceType.parse(type_name)
            if sep and name and resource_type not in (ResourceType.UNKNOWN, ResourceType.ANY):
                return ResourcePattern(resource_type, name, pattern_type)
            break
    raise AclFormatError(f"not an ACL znode path: {path}")


def encode_zk_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource node's data (ResourceZNode.encode), entries in a stable order."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.pascal,
            "operation": e.operation.pascal,
            "host": e.host,
        }
        for e in sorted(entries, key=_entry_sort_key)
    ]
    doc = {"version": ACL_JSON_VERSION, "acls": acls}
    return json.dumps(doc, separators=_COMPACT, ensure_ascii=False).encode()


def decode_zk_acls(data: bytes | None) -> list[AccessControlEntry]:
    """A resource node's entries (AclEntry.fromBytes): empty data is no entries; version 1 only;
    unknown operation or permission names read as UNKNOWN, as Kafka does."""
    if not data:
        return []
    doc = _load_json(data)
    if doc is None:
        return []
    items = _acl_items(doc)
    try:
        return [_entry_from_json(item) for item in items]
    except (KeyError, TypeError) as exc:
        raise AclFormatError(f"malformed ACL node data: {exc!r}") from None


def zk_bindings(path: str, data: bytes | None) -> list[AclBinding]:
    """The bindings stored in one resource node."""
    pattern = zk_pattern_from_path(path)
    return [AclBinding(pattern, entry) for entry in decode_zk_acls(data)]


def zk_group_by_node(bindings: Iterable[AclBinding]) -> dict[str, list[AccessControlEntry]]:
    """Bindings grouped by the znode that holds them: what a writer puts back after a change."""
    nodes: dict[str, list[AccessControlEntry]] = {}
    for binding in bindings:
        nodes.setdefault(zk_acl_path(binding.pattern), []).append(binding.entry)
    return nodes


def encode_acl_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(sequential node path prefix, data) of the change notification for one resource pattern;
    create it with the sequential flag, ZooKeeper appends the 10-digit counter."""
    if pattern.pattern_type is PatternType.LITERAL:
        data = f"{pattern.resource_type.name}:{pattern.name}".encode()
        return f"{LITERAL_CHANGES_PATH}/{CHANGE_NODE_PREFIX}", data
    if pattern.pattern_type is not PatternType.PREFIXED:
        raise ValueError(f"Invalid pattern type: {pattern.pattern_type.name}")
    event = {
        "version": ACL_JSON_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    data = json.dumps(event, separators=_COMPACT, ensure_ascii=False).encode()
    return f"{EXTENDED_CHANGES_PATH}/{CHANGE_NODE_PREFIX}", data


def decode_acl_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The resource pattern a change notification under ``changes_path`` names."""
    if changes_path.rstrip("/") == LITERAL_CHANGES_PATH:
        type_name, sep, name = data.decode().partition(":")
        resource_type = ResourceType.parse(type_name)
        if not sep or resource_type is ResourceType.UNKNOWN:
            raise AclFormatError(
                f"expected a string in format ResourceType:ResourceName but got {data.decode()}"
            )
        return ResourcePattern(resource_type, name, PatternType.LITERAL)
    if changes_path.rstrip("/") == EXTENDED_CHANGES_PATH:
        event = _load_json(data)
        if not isinstance(event, dict):
            raise AclFormatError("Failed to parse ACL change event")
        if int(event.get("version", 0)) > ACL_JSON_VERSION:
            raise AclFormatError(f"Acl change event received for unsupported version: {event}")
        resource_type = ResourceType.parse(str(event.get("resourceType", "")))
        pattern_type = PatternType.parse(str(event.get("patternType", "")))
        if resource_type is ResourceType.UNKNOWN or pattern_type is PatternType.UNKNOWN:
            raise AclFormatError(f"Failed to convert ACL change event to resource: {event}")
        return ResourcePattern(resource_type, str(event.get("name", "")), pattern_type)
    raise AclFormatError(f"not an ACL change path: {changes_path}")


@dataclass(frozen=True, slots=True)
class ZkAclWrite:
    """One resource znode to write: ``data`` to set (creating the node and its parents if
    needed), or None to delete it (Kafka drops a resource node when its last ACL goes)."""

    path: str
    data: bytes | None


def zk_plan(
    before: Iterable[AclBinding], after: Iterable[AclBinding]
) -> tuple[list[ZkAclWrite], list[tuple[str, bytes]]]:
    """What takes ZooKeeper from the ACL set ``before`` to ``after``, as AclAuthorizer writes
    it: one write per resource pattern whose entries changed, then one change notification per
    such pattern (``encode_acl_change``: sequential node prefix and data) so other brokers
    re-read it. Unchanged resources are not touched."""
    old = _entries_by_pattern(before)
    new = _entries_by_pattern(after)
    writes: list[ZkAclWrite] = []
    notifications: list[tuple[str, bytes]] = []
    for pattern in sorted(old.keys() | new.keys(), key=_pattern_sort_key):
        entries = new.get(pattern, set())
        if entries == old.get(pattern, set()):
            continue
        path = zk_acl_path(pattern)
        writes.append(ZkAclWrite(path, encode_zk_acls(entries) if entries else None))
        notifications.append(encode_acl_change(pattern))
    return writes, notifications


def _entries_by_pattern(
    bindings: Iterable[AclBinding],
) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, set()).add(b.entry)
    return grouped


def _pattern_sort_key(p: ResourcePattern) -> tuple[int, int, str]:
    return (int(p.resource_type), int(p.pattern_type), p.name)


# ------------------------------------------------------------------------------ local file


def encode_local(bindings: Iterable[AclBinding]) -> bytes:
    """``acls.json``'s content, bindings in a stable order."""
    acls = [
        {
            "resourceType": b.pattern.resource_type.pascal,
            "patternType": b.pattern.pattern_type.pascal,
            "name": b.pattern.name,
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation.pascal,
            "permissionType": b.entry.permission_type.pascal,
        }
        for b in sorted(bindings, key=_binding_sort_key)
    ]
    doc = {"version": ACL_JSON_VERSION, "acls": acls}
    return json.dumps(doc, indent=1, ensure_ascii=False).encode() + b"\n"


def decode_local(data: bytes) -> list[AclBinding]:
    """The bindings in ``acls.json``; AclFormatError for anything this version cannot read."""
    doc = _load_json(data)
    if doc is None:
        return []
    items = _acl_items(doc)
    bindings = []
    try:
        for item in items:
            resource_type = ResourceType.parse(item["resourceType"])
            pattern_type = PatternType.parse(item["patternType"])
            if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or pattern_type not in (
                PatternType.LITERAL,
                PatternType.PREFIXED,
            ):
                raise AclFormatError(f"bad resource in ACL file: {item}")
            pattern = ResourcePattern(resource_type, str(item["name"]), pattern_type)
            bindings.append(AclBinding(pattern, _entry_from_json(item)))
    except (KeyError, TypeError) as exc:
        raise AclFormatError(f"malformed ACL file: {exc!r}") from None
    return bindings


def local_acl_path(data_dir: str) -> str:
    return os.path.join(data_dir, LOCAL_ACL_FILE)


def load_local(data_dir: str) -> list[AclBinding]:
    """The ACLs of an embedded broker's data dir; none when there is no ``acls.json``."""
    try:
        with open(local_acl_path(data_dir), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return decode_local(data)


def save_local(data_dir: str, bindings: Iterable[AclBinding]) -> None:
    """Replace ``acls.json`` atomically: tmp file, fsync, rename, fsync of the directory."""
    path = local_acl_path(data_dir)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode_local(bindings))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# ------------------------------------------------------------------------------ helpers


def _load_json(data: bytes) -> object:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AclFormatError(f"ACL data is not JSON: {exc}") from None


def _acl_items(doc: object) -> list[dict[str, Any]]:
    """The ``acls`` list of a version-1 document."""
    if not isinstance(doc, dict) or doc.get("version") != ACL_JSON_VERSION:
        version = doc.get("version") if isinstance(doc, dict) else None
        raise AclFormatError(f"unsupported ACL data version {version!r} (expected 1)")
    items = doc.get("acls")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise AclFormatError("malformed ACL data: 'acls' is not a list of objects")
    return items


def _entry_from_json(item: dict[str, Any]) -> AccessControlEntry:
    principal = str(item["principal"])
    try:
        parse_principal(principal)
    except ValueError as exc:
        raise AclFormatError(str(exc)) from None
    return AccessControlEntry(
        principal,
        str(item["host"]),
        AclOperation.parse(str(item["operation"])),
        AclPermissionType.parse(str(item["permissionType"])),
    )


def _entry_sort_key(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, int(e.operation), int(e.permission_type))


def _binding_sort_key(b: AclBinding) -> tuple[int, int, str, tuple[str, str, int, int]]:
    p = b.pattern
    return (int(p.resource_type), int(p.pattern_type), p.name, _entry_sort_key(b.entry))
