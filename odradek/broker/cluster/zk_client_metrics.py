"""KIP-714 client metrics subscriptions in ZooKeeper, in Kafka's layout (3.7+):

    /config/client-metrics/<name>              {"version":1,"config":{"metrics":"*",
                                                "interval.ms":"1000","match":"client_id=a.*"}}
    /config/changes/config_change_<10 digits>  {"version":2,"entity_path":"client-metrics/<name>"}

A write replaces the node's config (an empty config deletes the node, as Kafka's
AdminZkClient.changeClientMetricsConfig leaves no empty subscription behind) and adds a
sequential change notification; every broker watches `/config/changes` and reads the
subscriptions again when a notification arrives. Names are sanitized as Kafka's `Sanitizer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.cluster.zk_config import read_entities, replace_entity

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

ENTITY_TYPE = "client-metrics"


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every subscription in ZooKeeper (any thread)."""
    return read_entities(zk, ENTITY_TYPE)


def write(zk: KazooClient, name: str, configs: dict[str, str]) -> None:
    """Replace (or, with no configs, delete) a subscription and notify every broker."""
    replace_entity(zk, ENTITY_TYPE, name, configs)
