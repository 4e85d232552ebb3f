"""Dynamic broker configs (ConfigResource BROKER) in ZooKeeper, as Kafka 3.x's DynamicBrokerConfig
keeps them:

    /config/brokers/<default>                  {"version":1,"config":{"log.retention.ms":"1000"}}
    /config/brokers/<broker id>                {"version":1,"config":{...}}
    /config/changes/config_change_<10 digits>  {"version":2,"entity_path":"brokers/<id>"}

The cluster-wide default is `<default>` in ZooKeeper and the empty resource name in requests
and in `MetadataStore.broker_configs`. Kafka encodes password configs with its
password.encoder.secret; odradek stores what the request carried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.cluster.zk_config import DEFAULT, read_entities, replace_entity

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

ENTITY_TYPE = "brokers"


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every broker's and the default's dynamic configs in ZooKeeper (any thread)."""
    return {
        ("" if name == DEFAULT else name): configs
        for name, configs in read_entities(zk, ENTITY_TYPE).items()
    }


def write(zk: KazooClient, name: str, configs: dict[str, str]) -> None:
    """Replace (or, with no configs, delete) a broker's or the default's configs and notify
    every broker."""
    replace_entity(zk, ENTITY_TYPE, name or None, configs)
