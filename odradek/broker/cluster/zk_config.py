"""Kafka's dynamic-config entity nodes in ZooKeeper, shared by quotas, SCRAM credentials,
client-metrics subscriptions and group configs (Kafka's AdminZkClient /
ConfigEntityChangeNotification):

    /config/<entity type>/<sanitized name>     {"version":1,"config":{"key":"value",...}}
    /config/changes/config_change_<10 digits>  {"version":2,"entity_path":"<type>/<name>"}

One entity node may hold keys of several owners (a user node: quotas and SCRAM credentials), so
a write is a read-modify-write of its own keys, guarded by the node's version; an entity type
whose nodes have a single owner (client-metrics, groups) is read and replaced whole
(`read_entities`, `replace_entity`). Every write ends with a sequential change notification that
every broker watches. Names are sanitized as Kafka's `Sanitizer` does (URL-encoded, `*` as %2A,
space as %20); the default entity is the literal `<default>`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = f"{CONFIG_CHANGES}/config_change_"
RETRIES = 20
DEFAULT = "<default>"


def sanitize(name: str | None) -> str:
    if name is None:
        return DEFAULT
    return quote(name, safe="").replace("~", "%7E")


def desanitize(text: str) -> str | None:
    return None if text == DEFAULT else unquote(text)


def _dump(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def node_config(data: bytes | None) -> dict[str, object]:
    """The `config` object of an entity node; {} for an empty or unreadable node."""
    if not data:
        return {}
    try:
        config = json.loads(data).get("config", {})
    except (ValueError, AttributeError):
        return {}
    return config if isinstance(config, dict) else {}


def read_children(zk: KazooClient, parent: str) -> list[tuple[str, bytes]]:
    """(child name, data) of every child of `parent`, read in parallel (any thread); a child
    deleted meanwhile is left out, a missing parent is no children."""
    from kazoo.exceptions import NoNodeError

    try:
        names = list(zk.get_children(parent))
    except NoNodeError:
        return []
    pending = [(name, zk.get_async(f"{parent}/{name}")) for name in names]
    out = []
    for name, result in pending:
        try:
            data, _ = result.get(timeout=30)
        except NoNodeError:
            continue
        out.append((name, data))
    return out


def update_config(zk: KazooClient, path: str, ops: Mapping[str, object]) -> bytes:
    """Set (a value) or remove (None) keys of the entity node at `path`, keeping every other
    key; retried when another writer changed the node meanwhile. Returns the written data."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    for _ in range(RETRIES):
        try:
            data, stat = zk.get(path)
            version = stat.version
        except NoNodeError:
            data, version = b"", -1
        config = dict(node_config(data))
        for key, value in ops.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        encoded = _dump({"version": 1, "config": config})
        try:
            if version < 0:
                zk.create(path, encoded, makepath=True)
            else:
                zk.set(path, encoded, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # another owner's keys changed meanwhile: read the node again
        return encoded
    raise RuntimeError(f"{path} kept changing under this write; gave up after {RETRIES} tries")


def notify_change(zk: KazooClient, entity_path: str) -> None:
    """The sequential notification every broker watches (`entity_path` as `users/alice`)."""
    zk.create(
        CHANGE_PREFIX,
        _dump({"version": 2, "entity_path": entity_path}),
        sequence=True,
        makepath=True,
    )


def read_entities(zk: KazooClient, entity_type: str) -> dict[str, dict[str, str]]:
    """The non-empty configs of every `/config/<entity_type>` node, by entity name (any
    thread)."""
    out: dict[str, dict[str, str]] = {}
    for name, data in read_children(zk, f"/config/{entity_type}"):
        configs = {str(k): str(v) for k, v in node_config(data).items()}
        if configs:
            out[desanitize(name) or name] = configs
    return out


def replace_entity(zk: KazooClient, entity_type: str, name: str, configs: dict[str, str]) -> None:
    """Replace the whole config of an entity node of a single owner (with no configs, delete the
    node, as Kafka leaves no empty subscription behind) and notify every broker."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    rel = f"{entity_type}/{sanitize(name)}"
    path = f"/config/{rel}"
    if configs:
        encoded = _dump({"version": 1, "config": configs})
        try:
            zk.set(path, encoded)
        except NoNodeError:
            try:
                zk.create(path, encoded, makepath=True)
            except NodeExistsError:
                zk.set(path, encoded)
    else:
        try:
            zk.delete(path)
        except NoNodeError:
            pass
    notify_change(zk, rel)
