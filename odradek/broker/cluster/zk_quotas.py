"""Client quotas in ZooKeeper, in Kafka's layout (ZooKeeper mode, 2.x/3.x):

    /config/clients/<client-id>                {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>                       (the same; SCRAM credentials live here too)
    /config/users/<user>/clients/<client-id>
    /config/changes/config_change_<10 digits>  {"version":2,"entity_path":"users/alice"}

Names are sanitized as Kafka's `Sanitizer` does (URL-encoded, `*` as %2A, space as %20); the
default entity is the literal `<default>`. A write changes only the quota keys of a node (a
user node keeps its SCRAM credentials) and then adds a sequential change notification, as
Kafka's AdminZkClient.changeConfigs; every broker watches `/config/changes` and reads the
quota nodes again when a notification arrives (so a quota set by Kafka's own kafka-configs.sh
on the same ZooKeeper is seen too).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.broker.cluster.metadata_store import QuotaChanges, QuotaEntity
from odradek.broker.cluster.zk_config import (
    desanitize,
    node_config,
    notify_change,
    read_children,
    sanitize,
    update_config,
)

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
QUOTA_KEYS = frozenset(
    {
        "producer_byte_rate",
        "consumer_byte_rate",
        "request_percentage",
        "controller_mutation_rate",
    }
)
LONG_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate"})


def entity_path(ent: QuotaEntity) -> str | None:
    """`users/<u>`, `clients/<c>` or `users/<u>/clients/<c>`; None for other entity types."""
    parts = dict(ent)
    if set(parts) - {"user", "client-id"} or not parts:
        return None
    if "user" in parts and "client-id" in parts:
        return f"users/{sanitize(parts['user'])}/clients/{sanitize(parts['client-id'])}"
    if "user" in parts:
        return f"users/{sanitize(parts['user'])}"
    return f"clients/{sanitize(parts['client-id'])}"


def _value(key: str, value: float) -> str:
    return str(int(value)) if key in LONG_KEYS and value == int(value) else str(value)


def _quota_values(data: bytes | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in node_config(data).items():
        if key in QUOTA_KEYS:
            try:
                if not isinstance(value, (int, float, str)):
                    raise TypeError(type(value).__name__)
                out[key] = float(value)
            except (TypeError, ValueError):
                log.warning("ignoring quota %s=%r in ZooKeeper: not a number", key, value)
    return out


def read_all(zk: KazooClient) -> dict[QuotaEntity, dict[str, float]]:
    """Every quota entity in ZooKeeper (any thread)."""
    out: dict[QuotaEntity, dict[str, float]] = {}

    def keep(ent: QuotaEntity, data: bytes) -> None:
        values = _quota_values(data)
        if values:
            out[ent] = values

    for client, data in read_children(zk, CONFIG_CLIENTS):
        keep((("client-id", desanitize(client)),), data)
    for user, data in read_children(zk, CONFIG_USERS):
        keep((("user", desanitize(user)),), data)
        for client, cdata in read_children(zk, f"{CONFIG_USERS}/{user}/clients"):
            keep((("client-id", desanitize(client)), ("user", desanitize(user))), cdata)
    return out


def write(zk: KazooClient, changes: QuotaChanges) -> dict[QuotaEntity, dict[str, float]]:
    """Apply quota changes, notify every broker; returns the entities' new values."""
    written: dict[QuotaEntity, dict[str, float]] = {}
    for ent, ops in changes:
        rel = entity_path(ent)
        if rel is None:
            raise ValueError(f"quota entity {ent} cannot be stored in ZooKeeper")
        values = {k: None if v is None else _value(k, v) for k, v in ops.items()}
        written[ent] = _quota_values(update_config(zk, f"/config/{rel}", values))
        notify_change(zk, rel)
    return written
