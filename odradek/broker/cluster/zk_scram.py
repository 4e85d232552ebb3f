"""SCRAM credentials in ZooKeeper, in Kafka's layout (ZooKeeper mode, 2.x/3.x):

    /config/users/<sanitized user>   {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=
                                      ...,server_key=...,iterations=4096"}}
    /config/changes/config_change_<10 digits>  {"version":2,"entity_path":"users/<user>"}

A user's node is shared with its quotas (zk_quotas.py): a write reads the node, changes only
the SCRAM keys and writes it back guarded by the node's version (retried when someone else
wrote in between), then adds a sequential change notification, as Kafka's
AdminZkClient.changeConfigs does. Every broker watches `/config/changes` and reads the user
nodes again when a notification arrives, so credentials written by Kafka's own kafka-configs.sh
(`--zookeeper` or through a Kafka broker) on the same ZooKeeper are seen too. The credential
strings are kept as written; they are parsed where they are used
(odradek.broker.network.scram_store).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from odradek.broker.cluster.metadata_store import ScramChanges
from odradek.security.scram import ScramMechanism, desanitize_user, sanitize_user

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = f"{CONFIG_CHANGES}/config_change_"
MECHANISMS = frozenset(m.mechanism_name for m in ScramMechanism)
RETRIES = 20


def user_path(user: str) -> str:
    return f"{CONFIG_USERS}/{sanitize_user(user)}"


def _scram_values(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    try:
        config = json.loads(data).get("config", {})
    except (ValueError, AttributeError):
        return {}
    if not isinstance(config, dict):
        return {}
    return {k: str(v) for k, v in config.items() if k in MECHANISMS and v is not None}


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every user's SCRAM credentials in ZooKeeper (any thread)."""
    from kazoo.exceptions import NoNodeError

    try:
        users = list(zk.get_children(CONFIG_USERS))
    except NoNodeError:
        return {}
    pending: list[tuple[str, Any]] = [
        (node, zk.get_async(f"{CONFIG_USERS}/{node}")) for node in users
    ]
    out: dict[str, dict[str, str]] = {}
    for node, result in pending:
        try:
            data, _ = result.get(timeout=30)
        except NoNodeError:
            continue
        values = _scram_values(data)
        if not values:
            continue
        try:
            user = desanitize_user(node)
        except UnicodeDecodeError:
            log.warning("ignoring SCRAM credentials of ZooKeeper node %r: not a user name", node)
            continue
        out[user] = values
    return out


def write(zk: KazooClient, changes: ScramChanges) -> dict[str, dict[str, str]]:
    """Apply credential changes (read-modify-write of each user's node, quota keys kept) and
    notify every broker; returns the users' SCRAM credentials as written."""
    written: dict[str, dict[str, str]] = {}
    for user, ops in changes:
        written[user] = _write_user(zk, user, ops)
        zk.create(
            CHANGE_PREFIX,
            json.dumps(
                {"version": 2, "entity_path": f"users/{sanitize_user(user)}"},
                separators=(",", ":"),
            ).encode(),
            sequence=True,
            makepath=True,
        )
    return written


def _write_user(zk: KazooClient, user: str, ops: dict[str, str | None]) -> dict[str, str]:
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    path = user_path(user)
    for _ in range(RETRIES):
        try:
            data, stat = zk.get(path)
            doc = json.loads(data) if data else {}
            version = stat.version
        except NoNodeError:
            doc, version = {}, -1
        config = dict(doc.get("config", {})) if isinstance(doc, dict) else {}
        for mechanism, value in ops.items():
            if value is None:
                config.pop(mechanism, None)
            else:
                config[mechanism] = value
        encoded = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
        try:
            if version < 0:
                zk.create(path, encoded, makepath=True)
            else:
                zk.set(path, encoded, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # someone else wrote the node meanwhile (a quota change): read it again
        return _scram_values(encoded)
    raise RuntimeError(f"{path} kept changing under this write; gave up after {RETRIES} tries")
