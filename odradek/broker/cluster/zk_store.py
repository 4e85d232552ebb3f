"""Cluster metadata in Apache ZooKeeper, for brokers in separate processes or on several machines
(`zookeeper.connect`), in Kafka's classic layout (`zk_layout.py`), through kazoo.

`ZooKeeperMetadataStore` is the `MetadataStore` a ZooKeeper-mode broker uses. It is made of:

- `zk_session.py`: the kazoo client, its chroot, and the hand-over from kazoo's thread to the
  event loop;
- `zk_cache.py`: the watch cache. Reads come from it (`topics`, the registrations, the
  controller), kept current by watches;
- `zk_registration.py`: this broker's registration, the controller election and epoch,
  producer id blocks and the cluster id.

This module does the topic and partition-state writes, as Kafka's controller and AlterPartition
path do in ZooKeeper mode:

- Conditional partition-state updates are `setData` with the expected znode version (the
  partition epoch).
- Creating a topic is one ZooKeeper transaction (assignment, config, every partition state), so
  no broker ever sees half a topic.
- Writes are synchronous calls from the event loop: metadata changes are rare, and ZooKeeper
  answers a local write in about a millisecond. Each write also puts what it wrote into the
  cache at once, so the writer reads its own write before the watch arrives.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.broker.cluster import (
    zk_broker_configs,
    zk_client_metrics,
    zk_config,
    zk_features,
    zk_group_configs,
    zk_quotas,
    zk_scram,
)
from odradek.broker.cluster import zk_layout as zl
from odradek.broker.cluster.metadata_store import (
    BrokerRegistration,
    MetadataChange,
    MetadataStore,
    PartitionState,
    QuotaChanges,
    QuotaEntity,
    ScramChanges,
    Subscriber,
    TopicExistsError,
    TopicInfo,
)
from odradek.broker.cluster.zk_cache import TopicRead, ZooKeeperWatchCache
from odradek.broker.cluster.zk_registration import ZooKeeperRegistration
from odradek.broker.cluster.zk_session import ZooKeeperError, ZooKeeperSession

if TYPE_CHECKING:
    from kazoo.client import TransactionRequest  # untyped (Any) in kazoo
    from kazoo.interfaces import IAsyncResult

    from odradek.broker.config import BrokerConfig

__all__ = ["ZooKeeperError", "ZooKeeperMetadataStore"]

log = logging.getLogger(__name__)


def _assignment(st: PartitionState) -> tuple[list[int], list[int], list[int]]:
    return st.replicas, st.adding_replicas, st.removing_replicas


class ZooKeeperMetadataStore(MetadataStore):
    clustered = True
    reassignable = True

    def __init__(
        self,
        connect: str,
        node_id: int,
        cluster_id: str | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
    ) -> None:
        self._subscribers = []
        self.session = ZooKeeperSession(connect, node_id, session_timeout_ms, connection_timeout_ms)
        self.zk = self.session.zk
        self.registrar = ZooKeeperRegistration(self.session, self._controller_from_thread)
        self.cache = ZooKeeperWatchCache(
            self.session,
            self._notify,
            lambda: self.registrar.registration,
            self.registrar.elect,
        )
        self.topics: dict[str, TopicInfo] = self.cache.topics  # the same dict, never rebound
        # every start-up read is retried while the connection is lost
        start = self.session.until_connected
        self.cluster_id = start(self.registrar.cluster_id, cluster_id)
        start(self.cache.load)
        self.client_quotas: dict[QuotaEntity, dict[str, float]] = start(zk_quotas.read_all, self.zk)
        self._watching_quotas = False
        self.scram_credentials: dict[str, dict[str, str]] = start(zk_scram.read_all, self.zk)
        self._watching_scram = False
        self.client_metrics: dict[str, dict[str, str]] = start(zk_client_metrics.read_all, self.zk)
        self.group_configs: dict[str, dict[str, str]] = start(zk_group_configs.read_all, self.zk)
        self.broker_configs: dict[str, dict[str, str]] = start(zk_broker_configs.read_all, self.zk)
        self._watching_client_metrics = False
        self.finalized_features, self.features_epoch = start(zk_features.read, self.zk)
        self._watching_features = False
        log.info("cluster metadata in ZooKeeper at %s (cluster id %s)", connect, self.cluster_id)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ZooKeeperMetadataStore:
        return cls(
            str(config.get("zookeeper.connect")),
            int(config.node_id),
            config.get("cluster.id"),
            int(config.get("zookeeper.session.timeout.ms")),
            int(config.get("zookeeper.connection.timeout.ms")),
        )

    def close(self) -> None:
        self.session.close()

    def _controller_from_thread(self, controller: int) -> None:
        self.session.post(self.cache.apply_controller, controller)

    # -- MetadataStore: subscriptions -------------------------------------------------------

    def subscribe(self, fn: Subscriber) -> None:
        super().subscribe(fn)
        if self.session.loop is None:
            self.session.loop = asyncio.get_running_loop()
        self.cache.start_watches()
        if not self._watching_quotas:  # client quotas: re-read on every change notification
            self._watching_quotas = True
            self.zk.ensure_path(zk_config.CONFIG_CHANGES)
            self.zk.ChildrenWatch(zk_config.CONFIG_CHANGES, self._on_config_changes)
        if not self._watching_scram:  # SCRAM credentials: the same notifications
            self._watching_scram = True
            self.zk.ensure_path(zk_config.CONFIG_CHANGES)
            self.zk.ChildrenWatch(zk_config.CONFIG_CHANGES, self._on_scram_changes)
        if not self._watching_client_metrics:  # KIP-714 subscriptions: the same notifications
            self._watching_client_metrics = True
            self.zk.ensure_path(zk_config.CONFIG_CHANGES)
            self.zk.ChildrenWatch(zk_config.CONFIG_CHANGES, self._on_client_metrics)
            self.zk.ChildrenWatch(zk_config.CONFIG_CHANGES, self._on_group_configs)
            self.zk.ChildrenWatch(zk_config.CONFIG_CHANGES, self._on_broker_configs)
        if not self._watching_features:
            self._watching_features = True
            self.zk.DataWatch(zk_features.PATH, self._on_features)

    # -- MetadataStore: SCRAM credentials ---------------------------------------------------

    def alter_scram_credentials(self, changes: ScramChanges) -> None:
        written = zk_scram.write(self.zk, changes)
        credentials = {**self.scram_credentials, **written}
        self._apply_scram({user: creds for user, creds in credentials.items() if creds})

    def _on_scram_changes(self, children: list[str]) -> None:
        if self.session.closed:
            return
        try:
            read = zk_scram.read_all(self.zk)
        except Exception:
            log.exception("reading SCRAM credentials from ZooKeeper failed")
            return
        self.session.post(self._apply_scram, read)

    def _apply_scram(self, credentials: dict[str, dict[str, str]]) -> None:
        if credentials != self.scram_credentials:
            self.scram_credentials = credentials
            self._notify(MetadataChange("scram"))

    # -- MetadataStore: client metrics subscriptions (KIP-714) -----------------------------

    def alter_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        zk_client_metrics.write(self.zk, name, configs)
        current = dict(self.client_metrics)
        if configs:
            current[name] = dict(configs)
        else:
            current.pop(name, None)
        self._apply_client_metrics(current)

    def _on_client_metrics(self, children: list[str]) -> None:
        if self.session.closed:
            return
        try:
            read = zk_client_metrics.read_all(self.zk)
        except Exception:
            log.exception("reading client metrics subscriptions from ZooKeeper failed")
            return
        self.session.post(self._apply_client_metrics, read)

    def _apply_client_metrics(self, subscriptions: dict[str, dict[str, str]]) -> None:
        if subscriptions != self.client_metrics:
            self.client_metrics = subscriptions
            self._notify(MetadataChange("client-metrics"))

    # -- MetadataStore: per-group configs -------------------------------------------------------

    def alter_group_configs(self, name: str, configs: dict[str, str]) -> None:
        zk_group_configs.write(self.zk, name, configs)
        current = dict(self.group_configs)
        if configs:
            current[name] = dict(configs)
        else:
            current.pop(name, None)
        self._apply_group_configs(current)

    def _on_group_configs(self, children: list[str]) -> None:
        if self.session.closed:
            return
        try:
            read = zk_group_configs.read_all(self.zk)
        except Exception:
            log.exception("reading group configs from ZooKeeper failed")
            return
        self.session.post(self._apply_group_configs, read)

    def _apply_group_configs(self, configs: dict[str, dict[str, str]]) -> None:
        if configs != self.group_configs:
            self.group_configs = configs
            self._notify(MetadataChange("group-configs"))

    # -- MetadataStore: finalized features (the /feature node) --------------------------------

    def init_features(self, levels: dict[str, int]) -> None:
        zk_features.create(self.zk, levels)
        self._apply_features(*zk_features.read(self.zk))

    def alter_features(self, levels: dict[str, int]) -> None:
        current = dict(self.finalized_features)
        for name, level in levels.items():
            if level > 0:
                current[name] = level
            else:
                current.pop(name, None)
        zk_features.write(self.zk, current)
        self._apply_features(*zk_features.read(self.zk))

    def _on_features(self, data: bytes | None, stat: object) -> None:
        if self.session.closed or data is None:
            return
        version = getattr(stat, "version", None)
        epoch = 0 if version is None else int(version) + 1
        self.session.post(self._apply_features, zk_features.decode(data), epoch)

    def _apply_features(self, levels: dict[str, int], epoch: int) -> None:
        if epoch > self.features_epoch:
            self.finalized_features, self.features_epoch = levels, epoch
            self._notify(MetadataChange("features"))

    # -- MetadataStore: dynamic broker configs -------------------------------------------------

    def alter_broker_configs(self, name: str, configs: dict[str, str]) -> None:
        zk_broker_configs.write(self.zk, name, configs)
        current = dict(self.broker_configs)
        if configs:
            current[name] = dict(configs)
        else:
            current.pop(name, None)
        self._apply_broker_configs(current)

    def _on_broker_configs(self, children: list[str]) -> None:
        if self.session.closed:
            return
        try:
            read = zk_broker_configs.read_all(self.zk)
        except Exception:
            log.exception("reading dynamic broker configs from ZooKeeper failed")
            return
        self.session.post(self._apply_broker_configs, read)

    def _apply_broker_configs(self, configs: dict[str, dict[str, str]]) -> None:
        if configs != self.broker_configs:
            self.broker_configs = configs
            self._notify(MetadataChange("broker-configs"))

    # -- MetadataStore: client quotas -------------------------------------------------------

    def alter_client_quotas(self, changes: QuotaChanges) -> None:
        written = zk_quotas.write(self.zk, changes)
        self._apply_quotas({**self.client_quotas, **written})

    def _on_config_changes(self, children: list[str]) -> None:
        if self.session.closed:
            return
        try:
            read = zk_quotas.read_all(self.zk)
        except Exception:
            log.exception("reading client quotas from ZooKeeper failed")
            return
        self.session.post(self._apply_quotas, read)

    def _apply_quotas(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        quotas = {ent: values for ent, values in quotas.items() if values}
        if quotas != self.client_quotas:
            self.client_quotas = quotas
            self._notify(MetadataChange("quota"))

    # -- MetadataStore: topics --------------------------------------------------------------

    def create_topic(self, info: TopicInfo) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError

        name = info.name
        if not self.zk.exists(zl.topic_path(name)):
            try:  # a config left behind without its topic (e.g. a tool's earlier attempt)
                self.zk.delete(zl.config_path(name))
            except NoNodeError:
                pass
        txn = self.zk.transaction()
        txn.create(zl.config_path(name), zl.encode_config(info.configs))
        txn.create(zl.topic_path(name), zl.encode_topic(info.topic_id, info.partitions))
        txn.create(zl.partitions_path(name), b"")
        self._add_partition_nodes(txn, info, 0)
        failed, read = self._commit_and_read(txn, name)
        if failed:
            if any(isinstance(r, NodeExistsError) for r in failed):
                raise TopicExistsError(name)
            raise ZooKeeperError(f"creating topic {name} in ZooKeeper failed: {failed[0]!r}")
        if read is not None:
            info.partitions[:] = read.info.partitions  # partition epochs are znode versions
            self.topics[name] = info
        self._notify(MetadataChange("topic", name))

    def _add_partition_nodes(self, txn: TransactionRequest, info: TopicInfo, start: int) -> None:
        for idx in range(start, len(info.partitions)):
            state = zl.encode_state(info.partitions[idx], self.registrar.controller_epoch)
            txn.create(zl.partition_path(info.name, idx), b"")
            txn.create(zl.state_path(info.name, idx), state)

    def _commit_and_read(
        self, txn: TransactionRequest, name: str
    ) -> tuple[list[Exception], TopicRead | None]:
        """Commit a topic transaction, then read the topic back into the cache (whoever won)."""
        failed = [r for r in txn.commit() if isinstance(r, Exception)]
        read = self.cache.read_topic(name)
        if read is not None:
            self.cache.put_topic(read)
        return failed, read

    def delete_topic(self, name: str) -> None:
        from kazoo.exceptions import NoNodeError

        for path in (zl.topic_path(name), zl.config_path(name)):
            try:
                self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass
        self.cache.drop_topic(name)
        self._notify(MetadataChange("topic", name))

    def update_topic(self, info: TopicInfo) -> None:
        """New partitions and changed configs; one transaction, guarded by the topic's version."""
        from kazoo.exceptions import NoNodeError

        name = info.name
        data, stat = self.zk.get(zl.topic_path(name))
        _, assignment = zl.decode_topic(data, name, stat.czxid)
        txn = self.zk.transaction()
        if len(info.partitions) > len(assignment):
            self._add_partition_nodes(txn, info, len(assignment))
            txn.set_data(
                zl.topic_path(name),
                zl.encode_topic(info.topic_id, info.partitions),
                version=stat.version,
            )
        try:
            current_configs = zl.decode_config(self.zk.get(zl.config_path(name))[0])
            if current_configs != info.configs:
                txn.set_data(zl.config_path(name), zl.encode_config(info.configs))
        except NoNodeError:
            txn.create(zl.config_path(name), zl.encode_config(info.configs))
        failed, _ = self._commit_and_read(txn, name)
        if failed:
            raise ZooKeeperError(f"updating topic {name} in ZooKeeper failed: {failed[0]!r}")
        self._notify(MetadataChange("topic", name))

    def allocate_producer_ids(self) -> tuple[int, int]:
        return self.registrar.allocate_producer_ids()

    # -- MetadataStore: brokers and the controller ------------------------------------------

    def register_broker(self, registration: BrokerRegistration) -> None:
        # retry-safe: a create that went through before the connection was lost is found as
        # this session's own node and rewritten
        self.session.until_connected(self.registrar.register, registration)
        self.cache.brokers[registration.node_id] = registration
        log.info(
            "broker %d registered at %s:%d in ZooKeeper",
            registration.node_id,
            registration.host,
            registration.port,
        )
        self._notify(MetadataChange("broker", node_id=registration.node_id))
        if self.session.read_controller() < 0:
            self.cache.apply_controller(self.registrar.try_become_controller())

    def unregister_broker(self, node_id: int) -> None:
        if not self.registrar.unregister(node_id):
            return
        if self.cache.brokers.pop(node_id, None) is not None:
            log.info("broker %d unregistered from ZooKeeper", node_id)
            self._notify(MetadataChange("broker", node_id=node_id))

    def set_shutting_down(self, node_id: int) -> None:
        reg = self.registrar.set_shutting_down(node_id)
        if reg is None:
            return
        self.cache.brokers[node_id] = reg
        self._notify(MetadataChange("broker", node_id=node_id))

    def live_brokers(self) -> list[int]:
        return sorted(self.cache.brokers)

    def broker(self, node_id: int) -> BrokerRegistration | None:
        return self.cache.brokers.get(node_id)

    def controller_id(self) -> int:
        return self.cache.controller

    # -- MetadataStore: conditional partition updates ---------------------------------------

    def update_partitions(
        self, updates: list[tuple[str, int, PartitionState, int, int]]
    ) -> list[bool]:
        results = [False] * len(updates)
        pending: list[tuple[int, IAsyncResult]] = []
        for i, (topic, idx, state, leader_epoch, partition_epoch) in enumerate(updates):
            info = self.topics.get(topic)
            if info is None or not 0 <= idx < len(info.partitions):
                continue
            current = info.partitions[idx]
            if (current.leader_epoch, current.partition_epoch) != (leader_epoch, partition_epoch):
                continue
            data = zl.encode_state(state, self.registrar.controller_epoch)
            path = zl.state_path(topic, idx)
            if partition_epoch >= 0 and _assignment(state) != _assignment(current):
                # a reassignment step: the topic node's replicas with the state, together
                results[i] = self._reassign(info, idx, state, data, partition_epoch)
                continue
            if partition_epoch < 0:
                pending.append((i, self.zk.create_async(path, data, makepath=True)))
            else:
                # guarded by the topic node too: a state built on replicas this cache has not
                # caught up with (a reassignment's topic node is newer) is refused
                txn = self.zk.transaction()
                txn.check(zl.topic_path(topic), self.cache.topic_version(topic))
                txn.set_data(path, data, version=partition_epoch)
                pending.append((i, txn.commit_async()))
        changed = []
        for i, result in pending:
            topic, idx, state, _, partition_epoch = updates[i]
            try:
                stat = result.get(timeout=self.session.session_timeout_s)
                if isinstance(stat, list):  # the transaction's results
                    failed = [r for r in stat if isinstance(r, Exception)]
                    if failed:
                        raise failed[0]
                    stat = stat[1]
                if partition_epoch < 0:
                    stat = self.zk.exists(zl.state_path(topic, idx))
            except Exception as exc:  # BadVersion / NoNode: someone moved first
                log.debug("conditional update of %s-%d refused: %r", topic, idx, exc)
                continue
            if stat is None or not self.cache.put_state(topic, idx, state, stat):
                continue
            results[i] = True
            changed.append((topic, idx))
        for topic, idx in changed:
            self._notify(MetadataChange("partition", topic, idx))
        return results

    def requested_reassignments(self) -> dict[tuple[str, int], list[int]]:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(zl.REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}
        try:
            return zl.decode_reassign_request(data)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring %s: %r", zl.REASSIGN_PARTITIONS, exc)
            return {}

    def forget_requested_reassignments(self, keys: set[tuple[str, int]]) -> None:
        from kazoo.exceptions import BadVersionError, NoNodeError

        for _ in range(5):  # read-modify-write under the node's version
            try:
                data, stat = self.zk.get(zl.REASSIGN_PARTITIONS)
                moves = zl.decode_reassign_request(data)
                left = {k: r for k, r in moves.items() if k not in keys}
                if len(left) == len(moves):
                    return
                if left:
                    self.zk.set(
                        zl.REASSIGN_PARTITIONS,
                        zl.encode_reassign_request(left),
                        version=stat.version,
                    )
                else:
                    self.zk.delete(zl.REASSIGN_PARTITIONS, version=stat.version)
                return
            except NoNodeError:
                return
            except BadVersionError:
                continue
            except (ValueError, KeyError, TypeError):
                return

    def _reassign(
        self, info: TopicInfo, idx: int, state: PartitionState, data: bytes, version: int
    ) -> bool:
        """Write a partition state whose replicas change (KIP-455) in one transaction with
        the topic node's assignment and adding/removing replicas, as Kafka's controller."""
        name = info.name
        partitions = list(info.partitions)
        partitions[idx] = state
        txn = self.zk.transaction()
        txn.set_data(zl.state_path(name, idx), data, version=version)
        txn.set_data(
            zl.topic_path(name),
            zl.encode_topic(info.topic_id, partitions),
            version=self.cache.topic_version(name),  # the replicas this state was built on
        )
        results = txn.commit()
        if any(isinstance(r, Exception) for r in results):
            log.debug("reassignment of %s-%d refused: %r", name, idx, results)
            return False
        read = self.cache.read_topic(name)
        if read is not None:
            self.cache.put_topic(read)
        current = self.topics.get(name)
        if current is None or idx >= len(current.partitions):
            return False
        self._notify(MetadataChange("partition", name, idx))
        return True
