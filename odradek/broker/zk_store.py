"""Cluster metadata in Apache ZooKeeper, for brokers in separate processes or on several machines
(`zookeeper.connect`), in Kafka's classic layout (`zk_layout.py`), through kazoo.

How it maps the `MetadataStore` interface onto ZooKeeper:

- Registration is an ephemeral `/brokers/ids/<id>` node: it goes when the broker's session
  ends (a clean stop closes the session at once; after `kill -9` ZooKeeper expires it after
  `zookeeper.session.timeout.ms`). A broker restarted before its old session expired waits for
  the old node to go, as Kafka refuses to register over a live session.
- The controller is whoever created the ephemeral `/controller` node; every registered broker
  tries again when it disappears, and the winner bumps `/controller_epoch`.
- Conditional partition-state updates are `setData` with the expected znode version (the
  partition epoch), as Kafka's controller and AlterPartition path do in ZooKeeper mode.
- Creating a topic is one ZooKeeper transaction (assignment, config, every partition state), so
  no broker ever sees half a topic.
- Reads come from a cache, `topics` and the registrations, kept current by watches. kazoo calls
  watchers on its own thread; they read ZooKeeper there and hand the result to the event loop,
  which alone changes the cache, then notifies subscribers like the in-process store. Each cached
  node remembers its (creation zxid, version), so a late watch never undoes a newer write, and a
  topic deleted and created again under the same name is told apart from the old one.
- Writes are synchronous calls from the event loop: metadata changes are rare, and ZooKeeper
  answers a local write in about a millisecond.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from odradek.broker import zk_layout as zl
from odradek.broker.metadata_store import (
    PRODUCER_ID_BLOCK,
    BrokerRegistration,
    MetadataChange,
    MetadataStore,
    PartitionState,
    TopicExistsError,
    TopicInfo,
)
from odradek.broker.topics import INTERNAL_TOPICS

log = logging.getLogger(__name__)

Key = tuple[int, int]  # (czxid, version) of a znode: which of two reads is newer
NO_KEY: Key = (-1, -1)
REGISTRATION_POLL_S = 0.2
CAS_ATTEMPTS = 100


class ZooKeeperError(ValueError):
    """ZooKeeper cannot be reached or refuses what the broker needs (startup fails with it)."""


class _TopicRead:
    """One consistent-enough read of a topic: its info and the keys of the nodes read."""

    __slots__ = ("info", "topic_key", "state_keys", "config_key")

    def __init__(self, info: TopicInfo, topic_key: Key, state_keys: list[Key], config_key: Key):
        self.info = info
        self.topic_key = topic_key
        self.state_keys = state_keys
        self.config_key = config_key


def _key(stat: Any) -> Key:
    return (stat.czxid, stat.version)


class ZooKeeperMetadataStore(MetadataStore):
    clustered = True

    def __init__(
        self,
        connect: str,
        node_id: int,
        cluster_id: str | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
    ) -> None:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        self.connect = connect
        self.node_id = node_id
        self.session_timeout_s = session_timeout_ms / 1000
        self.topics: dict[str, TopicInfo] = {}
        self._subscribers = []
        self._brokers: dict[int, BrokerRegistration] = {}
        self._controller = -1
        self._controller_epoch = 0
        self._topic_keys: dict[str, Key] = {}
        self._state_keys: dict[tuple[str, int], Key] = {}
        self._config_keys: dict[str, Key] = {}
        self._registration: BrokerRegistration | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._watched: set[str] = set()  # paths with a DataWatch (callback thread only)
        self._seen_topic_czxid: dict[str, int] = {}  # callback thread only
        self._closed = False
        self._session_lost = False
        hosts, slash, chroot = connect.partition("/")
        self.zk = KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0),
        )
        try:
            self.zk.start(timeout=connection_timeout_ms / 1000)
        except Exception as exc:
            self.zk.stop()
            self.zk.close()
            raise ZooKeeperError(
                f"cannot connect to ZooKeeper at {connect} within {connection_timeout_ms} ms "
                f"({exc.__class__.__name__})"
            ) from None
        if slash and chroot.strip("/"):  # Kafka creates its chroot path on first start
            self.zk.ensure_path("/" + chroot.strip("/"))
            self.zk.chroot = "/" + chroot.strip("/")
        self.zk.add_listener(self._on_session_state)
        for path in zl.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        self.cluster_id = self._cluster_id(cluster_id)
        self._load()
        log.info("cluster metadata in ZooKeeper at %s (cluster id %s)", connect, self.cluster_id)

    @classmethod
    def from_config(cls, config: Any) -> ZooKeeperMetadataStore:
        return cls(
            str(config.get("zookeeper.connect")),
            int(config.node_id),
            config.get("cluster.id"),
            int(config.get("zookeeper.session.timeout.ms")),
            int(config.get("zookeeper.connection.timeout.ms")),
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    # -- start-up reads ---------------------------------------------------------------------

    def _cluster_id(self, configured: str | None) -> str:
        from kazoo.exceptions import NodeExistsError

        wanted = configured or _new_cluster_id()
        try:
            self.zk.create(zl.CLUSTER_ID, zl.encode_cluster_id(wanted), makepath=True)
        except NodeExistsError:
            pass
        data, _ = self.zk.get(zl.CLUSTER_ID)
        found = zl.decode_cluster_id(data)
        if configured and found != configured:
            raise ZooKeeperError(
                f"cluster.id {configured} does not match {found} in ZooKeeper at {self.connect}"
            )
        return found

    def _load(self) -> None:
        for name in self.zk.get_children(zl.TOPICS):
            read = self._read_topic(name)
            if read is not None:
                self._put_topic(read)
        self._brokers = self._read_brokers()
        self._controller = self._read_controller()

    def _read_topic(self, name: str) -> _TopicRead | None:
        """Read a topic's nodes (any thread); None when it does not exist (any more)."""
        from kazoo.exceptions import NoNodeError

        topic_async = self.zk.get_async(zl.topic_path(name))
        config_async = self.zk.get_async(zl.config_path(name))
        try:
            data, stat = topic_async.get(timeout=self.session_timeout_s)
        except NoNodeError:
            return None
        topic_id, assignment = zl.decode_topic(data, name, stat.czxid)
        try:
            config_data, config_stat = config_async.get(timeout=self.session_timeout_s)
            configs, config_key = zl.decode_config(config_data), _key(config_stat)
        except NoNodeError:
            configs, config_key = {}, NO_KEY
        states = [self.zk.get_async(zl.state_path(name, i)) for i in range(len(assignment))]
        partitions: list[PartitionState] = []
        keys: list[Key] = []
        for replicas, pending in zip(assignment, states, strict=True):
            try:
                sdata, sstat = pending.get(timeout=self.session_timeout_s)
                partitions.append(zl.decode_state(sdata, sstat.version, replicas))
                keys.append(_key(sstat))
            except NoNodeError:  # written by a tool that leaves states to the controller
                partitions.append(PartitionState(list(replicas), -1, 0, [], -1))
                keys.append(NO_KEY)
        info = TopicInfo(name, topic_id, partitions, configs, name in INTERNAL_TOPICS)
        return _TopicRead(info, _key(stat), keys, config_key)

    def _read_brokers(self) -> dict[int, BrokerRegistration]:
        from kazoo.exceptions import NoNodeError

        out = {}
        children = self.zk.get_children(zl.BROKER_IDS)
        pending = [(c, self.zk.get_async(zl.broker_path(int(c)))) for c in children if c.isdigit()]
        for child, result in pending:
            try:
                data, stat = result.get(timeout=self.session_timeout_s)
            except NoNodeError:
                continue
            out[int(child)] = zl.decode_broker(int(child), data, stat.czxid)
        return out

    def _read_controller(self) -> int:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(zl.CONTROLLER)
        except NoNodeError:
            return -1
        return zl.decode_controller(data)

    # -- the cache (event loop only) --------------------------------------------------------

    def _put_topic(self, read: _TopicRead) -> bool:
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
            for key in [k for k in self._state_keys if k[0] == name]:
                del self._state_keys[key]
        self.topics[name] = read.info
        self._topic_keys[name] = read.topic_key
        self._config_keys[name] = read.config_key
        for idx, key in enumerate(read.state_keys):
            self._state_keys[(name, idx)] = key
        return True

    def _drop_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._topic_keys.pop(name, None)
        self._config_keys.pop(name, None)
        for key in [k for k in self._state_keys if k[0] == name]:
            del self._state_keys[key]

    # -- watches: read on kazoo's thread, apply on the loop ---------------------------------

    def _start_watches(self) -> None:
        if self._watching:
            return
        self._watching = True
        self.zk.ChildrenWatch(zl.BROKER_IDS, self._on_broker_ids)
        self.zk.ChildrenWatch(zl.TOPICS, self._on_topic_names)
        self.zk.DataWatch(zl.CONTROLLER, self._on_controller)

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or self._closed:
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the broker is gone
            pass

    def _on_broker_ids(self, children: list[str]) -> None:
        for child in children:
            path = f"{zl.BROKER_IDS}/{child}"
            if child.isdigit() and path not in self._watched:
                self._watched.add(path)
                self.zk.DataWatch(path, lambda data, stat: self._refresh_brokers())
        self._refresh_brokers()

    def _refresh_brokers(self) -> None:
        if self._closed:
            return
        try:
            brokers = self._read_brokers()
        except Exception:
            log.exception("reading broker registrations from ZooKeeper failed")
            return
        self._post(self._apply_brokers, brokers)

    def _apply_brokers(self, brokers: dict[int, BrokerRegistration]) -> None:
        if self._registration is not None and self._registration.node_id not in brokers:
            # our own node is on its way back (session re-established) or this read predates it
            brokers[self._registration.node_id] = self._registration
        if brokers != self._brokers:
            self._brokers = brokers
            self._notify(MetadataChange("broker"))

    def _on_topic_names(self, children: list[str]) -> None:
        for name in children:
            path = zl.topic_path(name)
            if path in self._watched:
                continue
            self._watched.add(path)
            self.zk.DataWatch(path, partial(self._on_topic_node, name))
            self.zk.DataWatch(zl.config_path(name), partial(self._on_config_node, name))

    def _on_topic_node(self, name: str, data: bytes | None, stat: Any) -> None:
        if self._closed:
            return
        if data is None:
            seen = self._seen_topic_czxid.pop(name, None)
            if seen is not None:
                self._post(self._apply_topic_gone, name, seen)
            return
        self._seen_topic_czxid[name] = stat.czxid
        try:
            read = self._read_topic(name)
        except Exception:
            log.exception("reading topic %s from ZooKeeper failed", name)
            return
        if read is None:
            return
        for idx in range(len(read.info.partitions)):
            path = zl.state_path(name, idx)
            if path not in self._watched:
                self._watched.add(path)
                self.zk.DataWatch(path, partial(self._on_state_node, name, idx))
        self._post(self._apply_topic, read)

    def _apply_topic(self, read: _TopicRead) -> None:
        if self._put_topic(read):
            self._notify(MetadataChange("topic", read.info.name))

    def _apply_topic_gone(self, name: str, czxid: int) -> None:
        if name in self.topics and self._topic_keys.get(name, NO_KEY)[0] <= czxid:
            self._drop_topic(name)
            self._notify(MetadataChange("topic", name))

    def _on_state_node(self, name: str, idx: int, data: bytes | None, stat: Any) -> None:
        if data is not None and not self._closed:
            self._post(self._apply_state, name, idx, data, _key(stat))

    def _apply_state(self, name: str, idx: int, data: bytes, key: Key) -> None:
        info = self.topics.get(name)
        if info is None or idx >= len(info.partitions):
            return  # the topic read that brings this partition is on its way
        if key[0] < self._topic_keys.get(name, NO_KEY)[0]:
            return  # a state of an older topic of the same name
        if key <= self._state_keys.get((name, idx), NO_KEY):
            return
        info.partitions[idx] = zl.decode_state(data, key[1], info.partitions[idx].replicas)
        self._state_keys[(name, idx)] = key
        self._notify(MetadataChange("partition", name, idx))

    def _on_config_node(self, name: str, data: bytes | None, stat: Any) -> None:
        if data is not None and not self._closed:
            self._post(self._apply_config, name, zl.decode_config(data), _key(stat))

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

    def _on_controller(self, data: bytes | None, stat: Any) -> None:
        if self._closed:
            return
        controller = zl.decode_controller(data)
        if controller < 0 and self._registration is not None:
            controller = self._try_become_controller()
        self._post(self._apply_controller, controller)

    def _apply_controller(self, controller: int) -> None:
        if controller != self._controller:
            self._controller = controller
            log.info("controller is now broker %d", controller)
            self._notify(MetadataChange("broker"))

    def _try_become_controller(self) -> int:
        """Create `/controller` (any thread); returns who holds it afterwards."""
        from kazoo.exceptions import NodeExistsError

        try:
            self.zk.create(zl.CONTROLLER, zl.encode_controller(self.node_id), ephemeral=True)
        except NodeExistsError:
            return self._read_controller()
        except Exception:
            log.exception("controller election in ZooKeeper failed")
            return -1
        self._controller_epoch = self._bump_controller_epoch()
        log.info(
            "broker %d won the controller election (epoch %d)", self.node_id, self._controller_epoch
        )
        return self.node_id

    def _bump_controller_epoch(self) -> int:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        for _ in range(CAS_ATTEMPTS):
            try:
                data, stat = self.zk.get(zl.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.zk.create(zl.CONTROLLER_EPOCH, b"1")
                    return 1
                except NodeExistsError:
                    continue
            epoch = int(data or b"0") + 1
            try:
                self.zk.set(zl.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:
                continue
        raise ZooKeeperError("could not bump /controller_epoch")

    def _on_session_state(self, state: str) -> None:
        """kazoo's connection listener: after an expired session, register again."""
        from kazoo.protocol.states import KazooState

        if self._closed:
            return
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost: this broker is unregistered until it reconnects")
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.zk.handler.spawn(self._register_again)

    def _register_again(self) -> None:
        reg = self._registration
        if reg is None or self._closed:
            return
        try:
            self._create_registration(reg)
            log.info("broker %d registered again after a new ZooKeeper session", reg.node_id)
            controller = self._try_become_controller()
            self._post(self._apply_controller, controller)
        except Exception:
            log.exception("registering again in ZooKeeper failed")

    # -- MetadataStore: subscriptions -------------------------------------------------------

    def subscribe(self, fn: Any) -> None:
        super().subscribe(fn)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._start_watches()

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

    def _add_partition_nodes(self, txn: Any, info: TopicInfo, start: int) -> None:
        for idx in range(start, len(info.partitions)):
            state = zl.encode_state(info.partitions[idx], self._controller_epoch)
            txn.create(zl.partition_path(info.name, idx), b"")
            txn.create(zl.state_path(info.name, idx), state)

    def _commit_and_read(self, txn: Any, name: str) -> tuple[list[Exception], _TopicRead | None]:
        """Commit a topic transaction, then read the topic back into the cache (whoever won)."""
        failed = [r for r in txn.commit() if isinstance(r, Exception)]
        read = self._read_topic(name)
        if read is not None:
            self._put_topic(read)
        return failed, read

    def delete_topic(self, name: str) -> None:
        from kazoo.exceptions import NoNodeError

        for path in (zl.topic_path(name), zl.config_path(name)):
            try:
                self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass
        self._drop_topic(name)
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
        """A block [start, end) of producer ids: a conditional update of Kafka's
        `/latest_producer_id_block` (its block_end is inclusive)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        for _ in range(CAS_ATTEMPTS):
            try:
                data, stat = self.zk.get(zl.PRODUCER_ID_BLOCK)
            except NoNodeError:
                block = zl.encode_producer_id_block(self.node_id, 0, PRODUCER_ID_BLOCK - 1)
                try:
                    self.zk.create(zl.PRODUCER_ID_BLOCK, block)
                    return 0, PRODUCER_ID_BLOCK
                except NodeExistsError:
                    continue
            start = zl.decode_producer_id_block_end(data) + 1
            block = zl.encode_producer_id_block(self.node_id, start, start + PRODUCER_ID_BLOCK - 1)
            try:
                self.zk.set(zl.PRODUCER_ID_BLOCK, block, version=stat.version)
                return start, start + PRODUCER_ID_BLOCK
            except BadVersionError:
                continue
        raise ZooKeeperError("could not allocate a producer id block (too much contention)")

    # -- MetadataStore: brokers and the controller ------------------------------------------

    def register_broker(self, registration: BrokerRegistration) -> None:
        self._create_registration(registration)
        self._registration = registration
        self._brokers[registration.node_id] = registration
        log.info(
            "broker %d registered at %s:%d in ZooKeeper",
            registration.node_id,
            registration.host,
            registration.port,
        )
        self._notify(MetadataChange("broker", node_id=registration.node_id))
        if self._read_controller() < 0:
            self._apply_controller(self._try_become_controller())

    def _create_registration(self, reg: BrokerRegistration) -> None:
        """Create our ephemeral node, waiting out a previous session's node (bounded)."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        path = zl.broker_path(reg.node_id)
        deadline = time.monotonic() + 2 * self.session_timeout_s + 5
        waited = False
        while True:
            try:
                self.zk.create(path, zl.encode_broker(reg), ephemeral=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    self.zk.set(path, zl.encode_broker(reg))
                    break
                if time.monotonic() > deadline:
                    raise ZooKeeperError(
                        f"broker id {reg.node_id} is registered in ZooKeeper by a live session"
                    ) from None
                if not waited:
                    waited = True
                    log.warning(
                        "broker id %d is still registered by an earlier session; waiting for "
                        "ZooKeeper to expire it",
                        reg.node_id,
                    )
                time.sleep(REGISTRATION_POLL_S)
        _, stat = self.zk.get(path)
        reg.broker_epoch = stat.czxid

    def unregister_broker(self, node_id: int) -> None:
        from kazoo.exceptions import NoNodeError

        if self._registration is None or node_id != self._registration.node_id:
            return
        self._registration = None
        for path in (zl.broker_path(node_id), zl.CONTROLLER):
            try:
                _, stat = self.zk.get(path)
                if stat.ephemeralOwner == self.zk.client_id[0]:  # ours, not a successor's
                    self.zk.delete(path, version=stat.version)
            except NoNodeError:
                pass
            except Exception:
                log.exception("removing %s from ZooKeeper failed", path)
        if self._brokers.pop(node_id, None) is not None:
            log.info("broker %d unregistered from ZooKeeper", node_id)
            self._notify(MetadataChange("broker", node_id=node_id))

    def set_shutting_down(self, node_id: int) -> None:
        reg = self._registration
        if reg is None or reg.node_id != node_id or reg.shutting_down:
            return
        reg.shutting_down = True
        try:
            self.zk.set(zl.broker_path(node_id), zl.encode_broker(reg))
        except Exception as exc:  # e.g. the session just expired: the shutdown goes on
            log.warning("could not mark broker %d as shutting down: %r", node_id, exc)
        self._brokers[node_id] = reg
        self._notify(MetadataChange("broker", node_id=node_id))

    def live_brokers(self) -> list[int]:
        return sorted(self._brokers)

    def broker(self, node_id: int) -> BrokerRegistration | None:
        return self._brokers.get(node_id)

    def controller_id(self) -> int:
        return self._controller

    # -- MetadataStore: conditional partition updates ---------------------------------------

    def update_partitions(
        self, updates: list[tuple[str, int, PartitionState, int, int]]
    ) -> list[bool]:
        results = [False] * len(updates)
        pending: list[tuple[int, Any]] = []
        for i, (topic, idx, state, leader_epoch, partition_epoch) in enumerate(updates):
            info = self.topics.get(topic)
            if info is None or not 0 <= idx < len(info.partitions):
                continue
            current = info.partitions[idx]
            if (current.leader_epoch, current.partition_epoch) != (leader_epoch, partition_epoch):
                continue
            data = zl.encode_state(state, self._controller_epoch)
            path = zl.state_path(topic, idx)
            if partition_epoch < 0:
                pending.append((i, self.zk.create_async(path, data, makepath=True)))
            else:
                pending.append((i, self.zk.set_async(path, data, version=partition_epoch)))
        changed = []
        for i, result in pending:
            topic, idx, state, _, partition_epoch = updates[i]
            try:
                stat = result.get(timeout=self.session_timeout_s)
                if partition_epoch < 0:
                    stat = self.zk.exists(zl.state_path(topic, idx))
            except Exception as exc:  # BadVersion / NoNode: someone moved first
                log.debug("conditional update of %s-%d refused: %r", topic, idx, exc)
                continue
            info = self.topics.get(topic)
            if info is None or idx >= len(info.partitions) or stat is None:
                continue
            state.partition_epoch = stat.version
            info.partitions[idx] = state
            self._state_keys[(topic, idx)] = _key(stat)
            results[i] = True
            changed.append((topic, idx))
        for topic, idx in changed:
            self._notify(MetadataChange("partition", topic, idx))
        return results


def _new_cluster_id() -> str:
    import uuid

    return zl.encode_uuid(uuid.uuid4())
