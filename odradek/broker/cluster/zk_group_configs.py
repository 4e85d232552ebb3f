"""Per-group configs (ConfigResource GROUP, KIP-848 / KIP-932) in ZooKeeper, laid out as the other
entity configs (Kafka's ConfigType "groups"; Kafka 4 has no ZooKeeper mode, so the layout
follows its 3.x entity configs):

    /config/groups/<group>                     {"version":1,"config":{"share.auto.offset.reset":
                                                "earliest"}}
    /config/changes/config_change_<10 digits>  {"version":2,"entity_path":"groups/<group>"}

A write replaces the node's config (an empty config deletes the node) and adds a change
notification; every broker watches `/config/changes` and reads the group configs again.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from odradek.broker.cluster.zk_config import node_config, notify_change, read_children
from odradek.broker.cluster.zk_quotas import desanitize, sanitize

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

CONFIG_GROUPS = "/config/groups"


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every group's configs in ZooKeeper (any thread)."""
    out: dict[str, dict[str, str]] = {}
    for name, data in read_children(zk, CONFIG_GROUPS):
        configs = {str(k): str(v) for k, v in node_config(data).items()}
        if configs:
            out[desanitize(name) or name] = configs
    return out


def write(zk: KazooClient, name: str, configs: dict[str, str]) -> None:
    """Replace (or, with no configs, delete) a group's configs and notify every broker."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    rel = f"groups/{sanitize(name)}"
    path = f"/config/{rel}"
    if configs:
        encoded = json.dumps({"version": 1, "config": configs}, separators=(",", ":")).encode()
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
