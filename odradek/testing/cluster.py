"""`Cluster`: several real brokers replicating to each other, inside the test process.

    from odradek.testing import Cluster

    with Cluster(brokers=3, topics={"orders": (3, 3)}) as cluster:   # 3 partitions, RF 3
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        cluster.kill(cluster.leader("orders", 0))       # clients fail over to the new leader
        cluster.wait_for_isr("orders", 0, size=2)
        cluster.restart(killed)                          # truncates, catches up, rejoins

The brokers share one event-loop thread and an in-process metadata store, each with its own
port and data dir, and replicate over TCP (see `odradek/broker/cluster/local_cluster.py`).
Fault hooks: `kill` / `restart` / `stop_broker` (controlled shutdown) / `start_broker`,
`cut_off_peers`, `cut_off_clients`, `slow_follower`, `heal`, per broker `fail` / `delay` of
chosen requests by API key (as `odradek.testing.Broker`), and a full or failing disk per broker with
`fail_disk(node, "ENOSPC")` (or `cluster.brokers[node].fail_disk("ENOSPC")`). The `wait_for_*`
helpers poll with a deadline.

With `security="sasl_ssl"` (or "ssl", "mtls", "sasl_plaintext"; `mechanism`, `users`,
`plaintext_too` as `odradek.testing.Broker`) every broker serves that listener, the brokers
replicate and send markers to each other over it, authenticated as `security.broker_principal`
(a super user), and `client_config()` / `kafka_python_config()` / `aiokafka_config()` /
`java_properties()` give the clients' settings for the cluster's bootstrap.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, overload

from odradek.broker.cluster.local_cluster import PER_BROKER, LocalCluster, drain_connections
from odradek.broker.cluster.metadata_store import PartitionState
from odradek.broker.config import BrokerConfig
from odradek.broker.ops.faults import FaultRule, api_key, error_code
from odradek.broker.server import Broker as BrokerServer
from odradek.testing.loop_thread import LoopThread, T
from odradek.testing.security import ClientSettings, Security
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

TIMEOUT_S = 30.0
POLL_S = 0.02

TopicSpec = int | tuple[int, int]  # partitions, or (partitions, replication factor)

# Replication timings for tests that fail brokers over: followers long-poll for 100 ms and leave
# the ISR after 1 s without catching up; groups rebalance without the initial delay.
FAST_FAILOVER: dict[str, str] = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "100",
    "group.initial.rebalance.delay.ms": "0",
}


class Cluster(ClientSettings):
    """An in-process cluster of `brokers` brokers (ids 0..n-1). Context manager, or
    start() / stop()."""

    def __init__(
        self,
        brokers: int = 3,
        topics: Mapping[str, TopicSpec] | None = None,
        config: Mapping[str, Any] | None = None,
        data_dir: str | None = None,
        host: str = "127.0.0.1",
        *,
        security: str | Security | None = None,
        mechanism: str | None = None,
        users: Mapping[str, str] | None = None,
        plaintext_too: bool = False,
    ) -> None:
        self.size = brokers
        self.topics = dict(topics or {})
        self.config = dict(config or {})
        self.security: Security | None = None
        if isinstance(security, Security):
            self.security = security
        elif security is not None:
            self.security = Security(security, mechanism, users, plaintext_too=plaintext_too)
        elif mechanism is not None or users is not None or plaintext_too:
            raise ValueError("mechanism, users and plaintext_too go with security=...")
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="odradek-cluster-")
        self.host = host
        self.local: LocalCluster | None = None
        self._loop_thread = LoopThread("odradek-cluster", TIMEOUT_S)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Cluster:
        async def boot() -> None:
            if self.security is None:
                self.local = LocalCluster(self.size, self.data_dir, self.config, host=self.host)
            else:
                self.local = SecureLocalCluster(
                    self.security, self.size, self.data_dir, self.config, host=self.host
                )
                self.security.install_scram(self.local.store)
            await self.local.start()

        try:
            self._loop_thread.start(boot, self._teardown)
            for name, spec in self.topics.items():
                partitions, rf = spec if isinstance(spec, tuple) else (spec, -1)
                self.create_topic(name, partitions, rf)
        except BaseException:
            self.stop()
            raise
        return self

    async def _teardown(self) -> None:
        if self.local is not None:
            await self.local.stop()
        await drain_connections()

    def stop(self) -> None:
        """Stop every broker (controlled) and remove the data dir when this object made it."""
        self._loop_thread.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.security is not None and self.security._own_dir:
            shutil.rmtree(self.security.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Typed for the one-argument form every caller uses; extra `args` are passed through.
    @overload
    def call(self, fn: Callable[[LocalCluster], Coroutine[Any, Any, T]]) -> T: ...
    @overload
    def call(self, fn: Callable[[LocalCluster], T]) -> T: ...
    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(local_cluster, *args)` on the cluster's loop (coroutines are awaited)."""
        assert self.local is not None
        return self._loop_thread.call(fn, self.local, *args)

    # -- topics and views -------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        config: Mapping[str, Any] | None = None,
    ) -> str:
        """Create a topic and wait until every replica has taken up its role."""
        self.call(lambda c: c.create_topic(name, partitions, replication_factor, config))
        return name

    @property
    def bootstrap(self) -> str:
        """Addresses of the running brokers, comma separated."""
        return self.call(lambda c: c.bootstrap)

    def address(self, node: int) -> str:
        return self.call(lambda c: c.address(node))

    @property
    def plaintext_bootstrap(self) -> str:
        """The running brokers' PLAINTEXT listeners (`plaintext_too=True`), comma separated."""

        def read(c: LocalCluster) -> str:
            if not isinstance(c, SecureLocalCluster):
                return c.bootstrap
            return ",".join(f"{self.host}:{c.listener_ports[n]['PLAINTEXT']}" for n in c.running())

        return self.call(read)

    def running(self) -> list[int]:
        return self.call(lambda c: c.running())

    def schema_registry_url(self, node: int, timeout: float = TIMEOUT_S) -> str:
        """http://host:port of `node`'s built-in Schema Registry, once it has loaded `_schemas`
        (the cluster needs `schema.registry.listeners`, e.g. http://127.0.0.1:0, in `config`)."""

        def read(c: LocalCluster) -> str | None:
            broker = c.brokers[node]
            registry = None if broker is None else broker.schema_registry
            if registry is None:
                raise RuntimeError(f"broker {node} runs no schema registry")
            return registry.url if registry.ready.is_set() else None

        self.wait_until(lambda: self.call(read) is not None, timeout, f"registry of {node}")
        url = self.call(read)
        assert url is not None
        return url

    def partition(self, topic: str, index: int = 0) -> PartitionState:
        """The partition's state in the metadata store (a copy)."""

        def read(c: LocalCluster) -> PartitionState:
            st = c.partition_state(topic, index)
            return PartitionState(
                list(st.replicas),
                st.leader,
                st.leader_epoch,
                list(st.isr),
                st.partition_epoch,
                list(st.adding_replicas),
                list(st.removing_replicas),
            )

        return self.call(read)

    def leader(self, topic: str, index: int = 0) -> int:
        return self.partition(topic, index).leader

    def isr(self, topic: str, index: int = 0) -> list[int]:
        return self.partition(topic, index).isr

    def high_watermark(self, node: int, topic: str, index: int = 0) -> int:
        def read(c: LocalCluster) -> int:
            broker = c.brokers[node]
            part = broker.topics.get(topic, index) if broker is not None else None
            return -1 if part is None else part.high_watermark

        return self.call(read)

    def log_end_offset(self, node: int, topic: str, index: int = 0) -> int:
        def read(c: LocalCluster) -> int:
            broker = c.brokers[node]
            part = broker.topics.get(topic, index) if broker is not None else None
            return -1 if part is None else part.log.log_end_offset

        return self.call(read)

    def producer_batches(
        self, node: int, topic: str, index: int = 0
    ) -> list[tuple[int, int, int, int, int]]:
        """(base offset, last offset, producer id, producer epoch, base sequence) of every
        batch in `node`'s replica, read from its headers (for checkers)."""

        def read(c: LocalCluster) -> list[tuple[int, int, int, int, int]]:
            broker = c.brokers[node]
            part = broker.topics.get(topic, index) if broker is not None else None
            if part is None:
                return []
            out = []
            for batch in part.log.batches():
                h = batch.header()
                out.append(
                    (h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence)
                )
            return out

        return self.call(read)

    # -- waiting ----------------------------------------------------------------------------

    def wait_until(
        self, predicate: Callable[[], bool], timeout: float = 15.0, what: str = ""
    ) -> None:
        """Poll `predicate` (called in the test's thread) until it holds, or fail."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")
            time.sleep(POLL_S)

    def wait_for_leader(
        self, topic: str, index: int = 0, *, not_on: int | None = None, timeout: float = 15.0
    ) -> int:
        """Wait until the partition has a live leader (other than `not_on`), settled on every
        running replica; return it."""

        def ok(c: LocalCluster) -> bool:
            st = c.partition_state(topic, index)
            return st.leader != not_on and st.leader in c.running() and c.settled(topic)

        self.wait_until(lambda: self.call(ok), timeout, f"a leader of {topic}-{index}")
        return self.leader(topic, index)

    def wait_for_isr(
        self,
        topic: str,
        index: int = 0,
        *,
        size: int | None = None,
        members: set[int] | None = None,
        timeout: float = 15.0,
    ) -> list[int]:
        """Wait until the ISR has `size` members (or exactly `members`); return it."""

        def ok() -> bool:
            isr = set(self.isr(topic, index))
            if members is not None and isr != set(members):
                return False
            return size is None or len(isr) == size

        self.wait_until(ok, timeout, f"the ISR of {topic}-{index} ({size=}, {members=})")
        return self.isr(topic, index)

    def wait_for_replication(self, topic: str, index: int = 0, timeout: float = 15.0) -> None:
        """Wait until every running replica's log ends where the leader's does."""

        def ok(c: LocalCluster) -> bool:
            st = c.partition_state(topic, index)
            ends = set()
            for node in st.replicas:
                broker = c.brokers.get(node)
                part = broker.topics.get(topic, index) if broker is not None else None
                if part is not None:
                    ends.add(part.log.log_end_offset)
            return len(ends) == 1

        self.wait_until(lambda: self.call(ok), timeout, f"replicas of {topic}-{index} to match")

    # -- faults -----------------------------------------------------------------------------

    def kill(self, node: int) -> None:
        """Stop `node` as kill -9 would: no flush, no controlled shutdown; its registration
        goes and the controller elects new leaders for what it led."""
        self.call(lambda c: c.kill(node))

    def stop_broker(self, node: int) -> None:
        """Stop `node` cleanly, moving its leadership away first (controlled shutdown)."""
        self.call(lambda c: c.stop_broker(node, clean=True))

    def start_broker(self, node: int) -> None:
        """Start a stopped or killed broker again on its port and data dir."""
        self.call(lambda c: c.start_broker(node))

    def restart(self, node: int, abrupt: bool = True) -> None:
        """Stop `node` (killed unless abrupt=False) if running, and start it again."""
        self.call(lambda c: c.restart(node, clean=not abrupt))

    def cut_off_peers(self, node: int, cut: bool = True) -> None:
        """Partition `node` from the other brokers; clients still reach it."""
        self.call(lambda c: c.cut_off_peers(node, cut))

    def cut_off_clients(self, node: int, cut: bool = True) -> None:
        """Close `node`'s client connections and refuse new ones; peers still replicate."""
        self.call(lambda c: c.cut_off_clients(node, cut))

    def slow_follower(self, node: int, delay_ms: int) -> None:
        """Hold each of `node`'s follower fetches for `delay_ms` (0 restores)."""
        self.call(lambda c: c.slow_follower(node, delay_ms))

    def heal(self) -> None:
        """Undo every cut and slow-down, and clear injected request faults."""
        self.call(lambda c: c.heal())
        for node in self.running():
            self.clear_faults(node)

    def fail(
        self, node: int, api: ApiKey | int | str, error: ErrorCode | int | str, count: int = 1
    ) -> None:
        """Answer the next `count` requests of `api` to `node` with `error`."""
        rule = FaultRule(api_key(api), count, error_code(error))
        self._on_broker(node, lambda b: b.faults.add(rule))

    def delay(self, node: int, api: ApiKey | int | str, ms: int, count: int = 1) -> None:
        """Hold the next `count` requests of `api` to `node` for `ms` milliseconds."""
        rule = FaultRule(api_key(api), count, None, ms)
        self._on_broker(node, lambda b: b.faults.add(rule))

    def fail_disk(
        self,
        node: int,
        error: str | None,
        dir: str | None = None,
        ops: tuple[str, ...] | None = None,
    ) -> None:
        """Writes and fsyncs in `node`'s log dir fail with `error` ("ENOSPC", "EIO"). Its next
        append (as leader or follower) takes the dir offline and, with every dir offline, the
        broker halts as Kafka's does: the controller moves its leadership to other replicas.
        `fail_disk(node, None)` clears the fault and starts a halted broker again (its logs
        are recovered), or restarts one whose dir went offline; a broker that wrote nothing
        meanwhile just carries on. A stopped broker gets nothing injected."""

        async def run(c: LocalCluster) -> None:
            broker = c.brokers[node]
            if broker is None:
                return
            if error is not None:
                broker.fail_disk(error, dir, ops)
                return
            broker.fail_disk(None, dir, ops)
            if broker.stopped.is_set() or broker.logs.offline_dirs:
                await c.restart(node, clean=False)

        self.call(run)

    @property
    def brokers(self) -> list[BrokerHandle]:
        """Per-broker handles (`cluster.brokers[i].fail_disk("ENOSPC")`)."""
        return [BrokerHandle(self, node) for node in range(self.size)]

    def clear_faults(self, node: int) -> None:
        self._on_broker(node, lambda b: b.faults.clear())

    def _on_broker(self, node: int, fn: Callable[[Any], Any]) -> Any:
        def run(c: LocalCluster) -> Any:
            broker = c.brokers[node]
            if broker is None:
                raise RuntimeError(f"broker {node} is not running")
            return fn(broker)

        return self.call(run)


class BrokerHandle:
    """One broker of a `Cluster`, for per-broker fault hooks."""

    def __init__(self, cluster: Cluster, node: int) -> None:
        self.cluster = cluster
        self.node = node

    def fail_disk(
        self, error: str | None, dir: str | None = None, ops: tuple[str, ...] | None = None
    ) -> None:
        """As `Cluster.fail_disk(node, ...)`."""
        self.cluster.fail_disk(self.node, error, dir, ops)


class SecureLocalCluster(LocalCluster):
    """A LocalCluster whose brokers serve `security`'s listeners (each keeping its ports across
    restarts), with the security keys laid under the cluster's config."""

    def __init__(self, security: Security, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.security = security
        self.listener_ports: dict[int, dict[str, int]] = {n: {} for n in range(self.size)}

    def _config(self, node: int) -> BrokerConfig:
        extra_supers = self.overrides.get("super.users")
        props = {
            "node.id": str(node),
            "listeners": self.security.listeners(self.host, self.listener_ports[node]),
            "log.dirs": self.data_dir(node),
            **self.security.broker_config(extra_supers),
        }
        props.update(
            {k: v for k, v in self.overrides.items() if k not in PER_BROKER and k != "super.users"}
        )
        return BrokerConfig(props)

    async def start_broker(self, node: int) -> BrokerServer:
        broker = await super().start_broker(node)
        self.listener_ports[node] = {b.name: b.port for b in broker.bound}
        return broker


async def run_secure_cluster(
    security: Security,
    brokers: int,
    base_dir: str,
    config: Mapping[str, Any],
    stop: asyncio.Event,
    host: str = "127.0.0.1",
    ports: list[int] | None = None,
) -> None:
    """`odradek cluster --brokers N --security ...`: start the brokers with `security`'s
    listeners (the secure one on `ports`), print each broker, the client properties (files in
    the security directory) and the ready line; run until `stop` is set, stop cleanly."""
    from odradek.testing.security import print_client_properties

    local = SecureLocalCluster(security, brokers, base_dir, config, host=host)
    for node in range(brokers):
        if ports and ports[node]:
            local.listener_ports[node] = {security.listener: ports[node]}
    security.install_scram(local.store)
    try:
        await local.start()
        for node in range(brokers):
            served = ",".join(
                f"{name}://{host}:{port}" for name, port in local.listener_ports[node].items()
            )
            print(f"broker {node} listening on {served} data={local.data_dir(node)}", flush=True)
        print_client_properties(security.describe(local.bootstrap))
        listeners = ",".join(
            f"{security.listener}://{host}:{local.listener_ports[n][security.listener]}"
            for n in range(brokers)
        )
        print(f"odradek ready listeners={listeners} data={local.base_dir}", flush=True)
        await stop.wait()
    finally:
        await local.stop()


def secure_cluster_main(
    brokers: int,
    base_dir: str,
    config: Mapping[str, Any],
    host: str,
    port: int,
    security: str,
    mechanism: str | None = None,
    users: Mapping[str, str] | None = None,
) -> int:
    """As `local_cluster.main`, with TLS / SASL (a throwaway CA in <base_dir>/security)."""
    import os
    import signal
    import sys

    from odradek.log.config import ConfigError
    from odradek.log.manager import DataDirError

    ports = [port + n if port else 0 for n in range(brokers)]
    try:
        material = Security(
            security, mechanism, users, directory=os.path.join(base_dir, "security")
        )
    except ValueError as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_secure_cluster(material, brokers, base_dir, config, stop, host, ports)

    try:
        asyncio.run(run())
    except OSError as exc:
        print(f"odradek: cannot start the cluster: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except (DataDirError, ConfigError, ValueError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
