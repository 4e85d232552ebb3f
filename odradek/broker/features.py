"""The broker's feature levels (KIP-584): what it supports and what the cluster has finalized,
reported in ApiVersions v3+ (the Admin client's describeFeatures reads them there) and changed by
UpdateFeatures (`kafka-features upgrade / downgrade`).

`group.version` 1 (KIP-848 consumer groups) is always finalized. `streams.version` 1 (KIP-1071
streams groups, StreamsGroupHeartbeat/Describe) is finalized as on a new Kafka 4.4 cluster;
downgraded to 0, ApiVersions stops listing keys 88 and 89 (as Kafka gates them on it).
`transaction.version` starts at the broker config of that name (0 by default; Kafka's
`kafka-storage format --feature`); at 2 the 4.x producer switches to transactions v2 (KIP-890
part 2: EndTxn v5 bumps the epoch of every transaction, partitions and the offsets partition join
a transaction when the transactional produce or TxnOffsetCommit v5 arrives). Finalized levels live
in memory: a restart goes back to the configured ones.

A multi-broker cluster keeps transaction.version at 0: there the partition leader would have to
ask another broker's transaction coordinator to add a partition (Kafka's AddPartitionsToTxn from
leader to coordinator), which odradek does not do yet, and the levels are not shared between
brokers. The 4.x producer then uses transactions v1, which every cluster serves.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

SUPPORTED: dict[str, tuple[int, int]] = {
    "group.version": (0, 1),
    "streams.version": (0, 1),
    "transaction.version": (0, 2),
}
TRANSACTION_VERSION = "transaction.version"
STREAMS_VERSION = "streams.version"


class Features:
    """Finalized levels of one broker, and the epoch that counts their changes."""

    def __init__(self, transaction_version: int, clustered: bool = False) -> None:
        self.clustered = clustered
        self.levels: dict[str, int] = {
            "group.version": 1,
            STREAMS_VERSION: 1,
            TRANSACTION_VERSION: transaction_version,
        }
        self.epoch = 1

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def check(self, name: str, level: int) -> str | None:
        """Why `name` cannot be finalized at `level` (None: it can)."""
        if name not in SUPPORTED:
            return f"feature {name} is not supported"
        lo, hi = SUPPORTED[name]
        if not lo <= level <= hi:
            return f"feature {name} level {level} is outside the supported range [{lo}, {hi}]"
        if name == "group.version" and level != 1:
            return "group.version cannot be changed on this broker"
        if name == TRANSACTION_VERSION and level > 0 and self.clustered:
            return "transaction.version stays 0 on a multi-broker odradek cluster"
        return None

    def update(self, name: str, level: int) -> None:
        self.levels[name] = level
        self.epoch += 1


_BY_BROKER: weakref.WeakKeyDictionary[Broker, Features] = weakref.WeakKeyDictionary()


def features_of(broker: Broker) -> Features:
    """The broker's Features, created from its configured transaction.version on first use."""
    found = _BY_BROKER.get(broker)
    if found is None:
        level = int(broker.config.get("transaction.version") or 0)
        clustered = bool(broker.store.clustered)
        if clustered and level > 0:
            log.warning("transaction.version=%d ignored: a multi-broker cluster keeps 0", level)
            level = 0
        found = _BY_BROKER[broker] = Features(level, clustered)
    return found


def transactions_v2(broker: Broker) -> bool:
    """Is transaction.version 2 finalized (KIP-890 part 2)?"""
    return features_of(broker).level(TRANSACTION_VERSION) >= 2
