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

import json
import logging
from typing import TYPE_CHECKING

from odradek.broker.cluster.zk_config import node_config, notify_change, read_children
from odradek.broker.cluster.zk_quotas import desanitize, sanitize

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

CONFIG_CLIENT_METRICS = "/config/client-metrics"


def read_all(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every subscription in ZooKeeper (any thread)."""
    out: dict[str, dict[str, str]] = {}
    for name, data in read_children(zk, CONFIG_CLIENT_METRICS):
        configs = {str(k): str(v) for k, v in node_config(data).items()}
        if configs:
            out[desanitize(name) or name] = configs
    return out


def write(zk: KazooClient, name: str, configs: dict[str, str]) -> None:
    """Replace (or, with no configs, delete) a subscription and notify every broker."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    rel = f"client-metrics/{sanitize(name)}"
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
