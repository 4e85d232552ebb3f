"""Several brokers in one process and one event loop, sharing an in-process metadata store.

Each broker is a complete `Broker` with its own listener and data directory under `base_dir`
(`broker-<id>/`, the shared metadata in `metadata/`); they replicate to each other over TCP like
separate machines would. `odradek cluster --brokers 3` and `odradek.testing.Cluster` run this.

Fault hooks (for tests): kill (unclean stop: the registration goes, as a lost ZooKeeper session)
and restart, stop (controlled shutdown) and start, cut a broker off from its peers (replica
fetches fail both ways while it stays registered, as a network partition between brokers) or
from clients (their connections close, new ones are refused; peers still replicate), and slow
a follower (its fetches wait before going out).

Defaults for a multi-broker cluster, unless configured: `default.replication.factor`,
`offsets.topic.replication.factor` and `transaction.state.log.replication.factor` are the
smaller of 3 and the number of brokers (Kafka's defaults for the internal topics are 3).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping

from odradek.broker.cluster.metadata_store import LocalMetadataStore, PartitionState
from odradek.broker.config import BrokerConfig
from odradek.broker.replication.manager import ReplicaManager
from odradek.broker.server import Broker

log = logging.getLogger(__name__)

PER_BROKER = ("node.id", "broker.id", "log.dirs", "log.dir", "listeners", "advertised.listeners")

BROKER_PRINCIPAL = "User:ANONYMOUS"  # the principal brokers reach each other as (PLAINTEXT)

REPLICATION_DEFAULTS = (
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
)


class LocalCluster:
    def __init__(
        self,
        brokers: int,
        base_dir: str,
        config: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        ports: list[int] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.size = brokers
        self.base_dir = os.path.abspath(base_dir)
        self.host = host
        self.overrides = {k: str(v) for k, v in (config or {}).items()}
        for key in REPLICATION_DEFAULTS:
            self.overrides.setdefault(key, str(min(3, brokers)))
        self.store = LocalMetadataStore.for_cluster(
            os.path.join(self.base_dir, "metadata"), self.overrides.get("cluster.id")
        )
        self.ports = {n: (ports[n] if ports else 0) for n in range(brokers)}
        self.brokers: dict[int, Broker | None] = {n: None for n in range(brokers)}
        self.cut_from_peers: set[int] = set()
        self.cut_from_clients: set[int] = set()
        self.slowed: dict[int, int] = {}

    # -- lifecycle --------------------------------------------------------------------------

    def data_dir(self, node: int) -> str:
        return os.path.join(self.base_dir, f"broker-{node}")

    def _config(self, node: int) -> BrokerConfig:
        props = {
            "node.id": str(node),
            "listeners": f"PLAINTEXT://{self.host}:{self.ports[node]}",
            "log.dirs": self.data_dir(node),
        }
        props.update({k: v for k, v in self.overrides.items() if k not in PER_BROKER})
        if props.get("authorizer.class.name", "").strip():
            # the brokers replicate over PLAINTEXT, as User:ANONYMOUS: that principal needs
            # CLUSTER_ACTION, so it is a super user (as Kafka's set-ups list the brokers' own
            # principal in super.users); ACLs then bind authenticated clients only
            users = [u.strip() for u in props.get("super.users", "").split(";") if u.strip()]
            if BROKER_PRINCIPAL not in users:
                props["super.users"] = ";".join([*users, BROKER_PRINCIPAL])
        return BrokerConfig(props)

    async def start(self) -> None:
        for node in range(self.size):
            await self.start_broker(node)

    async def start_broker(self, node: int) -> Broker:
        if self.brokers[node] is not None:
            raise RuntimeError(f"broker {node} is running")
        broker = Broker(self._config(node), store=self.store)
        _replication(broker).reachable = self._reachable
        _replication(broker).fetch_delay_ms = self.slowed.get(node, 0)
        broker.accept_gate = lambda writer, node=node: self._admit(node, writer)
        await broker.start()
        self.ports[node] = broker.bound[0].port
        self.brokers[node] = broker
        return broker

    async def stop_broker(self, node: int, clean: bool = True) -> None:
        """Stop one broker: clean is a controlled shutdown, unclean a kill -9."""
        broker = self.brokers[node]
        if broker is None:
            return
        self.brokers[node] = None
        await broker.stop(clean=clean)

    async def kill(self, node: int) -> None:
        await self.stop_broker(node, clean=False)

    async def restart(self, node: int, clean: bool = False) -> Broker:
        await self.stop_broker(node, clean=clean)
        return await self.start_broker(node)

    async def stop(self) -> None:
        for node in sorted(self.brokers, reverse=True):
            await self.stop_broker(node)
        await drain_connections()

    # -- views ------------------------------------------------------------------------------

    def running(self) -> list[int]:
        return [n for n, b in self.brokers.items() if b is not None]

    def address(self, node: int) -> str:
        return f"{self.host}:{self.ports[node]}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(n) for n in self.running())

    def any_broker(self) -> Broker:
        for node in self.running():
            broker = self.brokers[node]
            assert broker is not None
            return broker
        raise RuntimeError("no broker is running")

    def partition_state(self, topic: str, index: int) -> PartitionState:
        info = self.store.topics.get(topic)
        if info is None:
            raise KeyError(topic)
        return info.partitions[index]

    def settled(self, topic: str) -> bool:
        """Every running replica of every partition of `topic` acts on the current state."""
        info = self.store.topics.get(topic)
        if info is None:
            return False
        live = set(self.store.live_brokers())
        for idx, st in enumerate(info.partitions):
            if st.leader not in live:
                return False
            for node in st.replicas:
                broker = self.brokers.get(node)
                if broker is None or node not in live:
                    continue
                applied = _replication(broker).applied.get((topic, idx))
                if applied != (st.leader, st.leader_epoch):
                    return False
        return True

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("cluster did not reach the expected state in time")
            await asyncio.sleep(0.01)

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        configs: Mapping[str, object] | None = None,
    ) -> None:
        broker = self.any_broker()
        broker.topics.create_topic(
            name, partitions, replication_factor, {k: str(v) for k, v in (configs or {}).items()}
        )
        await self.wait_until(lambda: self.settled(name))

    # -- faults -----------------------------------------------------------------------------

    def cut_off_peers(self, node: int, cut: bool = True) -> None:
        """Partition `node` from the other brokers (it stays registered, clients reach it)."""
        (self.cut_from_peers.add if cut else self.cut_from_peers.discard)(node)
        log.info("broker %d %s its peers", node, "cut off from" if cut else "reconnected to")

    def cut_off_clients(self, node: int, cut: bool = True) -> None:
        """Close `node`'s client connections and refuse new ones (peers still replicate)."""
        (self.cut_from_clients.add if cut else self.cut_from_clients.discard)(node)
        broker = self.brokers[node]
        if cut and broker is not None:
            peers = self._peer_addresses()
            for conn in list(broker.connections):
                if conn.peer not in peers:
                    conn.close()
        log.info("broker %d %s its clients", node, "cut off from" if cut else "reconnected to")

    def slow_follower(self, node: int, delay_ms: int) -> None:
        """Delay every fetch `node` makes as a follower by `delay_ms` (0 restores)."""
        self.slowed[node] = delay_ms
        broker = self.brokers[node]
        if broker is not None:
            _replication(broker).fetch_delay_ms = delay_ms

    def heal(self) -> None:
        """Undo every cut and slow-down."""
        self.cut_from_peers.clear()
        self.cut_from_clients.clear()
        for node in list(self.slowed):
            self.slow_follower(node, 0)

    def _reachable(self, a: int, b: int) -> bool:
        return a not in self.cut_from_peers and b not in self.cut_from_peers

    def _peer_addresses(self) -> set[str]:
        out: set[str] = set()
        for broker in self.brokers.values():
            if broker is not None:
                out |= _replication(broker).peer_addresses()
        return out

    def _admit(self, node: int, writer: asyncio.BaseTransport) -> bool:
        if node not in self.cut_from_clients:
            return True
        peer = writer.get_extra_info("peername")
        return bool(peer) and f"{peer[0]}:{peer[1]}" in self._peer_addresses()


async def run_cluster(
    brokers: int,
    base_dir: str,
    config: Mapping[str, object],
    stop: asyncio.Event,
    host: str = "127.0.0.1",
    ports: list[int] | None = None,
) -> None:
    """Start a cluster, print each broker's address, run until `stop` is set, stop cleanly."""
    cluster = LocalCluster(brokers, base_dir, config, host=host, ports=ports)
    try:
        await cluster.start()
        for node in range(brokers):
            print(
                f"broker {node} listening on {cluster.address(node)} data={cluster.data_dir(node)}",
                flush=True,
            )
        listeners = ",".join(f"PLAINTEXT://{cluster.address(n)}" for n in range(brokers))
        print(f"odradek ready listeners={listeners} data={cluster.base_dir}", flush=True)
        await stop.wait()
    finally:
        await cluster.stop()


def main(brokers: int, base_dir: str, config: Mapping[str, object], host: str, port: int) -> int:
    """`odradek cluster --brokers N`: run until SIGTERM or Ctrl-C; 1 on a start failure."""
    import signal

    from odradek.log.config import ConfigError
    from odradek.log.manager import DataDirError

    ports = [port + n if port else 0 for n in range(brokers)]

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_cluster(brokers, base_dir, config, stop, host=host, ports=ports)

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


async def drain_connections(timeout: float = 2.0) -> None:
    """Let requests still running on closed connections finish (a long-polling fetch ends
    within its max wait), so the loop can close without cancelling them mid-way."""
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=timeout)


def _replication(broker: Broker) -> ReplicaManager:
    """A LocalCluster broker shares the cluster's metadata store, so it always replicates."""
    assert broker.replication is not None
    return broker.replication
