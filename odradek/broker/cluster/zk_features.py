"""Finalized feature levels (KIP-584) in ZooKeeper, in the node Kafka 3.x's ZooKeeper mode keeps
them in:

    /feature   {"version":2,"status":1,"features":{"transaction.version":
                {"min_version_level":1,"max_version_level":2}}}

`status` 1 is Kafka's FeatureZNodeStatus.Enabled; the node's version is the features epoch
that ApiVersions reports. Every broker watches the node, so an UpdateFeatures answered by any
broker reaches all of them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kazoo.client import KazooClient  # untyped (Any) in kazoo

PATH = "/feature"
ENABLED = 1


def encode(levels: dict[str, int]) -> bytes:
    features = {
        name: {"min_version_level": 1, "max_version_level": level}
        for name, level in sorted(levels.items())
        if level > 0
    }
    return json.dumps({"version": 2, "status": ENABLED, "features": features}).encode()


def decode(data: bytes | None) -> dict[str, int]:
    """The finalized levels a node holds (none for a missing or unreadable node)."""
    if not data:
        return {}
    try:
        doc = json.loads(data)
        return {
            str(name): int(f["max_version_level"])
            for name, f in doc.get("features", {}).items()
            if int(f["max_version_level"]) > 0
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def read(zk: KazooClient) -> tuple[dict[str, int], int]:
    """(levels, epoch); epoch 0 when the node does not exist yet."""
    if zk.exists(PATH) is None:
        return {}, 0
    data, stat = zk.get(PATH)
    return decode(data), int(stat.version) + 1


def create(zk: KazooClient, levels: dict[str, int]) -> None:
    """Create the node with the first levels unless a broker already did."""
    from kazoo.exceptions import NodeExistsError

    try:
        zk.create(PATH, encode(levels))
    except NodeExistsError:
        pass


def write(zk: KazooClient, levels: dict[str, int]) -> None:
    """Replace the finalized levels (creating the node if needed)."""
    if zk.exists(PATH) is None:
        create(zk, levels)
    zk.set(PATH, encode(levels))
