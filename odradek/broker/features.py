"""The broker's feature levels (KIP-584): what it supports and what the cluster has finalized,
reported in ApiVersions v3+ (the Admin client's describeFeatures reads them there) and changed by
UpdateFeatures (`kafka-features upgrade / downgrade`).

`group.version` 1 (KIP-848 consumer groups) is always finalized. `streams.version` 1 (KIP-1071
streams groups, StreamsGroupHeartbeat/Describe) is finalized on a new cluster, as Kafka 4.4 formats
one; at 0, ApiVersions stops listing keys 88 and 89 (Kafka gates them on it). `transaction.version`
is the cluster's: the metadata store keeps it (the in-process store's file, ZooKeeper's `/feature`
node), so an UpdateFeatures answered by any broker reaches every broker, and a restart keeps it. A
new cluster starts at the broker config `transaction.version` (2 by default, as Kafka 4.x formats a
new cluster; Kafka's `kafka-storage format --feature`). At 2 the 4.x producer switches to
transactions v2 (KIP-890 part 2: EndTxn v5 bumps the epoch of every transaction, partitions and the
offsets partition join a transaction when the transactional produce or TxnOffsetCommit v5 arrives,
the partition leader asking the transaction coordinator, wherever it is, with AddPartitionsToTxn
v5). Clients that do not speak v2 (librdkafka) go on with v1 beside it.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import MetadataStore
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
    """Finalized levels of the cluster as the metadata store holds them, and their epoch."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @property
    def levels(self) -> dict[str, int]:
        return {"group.version": 1, **self.store.finalized_features}

    @property
    def epoch(self) -> int:
        return max(1, self.store.features_epoch)

    def level(self, name: str) -> int:
        if name == "group.version":
            return 1
        return self.store.finalized_features.get(name, 0)

    def check(self, name: str, level: int) -> str | None:
        """Why `name` cannot be finalized at `level` (None: it can)."""
        if name not in SUPPORTED:
            return f"feature {name} is not supported"
        lo, hi = SUPPORTED[name]
        if not lo <= level <= hi:
            return f"feature {name} level {level} is outside the supported range [{lo}, {hi}]"
        if name == "group.version" and level != 1:
            return "group.version cannot be changed on this broker"
        return None

    def update(self, name: str, level: int) -> None:
        self.store.alter_features({name: level})


_BY_BROKER: weakref.WeakKeyDictionary[Broker, Features] = weakref.WeakKeyDictionary()


def features_of(broker: Broker) -> Features:
    """The cluster's Features; the first broker of a new cluster finalizes its configured
    transaction.version."""
    found = _BY_BROKER.get(broker)
    if found is None:
        store = broker.store
        if not store.features_epoch:
            level = int(broker.config.get("transaction.version") or 0)
            store.init_features({TRANSACTION_VERSION: level, STREAMS_VERSION: 1})
        found = _BY_BROKER[broker] = Features(store)
    return found


def transactions_v2(broker: Broker) -> bool:
    """Is transaction.version 2 finalized (KIP-890 part 2)?"""
    return features_of(broker).level(TRANSACTION_VERSION) >= 2
