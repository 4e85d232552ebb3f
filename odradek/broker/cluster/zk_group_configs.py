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

from typing import TYPE_CHECKING

from odradek.broker.cluster.zk_config import read_entities, replace_entity

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

ENTITY_TYPE = "groups"


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every group's configs in ZooKeeper (any thread)."""
    return read_entities(zk, ENTITY_TYPE)


def write(zk: KazooClient, name: str, configs: dict[str, str]) -> None:
    """Replace (or, with no configs, delete) a group's configs and notify every broker."""
    replace_entity(zk, ENTITY_TYPE, name, configs)
