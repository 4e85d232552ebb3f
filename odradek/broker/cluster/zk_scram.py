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

import logging
from typing import TYPE_CHECKING

from odradek.broker.cluster.metadata_store import ScramChanges
from odradek.broker.cluster.zk_config import (
    node_config,
    notify_change,
    read_children,
    update_config,
)
from odradek.security.scram import ScramMechanism, desanitize_user, sanitize_user

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

CONFIG_USERS = "/config/users"
MECHANISMS = frozenset(m.mechanism_name for m in ScramMechanism)


def user_path(user: str) -> str:
    return f"{CONFIG_USERS}/{sanitize_user(user)}"


def _scram_values(data: bytes | None) -> dict[str, str]:
    config = node_config(data)
    return {k: str(v) for k, v in config.items() if k in MECHANISMS and v is not None}


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every user's SCRAM credentials in ZooKeeper (any thread)."""
    out: dict[str, dict[str, str]] = {}
    for node, data in read_children(zk, CONFIG_USERS):
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
        written[user] = _scram_values(update_config(zk, user_path(user), ops))
        notify_change(zk, f"users/{sanitize_user(user)}")
    return written
