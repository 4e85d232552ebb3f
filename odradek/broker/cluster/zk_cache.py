"""The metadata cache of a ZooKeeper-mode broker, kept current by watches, as Kafka's
`MetadataCache` is fed by the controller (here every broker watches ZooKeeper itself).

It holds the topics (assignment, configs, partition states), the broker registrations and the
controller id. kazoo calls watchers on its own thread; they read ZooKeeper there and post the
result to the event loop (`ZooKeeperSession.post`), which alone changes the cache and then
notifies subscribers like the in-process store. Each cached node remembers its key, (creation
zxid, version), so a late watch never undoes a newer write, and a topic deleted and created again
under the same name (a new creation zxid) is told apart from the old one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from odradek.broker.cluster import zk_layout as zl
from odradek.broker.cluster.metadata_store import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    TopicInfo,
)
from odradek.broker.cluster.zk_session import ZooKeeperSession
from odradek.broker.partitions.topics import INTERNAL_TOPICS

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

Key = tuple[int, int]  # (czxid, version) of a znode: which of two reads is newer
NO_KEY: Key = (-1, -1)


def node_key(stat: ZnodeStat) -> Key:
    return (stat.czxid, stat.version)


class TopicRead:
    """One consistent-enough read of a topic: its info and the keys of the nodes read."""

    __slots__ = ("info", "topic_key", "state_keys", "config_key")

    def __init__(self, info: TopicInfo, topic_key: Key, state_keys: list[Key], config_key: Key):
        self.info = info
        self.topic_key = topic_key
        self.state_keys = state_keys
        self.config_key = config_key


class ZooKeeperWatchCache:
    """Topics, registrations and the controller as last read from ZooKeeper.

    `notify` tells the store's subscribers of a change; `own_registration` is this broker's
    registration (None when unregistered); `elect` is called on kazoo's thread when
    `/controller` is vacant and returns who holds it after trying to take it.
    """

    def __init__(
        self,
        session: ZooKeeperSession,
        notify: Callable[[MetadataChange], None],
        own_registration: Callable[[], BrokerRegistration | None],
        elect: Callable[[], int],
    ) -> None:
        self.session = session
        self.zk = session.zk
        self._notify = notify
        self._own_registration = own_registration
        self._elect = elect
        self.topics: dict[str, TopicInfo] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controller = -1
        self._topic_keys: dict[str, Key] = {}
        self._state_keys: dict[tuple[str, int], Key] = {}
        self._config_keys: dict[str, Key] = {}
        self._watching = False
        self._watched: set[str] = set()  # paths with a DataWatch (callback thread only)
        self._seen_topic_czxid: dict[str, int] = {}  # callback thread only

    # -- reads (any thread) -----------------------------------------------------------------

    def load(self) -> None:
        """Fill the cache at start-up (before any watch)."""
        for name in self.zk.get_children(zl.TOPICS):
            read = self.read_topic(name)
            if read is not None:
                self.put_topic(read)
        self.brokers = self._read_brokers()
        self.controller = self.session.read_controller()

    def read_topic(self, name: str) -> TopicRead | None:
        """Read a topic's nodes (any thread); None when it does not exist (any more)."""
        from kazoo.exceptions import NoNodeError

        timeout = self.session.session_timeout_s
        topic_async = self.zk.get_async(zl.topic_path(name))
        config_async = self.zk.get_async(zl.config_path(name))
        try:
            data, stat = topic_async.get(timeout=timeout)
        except NoNodeError:
            return None
        topic_id, assignment = zl.decode_topic(data, name, stat.czxid)
        try:
            config_data, config_stat = config_async.get(timeout=timeout)
            configs, config_key = zl.decode_config(config_data), node_key(config_stat)
        except NoNodeError:
            configs, config_key = {}, NO_KEY
        states = [self.zk.get_async(zl.state_path(name, i)) for i in range(len(assignment))]
        partitions: list[PartitionState] = []
        keys: list[Key] = []
        for replicas, pending in zip(assignment, states, strict=True):
            try:
                sdata, sstat = pending.get(timeout=timeout)
                partitions.append(zl.decode_state(sdata, sstat.version, replicas))
                partitions[-1].written_zxid = sstat.mzxid
                keys.append(node_key(sstat))
            except NoNodeError:  # written by a tool that leaves states to the controller
                partitions.append(PartitionState(list(replicas), -1, 0, [], -1))
                keys.append(NO_KEY)
        adding, removing = zl.decode_reassignment(data)
        for idx, st in enumerate(partitions):
            st.adding_replicas = adding.get(idx, [])
            st.removing_replicas = removing.get(idx, [])
        info = TopicInfo(name, topic_id, partitions, configs, name in INTERNAL_TOPICS)
        return TopicRead(info, node_key(stat), keys, config_key)

    def _read_brokers(self) -> dict[int, BrokerRegistration]:
        from kazoo.exceptions import NoNodeError

        out = {}
        children = self.zk.get_children(zl.BROKER_IDS)
        pending = [(c, self.zk.get_async(zl.broker_path(int(c)))) for c in children if c.isdigit()]
        for child, result in pending:
            try:
                data, stat = result.get(timeout=self.session.session_timeout_s)
            except NoNodeError:
                continue
            out[int(child)] = zl.decode_broker(int(child), data, stat.czxid)
        return out

    # -- changes (event loop only) ----------------------------------------------------------

    def put_topic(self, read: TopicRead) -> bool:
        """Take a topic read unless the cache holds something newer; True when it changed."""
        name = read.info.name
        if read.topic_key < self._topic_keys.get(name, NO_KEY):
            return False
        current = self.topics.get(name)
        same_topic = (
            current is not None
            and self._topic_keys.get(name) is not None
            and (self._topic_keys[name][0] == read.topic_key[0])
        )
        if same_topic and current is not None:  # keep partition states newer than the read
            for idx, key in enumerate(read.state_keys):
                if (
                    idx < len(current.partitions)
                    and self._state_keys.get((name, idx), NO_KEY) > key
                ):
                    read.info.partitions[idx] = current.partitions[idx]
                    read.state_keys[idx] = self._state_keys[(name, idx)]
            if self._config_keys.get(name, NO_KEY) > read.config_key:
                read.info.configs = current.configs
                read.config_key = self._config_keys[name]
        else:
            self._drop_state_keys(name)
        self.topics[name] = read.info
        self._topic_keys[name] = read.topic_key
        self._config_keys[name] = read.config_key
        for idx, key in enumerate(read.state_keys):
            self._state_keys[(name, idx)] = key
        return True

    def drop_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._topic_keys.pop(name, None)
        self._config_keys.pop(name, None)
        self._drop_state_keys(name)

    def _drop_state_keys(self, name: str) -> None:
        for key in [k for k in self._state_keys if k[0] == name]:
            del self._state_keys[key]

    def topic_version(self, name: str) -> int:
        """The version of the topic node this cache holds (-1: none)."""
        return self._topic_keys.get(name, NO_KEY)[1]

    def put_state(self, topic: str, idx: int, state: PartitionState, stat: ZnodeStat) -> bool:
        """Take a partition state this broker just wrote (`stat` of the written node)."""
        info = self.topics.get(topic)
        if info is None or idx >= len(info.partitions):
            return False
        state.partition_epoch = stat.version
        state.written_zxid = stat.mzxid
        info.partitions[idx] = state
        self._state_keys[(topic, idx)] = node_key(stat)
        return True

    def apply_controller(self, controller: int) -> None:
        if controller != self.controller:
            self.controller = controller
            log.info("controller is now broker %d", controller)
            self._notify(MetadataChange("broker"))

    # -- watches: read on kazoo's thread, apply on the loop ---------------------------------

    def start_watches(self) -> None:
        if self._watching:
            return
        self._watching = True
        self.zk.ChildrenWatch(zl.BROKER_IDS, self._on_broker_ids)
        self.zk.ChildrenWatch(zl.TOPICS, self._on_topic_names)
        self.zk.DataWatch(zl.CONTROLLER, self._on_controller)
        self.zk.DataWatch(zl.REASSIGN_PARTITIONS, self._on_reassign_request)

    def _on_reassign_request(self, data: bytes | None, stat: ZnodeStat) -> None:
        if data is not None and not self.session.closed:
            self.session.post(self._notify, MetadataChange("reassign-request"))

    def _on_broker_ids(self, children: list[str]) -> None:
        for child in children:
            path = f"{zl.BROKER_IDS}/{child}"
            if child.isdigit() and path not in self._watched:
                self._watched.add(path)
                self.zk.DataWatch(path, lambda data, stat: self._refresh_brokers())
        self._refresh_brokers()

    def _refresh_brokers(self) -> None:
        if self.session.closed:
            return
        try:
            brokers = self._read_brokers()
        except Exception:
            self._read_failed("broker registrations")
            return
        self.session.post(self._apply_brokers, brokers)

    def _read_failed(self, what: str) -> None:
        """A read from a watch callback failed: when the session closed under it (the broker
        is stopping, e.g. halting on a failed log dir) that is expected and only noted."""
        if self.session.closed:
            log.debug("reading %s from ZooKeeper: the session closed", what)
        else:
            log.exception("reading %s from ZooKeeper failed", what)

    def _apply_brokers(self, brokers: dict[int, BrokerRegistration]) -> None:
        own = self._own_registration()
        if own is not None and own.node_id not in brokers:
            # our own node is on its way back (session re-established) or this read predates it
            brokers[own.node_id] = own
        if brokers != self.brokers:
            self.brokers = brokers
            self._notify(MetadataChange("broker"))

    def _on_topic_names(self, children: list[str]) -> None:
        for name in children:
            path = zl.topic_path(name)
            if path in self._watched:
                continue
            self._watched.add(path)
            self.zk.DataWatch(path, partial(self._on_topic_node, name))
            self.zk.DataWatch(zl.config_path(name), partial(self._on_config_node, name))

    def _on_topic_node(self, name: str, data: bytes | None, stat: ZnodeStat) -> None:
        if self.session.closed:
            return
        if data is None:
            seen = self._seen_topic_czxid.pop(name, None)
            if seen is not None:
                self.session.post(self._apply_topic_gone, name, seen)
            return
        self._seen_topic_czxid[name] = stat.czxid
        try:
            read = self.read_topic(name)
        except Exception:
            self._read_failed(f"topic {name}")
            return
        if read is None:
            return
        for idx in range(len(read.info.partitions)):
            path = zl.state_path(name, idx)
            if path not in self._watched:
                self._watched.add(path)
                self.zk.DataWatch(path, partial(self._on_state_node, name, idx))
        self.session.post(self._apply_topic, read)

    def _apply_topic(self, read: TopicRead) -> None:
        if self.put_topic(read):
            self._notify(MetadataChange("topic", read.info.name))

    def _apply_topic_gone(self, name: str, czxid: int) -> None:
        if name in self.topics and self._topic_keys.get(name, NO_KEY)[0] <= czxid:
            self.drop_topic(name)
            self._notify(MetadataChange("topic", name))

    def _on_state_node(self, name: str, idx: int, data: bytes | None, stat: ZnodeStat) -> None:
        if data is not None and not self.session.closed:
            self.session.post(self._apply_state, name, idx, data, node_key(stat), stat.mzxid)

    def _apply_state(self, name: str, idx: int, data: bytes, key: Key, mzxid: int) -> None:
        info = self.topics.get(name)
        if info is None or idx >= len(info.partitions):
            return  # the topic read that brings this partition is on its way
        if key[0] < self._topic_keys.get(name, NO_KEY)[0]:
            return  # a state of an older topic of the same name
        if key <= self._state_keys.get((name, idx), NO_KEY):
            return
        current = info.partitions[idx]
        state = zl.decode_state(data, key[1], current.replicas)
        state.written_zxid = mzxid
        # the assignment (and a reassignment's adding/removing replicas) is the topic node's
        state.adding_replicas = list(current.adding_replicas)
        state.removing_replicas = list(current.removing_replicas)
        info.partitions[idx] = state
        self._state_keys[(name, idx)] = key
        self._notify(MetadataChange("partition", name, idx))

    def _on_config_node(self, name: str, data: bytes | None, stat: ZnodeStat) -> None:
        if data is not None and not self.session.closed:
            self.session.post(self._apply_config, name, zl.decode_config(data), node_key(stat))

    def _apply_config(self, name: str, configs: dict[str, str], key: Key) -> None:
        info = self.topics.get(name)
        if info is None or key[0] < self._topic_keys.get(name, NO_KEY)[0]:
            return
        if key <= self._config_keys.get(name, NO_KEY):
            return
        self._config_keys[name] = key
        if configs != info.configs:
            info.configs = configs
            self._notify(MetadataChange("topic", name))

    def _on_controller(self, data: bytes | None, stat: ZnodeStat) -> None:
        if self.session.closed:
            return
        controller = zl.decode_controller(data)
        if controller < 0:
            controller = self._elect()
        self.session.post(self.apply_controller, controller)
