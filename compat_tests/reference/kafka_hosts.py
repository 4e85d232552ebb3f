"""Three Apache Kafka 4.4 KRaft combined nodes (`process.roles=broker,controller`, one quorum), each
on its own host (a network namespace of `netns.Network` with its own 10.x address), the clients
on host `client`: the reference's counterpart of odradek's `HostCluster`, so that the same
nemesis (odradek/testing/jepsen/nemesis.py) and the same seeds run against Kafka itself.

    with KafkaHosts(work_dir) as kafka:
        result = run_seed(kafka, 7, SeedOptions(kinds=applicable(ALL, kafka.unsupported)[0]))

Hosts `b0`-`b2` are nodes 0-2: the broker listens on <address>:9092, the controller on
<address>:9093, each data dir (its log dir and the metadata log) is a tmpfs of its own
(`hosts.DISK_MB`) for disk-full. The nodes are `kafka_ref.KafkaNode`s (the same
server.properties, log configuration and JVM options as the reference fixtures), started with
`ip netns exec`. Kafka's keys are those of odradek's hosts where both have them (RF 3,
min.insync.replicas=2, unclean leader election off, a replica out of the ISR after 2 s), and
the KRaft broker session is 3 s (heartbeats every 0.5 s), as odradek's ZooKeeper session: a
broker cut off from the active controller is fenced, and loses its leaderships, within seconds.

The fault kinds that need odradek itself are `UNSUPPORTED` (with the reason).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from compat_tests.reference.kafka_ref import DEFAULT_VERSION, KafkaNode, KafkaReference
from odradek.testing.jepsen.hosts import BROKER_CONFIG, CLIENT, ProcessHosts
from odradek.testing.jepsen.metadata import MetadataReads
from odradek.testing.jepsen.netns import Network
from odradek.testing.raw import Closed, RawClient
from odradek.wire import protocol

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
READY_S = 60.0  # a restarted node (JVM start, log recovery) listening again
HEAP = "512m"
METADATA_TOPIC = "__cluster_metadata"

# the odradek cluster's settings (the same topics, ISR, timeouts and cleanup intervals), without
# its ZooKeeper session's
KAFKA_CONFIG: dict[str, str] = {
    **{k: v for k, v in BROKER_CONFIG.items() if not k.startswith("zookeeper.")},
    # KRaft's counterpart of odradek's 3 s ZooKeeper session: the controller fences a broker
    # whose heartbeats stop for 3 s (default 9 s, heartbeats every 2 s)
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}

UNSUPPORTED: dict[str, str] = {
    "power-loss": "needs the fsync journal odradek's log keeps under the power-loss hook "
    "(odradek.log.power_loss) to roll a data dir back to what was fsync'd",
    "eio": "injected by odradek's admin endpoint (odradek.log.disk_faults)",
    "clock-jump": "a broker's wall clock is shifted through odradek's admin endpoint "
    "(odradek.clock); a JVM's clock cannot be shifted alone",
}


class _Quorum(KafkaReference):
    """The nodes as the reference knows them (format, readiness, logs), voters on the hosts'
    addresses."""

    def __init__(self, hosts: KafkaHosts, overrides: Mapping[str, str], heap: str) -> None:
        super().__init__(DEFAULT_VERSION, hosts.work, nodes=0, overrides=overrides, heap=heap)
        self.hosts = hosts

    def voters(self) -> str:
        return ",".join(
            f"{n.node_id}@{self.hosts.addr(f'b{n.node_id}')}:{CONTROLLER_PORT}" for n in self.nodes
        )


class HostNode(KafkaNode):
    """A combined node on host `b<id>`: listeners on its own address, started in its namespace."""

    def __init__(self, quorum: _Quorum, node_id: int) -> None:
        super().__init__(quorum, node_id)
        self.hosts = quorum.hosts
        self.host = f"b{node_id}"
        self.dir = quorum.work_dir / self.host
        self.data_dir = self.dir / "data"
        self.port, self.controller_port = BROKER_PORT, CONTROLLER_PORT

    @property
    def address(self) -> str:
        return self.hosts.addr(self.host)

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{self.port}"

    def properties(self) -> dict[str, str]:
        props = super().properties()
        props["listeners"] = (
            f"PLAINTEXT://{self.address}:{self.port},"
            f"CONTROLLER://{self.address}:{self.controller_port}"
        )
        props["advertised.listeners"] = f"PLAINTEXT://{self.address}:{self.port}"
        return props

    def start(self) -> None:
        config = self.dir / "server.properties"
        argv = self.java_command("kafka.Kafka", str(config))
        self.proc = self.hosts.net.spawn(
            self.host, argv, str(self.dir / "stdout.log"), cwd=str(self.dir)
        )


class KafkaHosts(ProcessHosts, MetadataReads):
    """Three KRaft combined nodes on hosts b0-b2 of one `Network`, clients on `client`
    (`deployment.Deployment`)."""

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        nodes: int = 3,
        overrides: Mapping[str, str] | None = None,
        heap: str = HEAP,
    ) -> None:
        self.work = Path(work_dir)
        self.brokers = [f"b{i}" for i in range(nodes)]
        self.quorum = _Quorum(self, {**KAFKA_CONFIG, **(overrides or {})}, heap)
        self.nodes = [HostNode(self.quorum, i) for i in range(nodes)]
        self.quorum.nodes = list(self.nodes)
        self.net = Network([*self.brokers, CLIENT])  # last: its namespaces are made here
        self.paused: set[str] = set()
        self.disks: set[str] = set()
        self._admin = None

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    # -- the deployment's names -----------------------------------------------------------------

    @property
    def zookeeper(self) -> tuple[str, ...]:
        return ()

    @property
    def unsupported(self) -> dict[str, str]:
        return UNSUPPORTED

    def addr(self, host: str) -> str:
        return self.net.addresses[host]

    def node(self, host: str) -> HostNode:
        return self.nodes[self.brokers.index(host)]

    def cut_from_quorum(self, cut: set[str]) -> str:
        """zk-cut's KRaft analogue: every cut node loses the controller listener (port 9093) of
        every other node, both ways, and keeps its broker links. As a voter it cannot vote or
        fetch the metadata log (an active controller among them resigns), as a broker it cannot
        heartbeat (the controller fences it after broker.session.timeout.ms); with two of three
        cut there is no quorum, and the brokers keep serving from the metadata they have, as
        ZooKeeper-mode brokers do with ZooKeeper gone."""
        for a in cut:
            self.net.isolate_port({a}, set(self.brokers) - {a}, CONTROLLER_PORT)
        return f"controller quorum (port {CONTROLLER_PORT}) cut from {sorted(cut)}"

    def others(self, host: str) -> set[str]:
        return {h for h in self.net.hosts if h != host}

    def journal(self, broker: str) -> str:
        return ""  # no power-loss journal: Kafka's fsyncs are its own

    def data_dir(self, broker: str) -> Path:
        return self.node(broker).data_dir

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> KafkaHosts:
        try:
            for b in self.brokers:
                self.mount_disk(b, f"jepsen-kafka-{b}")
            self.quorum._format()
            for n in self.nodes:
                n.start()
            self.quorum.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def process(self, host: str) -> subprocess.Popen[bytes] | None:
        return self.node(host).proc

    def start_broker(self, b: str, wait: bool = True) -> None:
        self.node(b).start()
        if wait:
            self.wait_broker(b)

    def wait_broker(self, b: str) -> None:
        """Until node `b` (started) listens; raises when it exited or took too long."""
        node = self.node(b)
        deadline = time.monotonic() + READY_S
        while True:
            if node.proc is None or node.proc.poll() is not None:
                code = node.proc.returncode if node.proc else None
                raise RuntimeError(f"Kafka node {b} exited ({code}):\n{self.tail(b)}")
            try:
                with socket.create_connection((node.address, BROKER_PORT), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka node {b} did not listen")
            time.sleep(0.1)

    def tail(self, b: str, chars: int = 3000) -> str:
        return self.node(b).log_text()[-chars:]

    def kill(self, host: str) -> None:
        if self.running(host):
            self.pause(host, False)
            self.node(host).kill()

    def __enter__(self) -> KafkaHosts:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata -------------------------------------------------------------------------------

    def all_in_sync(self, timeout: float) -> bool:
        """Every partition of every topic has a leader and all its replicas in the ISR, within
        `timeout` seconds (KRaft's metadata is the controller's: a restarted broker is back in
        an ISR only once it caught up under its new broker epoch)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.metadata_in_sync():
                return True
            time.sleep(0.2)
        return False

    def controller(self) -> str | None:
        """The KRaft quorum's active controller (`quorum_leader`, asked of every running node;
        the answer of the latest leader epoch wins): b<id>, None when nobody answered."""
        best: tuple[int, int] | None = None
        for b in self.brokers:
            if not self.running(b) or b in self.paused:
                continue
            try:
                answer = quorum_leader(self.node(b).bootstrap, timeout=2.0)
            except (OSError, Closed, AssertionError):
                continue
            if answer is not None and (best is None or answer[1] > best[1]):
                best = answer
        return f"b{best[0]}" if best is not None else None

    # -- what Kafka has no counterpart of (see UNSUPPORTED) -------------------------------------

    def fail_disk_io(self, b: str, error: str | None, ops: tuple[str, ...]) -> list[str]:
        raise OSError(UNSUPPORTED["eio"])

    def jump_clock(self, b: str, offset_ms: int) -> None:
        raise OSError(UNSUPPORTED["clock-jump"])


def quorum_leader(bootstrap: str, timeout: float = 5.0) -> tuple[int, int] | None:
    """(leader id, leader epoch) of the KRaft metadata quorum, from DescribeQuorum (key 55, the
    request `kafka-metadata-quorum describe --status` sends; a broker forwards it to the
    active controller); None when the answer names no leader."""
    topic = protocol.DescribeQuorumRequest.TopicData
    req = protocol.DescribeQuorumRequest(
        topics=[
            topic(topic_name=METADATA_TOPIC, partitions=[topic.PartitionData(partition_index=0)])
        ]
    )
    with RawClient(bootstrap, timeout=timeout) as client:
        resp = client.request(req, 0)
    if resp.error_code != 0 or not resp.topics or not resp.topics[0].partitions:
        return None
    part = resp.topics[0].partitions[0]
    if part.error_code != 0 or part.leader_id < 0:
        return None
    return int(part.leader_id), int(part.leader_epoch)
