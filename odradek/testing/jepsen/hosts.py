"""A ZooKeeper-mode odradek cluster on separate hosts (network namespaces, `netns.Network`):
a three-node ZooKeeper ensemble z0-z2, brokers b0-b2 (`python -m odradek serve` with
`zookeeper.connect` naming the ensemble), and the clients on host `client`.

    with HostCluster(work_dir) as cluster:
        cluster.create_topic("jepsen-7", partitions=4)
        cluster.kill(1); cluster.start_broker(1)
        cluster.net.isolate({"b0"}, cluster.others("b0"))

Brokers use Kafka's keys: RF 3, min.insync.replicas=2, unclean leader election off, short
ZooKeeper sessions so a cut-off broker loses its registration (and leadership) within seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient

from odradek.broker.cluster import zk_layout as zl
from odradek.log.power_loss import ENV as POWER_LOSS_ENV
from odradek.testing.jepsen.metadata import MetadataReads
from odradek.testing.jepsen.netns import Network
from odradek.testing.zookeeper import ZooKeeperUnavailable, zookeeper_jar

if TYPE_CHECKING:
    from kazoo.client import KazooClient

ZK = ("z0", "z1", "z2")
CLIENT = "client"
BROKER_PORT = 9092
ADMIN_PORT = 9644  # each broker's fault-injection endpoint (clock jumps, disk errors)
ZK_PORT = 2181
READY_S = 40.0
DISK_MB = 128  # each broker's data dir (tmpfs): filled by the disk-full fault
FILLER = "jepsen-disk-filler"

BROKER_CONFIG: dict[str, str] = {
    "zookeeper.session.timeout.ms": "3000",
    "zookeeper.connection.timeout.ms": "10000",
    "replica.fetch.wait.max.ms": "100",
    "replica.lag.time.max.ms": "2000",
    "replica.socket.timeout.ms": "2000",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "unclean.leader.election.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "auto.create.topics.enable": "false",
    # retention runs every second, so that a clock jump meets it (topics keep 12 h: jumps
    # stay below that, and nothing may be deleted)
    "log.retention.check.interval.ms": "1000",
    # and the transaction coordinator looks for timed-out transactions every second (Kafka:
    # 10 s), so that a forward jump aborts the open ones as Kafka's would
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ProcessHosts:
    """What both deployments on their own hosts (`HostCluster`, and the reference's Kafka
    nodes) do the same way: stopping and resuming a host's process, healing every fault, and
    each broker's data dir as a tmpfs of its own (a full disk as a fault). Subclasses say where
    a host's process is and how a broker starts."""

    net: Network
    brokers: list[str]
    paused: set[str]
    disks: set[str]  # brokers whose data dir is a tmpfs of its own

    def process(self, host: str) -> subprocess.Popen[bytes] | None:
        raise NotImplementedError

    def data_dir(self, broker: str) -> Path:
        raise NotImplementedError

    def start_broker(self, b: str, wait: bool = True) -> None:
        raise NotImplementedError

    def running(self, host: str) -> bool:
        proc = self.process(host)
        return proc is not None and proc.poll() is None

    def pause(self, host: str, stop: bool) -> None:
        proc = self.process(host)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGSTOP if stop else signal.SIGCONT)
            (self.paused.add if stop else self.paused.discard)(host)

    def heal(self) -> None:
        """Every link whole, every process running and resumed, every disk freed."""
        self.net.heal()
        for host in sorted(self.paused):
            self.pause(host, False)
        for b in self.brokers:
            self.free_disk(b)
            if not self.running(b):
                self.start_broker(b)

    def close(self) -> None:
        for host in sorted(self.paused):
            self.pause(host, False)
        self.net.close()
        for b in sorted(self.disks):
            subprocess.run(["umount", "-l", str(self.data_dir(b))], capture_output=True)
        self.disks.clear()

    def mount_disk(self, b: str, name: str) -> None:
        """Give broker `b` a data dir of its own size (`mount_tmpfs`)."""
        if mount_tmpfs(self.data_dir(b), name):
            self.disks.add(b)

    def fill_disk(self, b: str) -> str:
        """Fill broker `b`'s data dir's file system; what was done."""
        if b not in self.disks:
            return "no disk of its own (mount failed): not filled"
        return fill_fs(self.data_dir(b))

    def free_disk(self, b: str) -> None:
        free_fs(self.data_dir(b))


class HostCluster(ProcessHosts, MetadataReads):
    def __init__(
        self,
        work_dir: str | Path,
        brokers: int = 3,
        overrides: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        jar, java = zookeeper_jar(), shutil.which("java")
        if jar is None or java is None:
            raise ZooKeeperUnavailable("ZooKeeper needs its jar and java: run scripts/setup.sh")
        self.jar, self.java = jar, java
        self.work = Path(work_dir)
        self.brokers = [f"b{i}" for i in range(brokers)]
        self.overrides = {**BROKER_CONFIG, **(overrides or {})}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        self.env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
        self.net = Network([*ZK, *self.brokers, CLIENT])
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.paused: set[str] = set()
        self.disks: set[str] = set()  # brokers whose data dir is a tmpfs of its own
        self._admin: AdminClient | None = None
        # killed brokers -> the creation zxid of the registration they had (-1: none read); a
        # broker is back only once it registered again under a new session
        self.bounced: dict[str, int] = {}

    # -- addresses ------------------------------------------------------------------------------

    def addr(self, host: str) -> str:
        return self.net.addresses[host]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.addr(b)}:{BROKER_PORT}" for b in self.brokers)

    @property
    def zookeeper_connect(self) -> str:
        return ",".join(f"{self.addr(z)}:{ZK_PORT}" for z in ZK) + "/odradek"

    @property
    def zookeeper(self) -> tuple[str, ...]:
        return ZK

    @property
    def unsupported(self) -> dict[str, str]:
        return {}  # every fault kind of the nemesis

    def cut_from_quorum(self, cut: set[str]) -> str:
        self.net.isolate(cut, set(ZK))
        return f"ZooKeeper cut from {sorted(cut)}"

    def others(self, host: str) -> set[str]:
        return {h for h in self.net.hosts if h != host}

    def journal(self, broker: str) -> str:
        """The broker's power-loss journal ('' when the hook is off)."""
        return self.env.get(POWER_LOSS_ENV, "").replace("{broker}", broker)

    def data_dir(self, broker: str) -> Path:
        return self.work / broker / "data"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> HostCluster:
        try:
            for b in self.brokers:
                self.mount_disk(b, f"jepsen-{b}")
            for i, z in enumerate(ZK):
                self._start_zk(i, z)
            for z in ZK:
                self._wait(lambda z=z: self._zk_serving(z), f"ZooKeeper {z} did not serve")
            for b in self.brokers:
                self.start_broker(b, wait=False)
            for b in self.brokers:
                self.wait_broker(b)
        except BaseException:
            self.close()
            raise
        return self

    def _start_zk(self, i: int, z: str) -> None:
        d = self.work / z
        (d / "data").mkdir(parents=True, exist_ok=True)
        (d / "data" / "myid").write_text(f"{i + 1}\n")
        servers = "".join(f"server.{j + 1}={self.addr(h)}:2888:3888\n" for j, h in enumerate(ZK))
        (d / "zoo.cfg").write_text(
            f"tickTime=250\ninitLimit=40\nsyncLimit=8\ndataDir={d / 'data'}\n"
            f"clientPort={ZK_PORT}\nclientPortAddress={self.addr(z)}\nmaxClientCnxns=0\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n" + servers
        )
        argv = [
            self.java,
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            self.jar,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(d / "zoo.cfg"),
        ]
        self.procs[z] = self.net.spawn(z, argv, str(d / "zookeeper.log"), cwd=str(d))

    def _zk_serving(self, z: str) -> bool:
        try:
            with socket.create_connection((self.addr(z), ZK_PORT), timeout=1) as s:
                s.sendall(b"srvr")
                return b"Mode: " in s.recv(4096)
        except OSError:
            return False

    def start_broker(self, b: str, wait: bool = True) -> None:
        i = self.brokers.index(b)
        d = self.work / b
        self.data_dir(b).mkdir(parents=True, exist_ok=True)
        settings = {
            "listeners": f"PLAINTEXT://{self.addr(b)}:{BROKER_PORT}",
            "odradek.admin.listen": f"{self.addr(b)}:{ADMIN_PORT}",
            "log.dirs": str(self.data_dir(b)),
            "node.id": str(i),
            "zookeeper.connect": self.zookeeper_connect,
            **self.overrides,
        }
        argv = [sys.executable, "-m", "odradek", "serve"]
        for k, v in settings.items():
            argv += ["--override", f"{k}={v}"]
        log = d / "broker.log"
        self._log_mark = log.stat().st_size if log.exists() else 0
        env = dict(self.env)
        if POWER_LOSS_ENV in env:
            env[POWER_LOSS_ENV] = env[POWER_LOSS_ENV].replace("{broker}", b)
        self.procs[b] = self.net.spawn(b, argv, str(log), env=env, cwd=str(d))
        if wait:
            self.wait_broker(b)

    def wait_broker(self, b: str) -> None:
        """Until broker `b` (started) listens; raises when it exited or took too long."""

        def up() -> bool:
            proc = self.procs[b]
            if proc.poll() is not None:
                raise RuntimeError(f"broker {b} exited ({proc.returncode}):\n{self.log_tail(b)}")
            try:
                with socket.create_connection((self.addr(b), BROKER_PORT), timeout=0.5):
                    return True
            except OSError:
                return False

        self._wait(up, f"broker {b} did not listen")

    def _wait(self, ready: object, what: str, timeout: float = READY_S) -> None:
        deadline = time.monotonic() + timeout
        while not ready():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise TimeoutError(what)
            time.sleep(0.1)

    def log_tail(self, host: str, chars: int = 3000) -> str:
        name = "broker.log" if host in self.brokers else "zookeeper.log"
        path = self.work / host / name
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def process(self, host: str) -> subprocess.Popen[bytes] | None:
        return self.procs.get(host)

    def kill(self, host: str) -> None:
        proc = self.procs.get(host)
        if proc is not None and proc.poll() is None:
            if host in self.brokers and host not in self.bounced:
                self.bounced[host] = self.registrations().get(self.brokers.index(host), -1)
            if host in self.paused:
                os.kill(proc.pid, signal.SIGCONT)
                self.paused.discard(host)
            proc.kill()
            proc.wait(10)

    # -- the admin endpoint: clock jumps and disk errors ---------------------------------------

    def admin_post(
        self, b: str, path: str, body: dict[str, object], wait: float = 15.0
    ) -> dict[str, object]:
        """POST to broker `b`'s admin endpoint (odradek/broker/ops/admin_http.py), retrying
        while it is not listening yet (a broker restarted by the previous fault) for up to
        `wait` seconds; OSError when it does not answer (it exited) or refuses."""
        url = f"http://{self.addr(b)}:{ADMIN_PORT}{path}"
        data = json.dumps(body).encode()
        deadline = time.monotonic() + wait
        while True:
            req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
            try:
                with _NO_PROXY.open(req, timeout=5) as resp:
                    answer: dict[str, object] = json.load(resp)
                    return answer
            except OSError:
                if not self.running(b) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def jump_clock(self, b: str, offset_ms: int) -> None:
        """Set broker `b`'s wall clock to the system clock + `offset_ms` (odradek.clock)."""
        self.admin_post(b, "/clock", {"offset_ms": offset_ms})

    def fail_disk_io(self, b: str, error: str | None, ops: tuple[str, ...]) -> list[str]:
        """Make broker `b`'s log dir writes and/or fsyncs fail with `error` (None clears);
        returns its offline log dirs."""
        answer = self.admin_post(b, "/faults/disk", {"error": error, "ops": list(ops)})
        offline = answer.get("offline_dirs")
        return [str(d) for d in offline] if isinstance(offline, list) else []

    # -- disks (a full disk as a fault) ---------------------------------------------------------

    def __enter__(self) -> HostCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata (from the control address; `MetadataReads` has the topic reads) ----------------

    def registrations(self) -> dict[int, int]:
        """Broker id -> the creation zxid of its `/brokers/ids/<id>` node ({} when ZooKeeper
        cannot be read)."""
        try:
            with _ZooKeeper(self.zookeeper_connect) as zk:
                return {
                    int(c): zk.get(zl.broker_path(int(c)))[1].czxid
                    for c in zk.get_children(zl.BROKER_IDS)
                    if c.isdigit()
                }
        except Exception:
            return {}

    def registered_in_sync(self) -> bool:
        """What ZooKeeper says, not what a broker's metadata cache says: every broker killed
        since the last check registered again under a new session, and every partition has a
        leader and its whole ISR, decided after each member's current registration. A broker
        killed and restarted stays registered by its dead session until ZooKeeper expires it,
        and an ISR written before that still names it: it is not in sync yet."""
        try:
            with _ZooKeeper(self.zookeeper_connect) as zk:
                regs = {
                    int(c): zk.get(zl.broker_path(int(c)))[1].czxid
                    for c in zk.get_children(zl.BROKER_IDS)
                    if c.isdigit()
                }
                for b, old in self.bounced.items():
                    now = regs.get(self.brokers.index(b))
                    if now is None or now == old:
                        return False
                for topic in zk.get_children(zl.TOPICS):
                    assigned = zl.decode_topic(zk.get(zl.topic_path(topic))[0], topic, 0)[1]
                    for idx, replicas in enumerate(assigned):
                        data, stat = zk.get(zl.state_path(topic, idx))
                        st = zl.decode_state(data, stat.version, replicas)
                        if not stale_isr_free(st.leader, st.isr, replicas, stat.mzxid, regs):
                            return False
        except Exception:
            return False
        self.bounced.clear()
        return True

    def all_in_sync(self, timeout: float) -> bool:
        """Every partition of every topic (the internal ones too) has a leader and all its
        replicas in the ISR, within `timeout` seconds: in the brokers' metadata and in
        ZooKeeper (`registered_in_sync`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.registered_in_sync():
                time.sleep(0.2)
                continue
            if self.metadata_in_sync():
                return True
            time.sleep(0.2)
        return False

    def controller(self) -> str | None:
        try:
            c = self.admin().describe_cluster(request_timeout=3).result(5).controller
        except Exception:
            return None
        return f"b{c.id}" if c is not None and c.id >= 0 else None


def mount_tmpfs(d: Path, name: str) -> bool:
    """Mount a tmpfs of DISK_MB on `d` (made if missing), so that filling it is a real full
    disk (ENOSPC) for the one broker whose data dir it is; False without mount rights (the
    data dir then stays on the work dir's disk and cannot be filled)."""
    d.mkdir(parents=True, exist_ok=True)
    argv = ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", name, str(d)]
    return subprocess.run(argv, capture_output=True).returncode == 0


def fill_fs(d: Path) -> str:
    """Fill the file system of directory `d` with one file (FILLER); what was done."""
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    fd = os.open(d / FILLER, os.O_CREAT | os.O_WRONLY, 0o644)
    size, step = 0, 1 << 20
    try:
        while step >= 4096:  # whole steps until one fails, then smaller ones
            try:
                os.posix_fallocate(fd, size, step)
                size += step
            except OSError:
                step //= 4
    finally:
        os.close(fd)
    left = os.statvfs(d)
    return f"filled: {free // 1024} KiB free -> {left.f_bavail * left.f_frsize // 1024} KiB"


def free_fs(d: Path) -> None:
    try:
        os.unlink(d / FILLER)
    except FileNotFoundError:
        pass


def stale_isr_free(
    leader: int, isr: list[int], replicas: list[int], written_zxid: int, regs: dict[int, int]
) -> bool:
    """A partition state (written at `written_zxid`) whose leader is registered and whose ISR
    is every replica, each registered (`regs`: id -> registration creation zxid) before the
    state was written: an ISR member registered since restarted after it was decided."""
    return (
        leader in regs
        and sorted(isr) == sorted(replicas)
        and all(m in regs and regs[m] < written_zxid for m in isr)
    )


class _ZooKeeper:
    """A short-lived kazoo client (the harness's own reads of the cluster's ZooKeeper)."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=connect, timeout=5.0)

    def __enter__(self) -> KazooClient:
        self.zk.start(timeout=5.0)
        return self.zk

    def __exit__(self, *exc: object) -> None:
        self.zk.stop()
        self.zk.close()


def journal_env(work_dir: str | Path) -> dict[str, str]:
    """The environment for brokers whose fsyncs are journaled for power loss (one file per
    broker: `{broker}` in the path is replaced by `HostCluster.start_broker`)."""
    return {POWER_LOSS_ENV: str(Path(work_dir) / "{broker}" / "fsync-journal")}
