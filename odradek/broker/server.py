"""The broker process: listeners, connections, storage, metadata and background work.

`Broker(config)` is started with `await broker.start()` and stopped with `await broker.stop()`
(clean: flush, checkpoints, clean-shutdown marker). The CLI and `odradek.testing` both use it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from odradek.broker import handlers  # noqa: F401  (registers every handler)
from odradek.broker.cluster.metadata_store import LocalMetadataStore, MetadataStore
from odradek.broker.config import BrokerConfig, Listener
from odradek.broker.dynamic_config import DynamicBrokerConfigs
from odradek.broker.network import scram_store
from odradek.broker.network.authz import build as build_authorizer
from odradek.broker.network.connection import Connection
from odradek.broker.network.listeners import ListenerSecurity, advertised_for
from odradek.broker.network.memory_pool import MemoryPool, tune_allocator
from odradek.broker.network.quotas import ClientQuotas
from odradek.broker.network.socket_options import configure_listening
from odradek.broker.ops.faults import FaultInjector
from odradek.broker.partitions.fetch_sessions import FetchSessionCache
from odradek.broker.partitions.internal_topics import InternalTopicCreator, offsets_replicated
from odradek.broker.partitions.log_dir_failure import LogDirFailureHandler
from odradek.broker.partitions.topics import TopicManager
from odradek.broker.registry_host import schema_registry
from odradek.broker.replication.manager import ReplicaManager
from odradek.broker.replication.single import SingleBrokerReplicas
from odradek.broker.telemetry.manager import ClientMetricsManager
from odradek.broker.transactions.host import install as install_transactions
from odradek.clock import now_ms
from odradek.coordinator.group.coordinator import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    GroupCoordinatorConfig,
)
from odradek.log import index_file, open_files
from odradek.log.cleaner import LogCleanerService
from odradek.log.manager import LogManager
from odradek.security.scram import ScramCredential, ScramMechanism

if TYPE_CHECKING:
    from odradek.broker.ops.admin_http import AdminHttpServer

log = logging.getLogger(__name__)

# Recovery points and log start offsets: Kafka's log.flush.offset.checkpoint.interval.ms and
# log.flush.start.offset.checkpoint.interval.ms defaults. High watermarks are written more often
# (replica.high.watermark.checkpoint.interval.ms).
OFFSET_CHECKPOINT_INTERVAL_S = 60.0


class Service(Protocol):
    """A part the broker starts and stops with itself (an optional `abandon()` is called,
    found with getattr, on an unclean stop instead of `stop()`)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class Broker:
    def __init__(self, config: BrokerConfig, store: MetadataStore | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.logs = LogManager(config.log_dirs)
        self._owns_store = store is None
        if store is None and config.get("zookeeper.connect"):
            from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore

            store = ZooKeeperMetadataStore.from_config(config)
        self.store = store or LocalMetadataStore(
            self.logs.dirs[0], self.node_id, config.get("cluster.id")
        )
        self.topics = TopicManager(config, self.store, self.logs, self.node_id, self.live_brokers)
        # dynamic broker configs (AlterConfigs on BROKER resources) over the static ones
        self.dynamic_configs = DynamicBrokerConfigs(config, self.store, self.topics, self.node_id)
        # listeners, protocols, TLS contexts, SASL mechanisms
        self.security = ListenerSecurity(config, self.scram_credential)
        self.servers: list[asyncio.base_events.Server] = []
        self.bound: list[Listener] = []
        self.connections: set[Connection] = set()
        # called once per client connection that closes while the broker runs (Kafka's
        # ConnectionDisconnectListener): state tied to a connection, such as share sessions
        self.disconnect_listeners: list[Callable[[Connection], None]] = []
        self.memory_pool = MemoryPool(config.get("queued.max.request.bytes"))
        tune_allocator()
        self.tasks: list[asyncio.Task[None]] = []
        self.services: list[Service] = []  # coordinators etc.: objects with start()/stop()
        self.services.append(self.dynamic_configs)
        self.faults = FaultInjector()
        self.fetch_sessions = FetchSessionCache()
        # KIP-714 client metrics: subscriptions, client instances, pushed metrics
        self.telemetry = ClientMetricsManager(
            lambda: self.store.client_metrics,
            int(config.get("telemetry.max.bytes")),
            receiver_configured=bool(config.get("metrics.listen")),
        )
        self.quotas = ClientQuotas.from_config(config.get, self.store)  # client quotas
        # ACLs (authorizer.class.name): None when off, and then no request is checked
        self.authorizer = build_authorizer(config, self.store)
        if self.authorizer is not None:
            self.services.append(self.authorizer)
        self.mutation_quotas = self.quotas.mutation
        self.services.append(self.quotas)
        # fault injection: a cut-off broker of an in-process cluster refuses client connections
        self.accept_gate: Callable[[asyncio.BaseTransport], bool] | None = None
        self.admin_http: AdminHttpServer | None = None
        self.metrics: BrokerMetrics | None = None  # imported only when enabled
        if config.get("metrics.listen"):
            from odradek.broker.ops.metrics import BrokerMetrics

            self.metrics = BrokerMetrics(self, config.get("metrics.listen"))
            self.services.append(self.metrics)
        if config.get("odradek.admin.listen"):  # fault-injection HTTP endpoint (admin_http.py)
            from odradek.broker.ops.admin_http import start_admin_http

            start_admin_http(self)
        self._producer_ids: tuple[int, int] = (0, 0)
        self.started_at = 0.0
        self.stopped = asyncio.Event()
        self._stopping = False

        def _offsets_partitions() -> int | None:
            info = self.topics.info(OFFSETS_TOPIC)
            return None if info is None else len(info.partitions)

        self.group_coordinator = GroupCoordinator(
            GroupCoordinatorConfig.from_broker(config.get),
            get_partition=lambda index: self.topics.get(OFFSETS_TOPIC, index),
            partition_count=_offsets_partitions,
            replicated=lambda group_id: offsets_replicated(self, group_id),
            topics=lambda: {
                name: (info.topic_id, len(info.partitions))
                for name, info in self.topics.store.topics.items()
            },
        )
        # per-group configs (KIP-848 session timeout and heartbeat interval)
        self.group_coordinator.consumer.group_configs = lambda g: self.store.group_configs.get(
            g, {}
        )
        self.group_coordinator.streams.group_configs = lambda g: self.store.group_configs.get(g, {})
        self.topics.listeners.append(self.group_coordinator)
        self.services.append(self.group_coordinator)

        self.log_cleaner = LogCleanerService(
            lambda: [(p.log, p.last_stable_offset) for p in self.topics.partitions.values()],
            enabled=bool(config.get("log.cleaner.enable")),
            backoff_ms=int(config.get("log.cleaner.backoff.ms")),
        )
        self.services.append(self.log_cleaner)
        self.txn_coordinator = install_transactions(self)
        # replication only with a cluster's metadata store; a standalone broker's replicas are
        # a null object with the same joints
        self.replication: ReplicaManager | None = None
        self.replicas: ReplicaManager | SingleBrokerReplicas
        if self.store.clustered:
            self.replicas = self.replication = ReplicaManager(self)
            self.services.append(self.replication)
        else:
            adv = self.advertised_listener
            self.replicas = SingleBrokerReplicas(
                self.node_id,
                lambda listener: (adv(listener).host, adv(listener).port),
                config.get("broker.rack"),
            )
        self.internal_topics = InternalTopicCreator(self)
        self.services.append(self.internal_topics)
        self.schema_registry = schema_registry(self)  # schema.registry.listeners
        if self.schema_registry is not None:
            self.services.append(self.schema_registry)
        self.log_dir_failure = LogDirFailureHandler(self)

    # -- cluster view ---------------------------------------------------------------------------

    def live_brokers(self) -> list[int]:
        return self.replicas.live_brokers()

    def broker_endpoints(
        self, listener: str | None = None
    ) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every live broker, as clients of `listener` (the
        listener a request came in on; None: the inter-broker one) should reach them."""
        return self.replicas.broker_endpoints(listener or self.security.inter_broker)

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """A user's SCRAM credential from the metadata store (AlterUserScramCredentials; in
        ZooKeeper `/config/users/<user>`, as Kafka), parsed once per stored value."""
        return scram_store.for_store(self.store).get(user, mechanism)

    def advertised_listener(self, name: str | None = None) -> Listener:
        """This broker's advertised address on listener `name` (None: the first advertised)."""
        return advertised_for(self.config, self.bound, name)

    @property
    def controller_id(self) -> int:
        return self.replicas.controller_id()

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    @property
    def bootstrap(self) -> str:
        b = self.bound[0]
        return f"{b.host}:{b.port}"

    # -- producer ids ---------------------------------------------------------------------------

    def next_producer_id(self) -> int:
        start, end = self._producer_ids
        if start >= end:
            start, end = self.store.allocate_producer_ids()
        self._producer_ids = (start + 1, end)
        return start

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self.started_at = time.monotonic()
        open_files.at_start()  # soft RLIMIT_NOFILE up to the hard limit; sizes the file LRU
        self.topics.load()
        open_files.check_partitions(len(self.logs.logs))  # warns when the limit is too low
        for svc in self.services:
            await svc.start()
        for listener in self.security.listeners:
            server = await asyncio.get_running_loop().create_server(
                lambda served=listener: Connection(self, served),
                listener.host or None,
                listener.port,
                reuse_address=True,
                ssl=listener.tls,
                start_serving=False,  # bound, not listening: SO_RCVBUF goes on first
            )
            configure_listening(server, self.config.get("socket.receive.buffer.bytes"))
            await server.start_serving()
            self.servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.bound.append(Listener(listener.name, listener.host or "0.0.0.0", port))
        self.replicas.on_listening()  # in a cluster: register, take up replicas
        self.tasks.append(asyncio.create_task(self._housekeeping(), name="housekeeping"))
        log.info(
            "odradek broker %d listening on %s, data in %s",
            self.node_id,
            ", ".join(f"{b.name}://{b.host}:{b.port}" for b in self.bound),
            ", ".join(self.logs.dirs),
        )

    def connection_closed(self, conn: Connection) -> None:
        if conn not in self.connections:
            return  # told already, or never accepted
        self.connections.discard(conn)
        if self._stopping:
            return  # a stopping broker keeps what it holds, as a killed one would
        for listener in self.disconnect_listeners:
            try:
                listener(conn)
            except Exception:
                log.exception("a connection-close listener failed")

    async def _housekeeping(self) -> None:
        """Retention and checkpoints, on Kafka's intervals."""
        retention_every = self.config.get("log.retention.check.interval.ms") / 1000
        hw_every = self.config.get("replica.high.watermark.checkpoint.interval.ms") / 1000
        last_retention = last_checkpoint = last_hw = time.monotonic()
        while True:
            await asyncio.sleep(min(retention_every, hw_every, 1.0))
            now = time.monotonic()
            try:
                if now - last_retention >= retention_every:
                    last_retention = now
                    self.run_retention()
                if now - last_checkpoint >= OFFSET_CHECKPOINT_INTERVAL_S:
                    last_checkpoint = last_hw = now
                    self.checkpoint()
                elif now - last_hw >= hw_every:
                    last_hw = now
                    self.checkpoint_high_watermarks()
                self.close_idle_connections(now)
                index_file.write_pending()  # index entries a live dump-log sees within 1 s
            except Exception:
                log.exception("housekeeping failed")

    def fail_disk(
        self, error: str | int | None, dir: str | None = None, ops: tuple[str, ...] | None = None
    ) -> None:
        """Fault injection: writes and fsyncs in log dir `dir` (every dir when None) fail with
        `error` ("ENOSPC", "EIO"; None clears). `ops` narrows it to ("write",) or ("fsync",)."""
        from odradek.log.disk_faults import FSYNC, WRITE, errno_for

        code = None if error is None else errno_for(error)
        self.logs.inject_fault(code, dir, ops or (WRITE, FSYNC))

    def drop_connections(self) -> int:
        """Close every client connection (fault injection); returns how many."""
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        log.info("dropped %d client connections", len(conns))
        return len(conns)

    def close_idle_connections(self, now: float) -> None:
        """Close connections idle longer than connections.max.idle.ms, as Kafka does."""
        idle = self.config.get("connections.max.idle.ms") / 1000
        for conn in list(self.connections):
            if now - conn.last_active > idle:
                log.info("closing idle connection from %s", conn.peer)
                conn.close()

    def run_retention(self) -> int:
        now = now_ms()
        deleted = 0
        for part in self.topics.partitions.values():
            deleted += part.log.apply_retention(now, part.high_watermark)
        return deleted

    def checkpoint(self) -> None:
        self._note_high_watermarks()
        self.logs.checkpoint()

    def checkpoint_high_watermarks(self) -> None:
        self._note_high_watermarks()
        self.logs.checkpoint_high_watermarks()

    def _note_high_watermarks(self) -> None:
        for (topic, idx), part in self.topics.partitions.items():
            self.logs.high_watermarks[(topic, idx)] = part.high_watermark

    async def stop(self, clean: bool = True) -> None:
        """Shut down. Clean: flush, checkpoint, clean-shutdown marker. Unclean (`clean=False`):
        drop everything as `kill -9` would, leaving recovery to the next start. A second call
        (e.g. after the broker halted on failed log dirs) does nothing."""
        if self._stopping:
            await self.stopped.wait()
            return
        self._stopping = True
        if clean:
            await self.replicas.controlled_shutdown()  # leadership moves away first
        for server in self.servers:
            server.close()
        await asyncio.gather(*(conn.stop() for conn in list(self.connections)))
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        for svc in reversed(self.services):
            if clean:
                await svc.stop()
            else:
                abandon = getattr(svc, "abandon", None)
                if abandon is not None:
                    abandon()
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except (TimeoutError, Exception):
                pass
        if clean:
            for (topic, idx), part in self.topics.partitions.items():
                self.logs.high_watermarks[(topic, idx)] = part.high_watermark
            self.logs.close()
        else:
            self.logs.abandon()
        if self._owns_store:
            self.store.close()  # a ZooKeeper session ends here: its ephemeral nodes go
        self.stopped.set()
        log.info("odradek broker %d stopped%s", self.node_id, "" if clean else " (unclean)")
