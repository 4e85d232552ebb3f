"""Apache Kafka itself, run from the jars `scripts/setup.sh test` fetched, as the reference broker.

`KafkaReference("4.4", work_dir, nodes=1).start()` starts Kafka in KRaft combined mode
(`process.roles=broker,controller`) on free loopback ports: it writes each node's
`server.properties` and a log configuration, formats every node's log directory with one cluster
id (`kafka.tools.StorageTool format`), starts `kafka.Kafka` per node and waits until Metadata
from the first node lists every broker and a controller. `stop()` sends SIGTERM (SIGKILL after
`STOP_TIMEOUT`); the work directory is the caller's (a pytest tmp dir).

Versions: "4.4" is Apache Kafka 4.4.0, the default reference; "3.9" is 3.9.2, the reference for
the protocol versions 4.x removed (KIP-896). Their jars are in `.cache/kafka-<version>/lib`,
listed in `.cache/kafka-<version>/classpath`; nothing here downloads.

Each JVM gets `REFERENCE_HEAP` of heap (1 GB, Kafka's own kafka-server-start default; the heap
grows from 64 MB as used), the serial collector and the C1 compiler only: a node is ready in
about 3 s on an idle machine. 384 MB was too small: every dynamic log-cleaner reconfiguration
(kafka-configs --alter log.cleaner.threads) starts new cleaner threads whose 128 MB dedupe
buffer (log.cleaner.dedupe.buffer.size) is allocated on the heap, and a node that had served a
session's tests exited with OutOfMemoryError there (-XX:+ExitOnOutOfMemoryError).
The broker's own log is `<node dir>/server.log` (INFO), its stdout and stderr `<node dir>/
stdout.log`; `log_tail()` shows both for a failing test. `run_class()` runs any other class of the
same classpath (Kafka's command-line tools) with the same Java.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from compat_tests.harness import HOST, free_port

ROOT = Path(__file__).resolve().parents[2]
VERSIONS: dict[str, str] = {"4.4": "4.4.0", "3.9": "3.9.2"}
DEFAULT_VERSION = "4.4"
REFERENCE_HEAP = os.environ.get("ODRADEK_REFERENCE_HEAP", "1g")
JAVA_HOMES = (Path("/usr/lib/jvm/java-17-openjdk-amd64"),)
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
_CANNOT_BIND = ("Address already in use", "BindException")


class ReferenceUnavailable(RuntimeError):
    """The reference jars or a Java runtime are missing (scripts/setup.sh test fetches them)."""


class ReferenceError(RuntimeError):
    """The reference broker did not start or stop; the message ends with its logs."""


def full_version(version: str) -> str:
    """ "4.4" -> "4.4.0"; a full version is returned as it is."""
    return VERSIONS.get(version, version)


def classpath(version: str = DEFAULT_VERSION) -> str:
    """The ':'-separated jars of one reference version, as setup.sh wrote them."""
    path = ROOT / ".cache" / f"kafka-{full_version(version)}" / "classpath"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ReferenceUnavailable(
            f"{path} is missing: run `scripts/setup.sh test` (or `make setup`) to fetch "
            f"Apache Kafka {full_version(version)} from Maven Central"
        ) from None
    missing = [jar for jar in text.split(":") if not Path(jar).is_file()]
    if missing:
        raise ReferenceUnavailable(f"{len(missing)} jars of {path} are gone, e.g. {missing[0]}")
    return text


def java_binary() -> str:
    """Java 17 (Kafka 4.x brokers need 17+): ODRADEK_REFERENCE_JAVA, else the Debian JDK 17,
    else `java` on PATH."""
    explicit = os.environ.get("ODRADEK_REFERENCE_JAVA")
    if explicit:
        return explicit
    for home in JAVA_HOMES:
        if (home / "bin" / "java").is_file():
            return str(home / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ReferenceUnavailable("no java on PATH (scripts/setup.sh test installs one)")
    return found


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (Kafka's Uuid form). It may
    start with '-', so it is passed to kafka-storage as `--cluster-id=ID`, never as a separate
    argument (argparse took such an id for an option: one format in 64 failed)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def jvm_options(heap: str = REFERENCE_HEAP) -> list[str]:
    """Small, quick-starting JVMs: fixed heap cap, serial GC, C1 only."""
    return [
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
    ]


def _log_config(version: str, node_dir: Path) -> list[str]:
    """A file-only INFO log for the broker: log4j2 for 4.x, reload4j for 3.x."""
    log_file = node_dir / "server.log"
    if full_version(version).startswith("3."):
        conf = node_dir / "log4j.properties"
        conf.write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={log_file}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n",
            encoding="utf-8",
        )
        return [f"-Dlog4j.configuration=file:{conf}"]
    conf = node_dir / "log4j2.properties"
    conf.write_text(
        "status = warn\n"
        "appender.file.type = File\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.file.ref = file\n",
        encoding="utf-8",
    )
    return [f"-Dlog4j2.configurationFile={conf}"]


class KafkaNode:
    """One Kafka JVM in combined mode: node id, broker port, controller port, its directory."""

    def __init__(self, cluster: KafkaReference, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.dir = cluster.work_dir / f"node-{node_id}"
        self.data_dir = self.dir / "data"
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def properties(self) -> dict[str, str]:
        n = len(self.cluster.nodes)
        rf = str(min(3, n))
        name = "SASL_PLAINTEXT" if self.cluster.sasl_users else "PLAINTEXT"
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.cluster.voters(),
            "listeners": f"{name}://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"{name}://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": name,
            "listener.security.protocol.map": f"{name}:{name},CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
        }
        if self.cluster.sasl_users:
            # SASL/PLAIN for clients and between brokers, StandardAuthorizer; the controller
            # listener stays PLAINTEXT, so its principal (ANONYMOUS) is a super user too
            props.update(
                {
                    "sasl.enabled.mechanisms": "PLAIN",
                    "sasl.mechanism.inter.broker.protocol": "PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(
                        self.cluster.sasl_users
                    ),
                    "authorizer.class.name": (
                        "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                    ),
                    "super.users": "User:admin;User:ANONYMOUS",
                }
            )
        props.update(self.cluster.overrides)
        return props

    def write_config(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / "server.properties"
        path.write_text(
            "".join(f"{k}={v}\n" for k, v in self.properties().items()), encoding="utf-8"
        )
        return path

    def java_command(self, main_class: str, *args: str) -> list[str]:
        return [
            java_binary(),
            *jvm_options(self.cluster.heap),
            *_log_config(self.cluster.version, self.dir),
            "-cp",
            self.cluster.classpath,
            main_class,
            *args,
        ]

    def format(self) -> subprocess.Popen[bytes]:
        """`kafka-storage format` of this node's log directory (started, not waited for)."""
        config = self.write_config()
        out = open(self.dir / "format.log", "wb")  # noqa: SIM115 (closed by the caller's wait)
        cmd = self.java_command(
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={self.cluster.cluster_id}",
            "-c",
            str(config),
        )
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        out.close()
        return proc

    def start(self) -> None:
        config = self.dir / "server.properties"
        with open(self.dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                self.java_command("kafka.Kafka", str(config)),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
            )

    def signal_stop(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Wait for the JVM to exit after SIGTERM; SIGKILL it past `timeout`."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: an unclean stop."""
        if self.running:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        parts = []
        for name in ("format.log", "stdout.log", "server.log"):
            path = self.dir / name
            if path.exists():
                parts.append(f"--- {path} ---\n" + path.read_text("utf-8", "replace"))
        return "\n".join(parts)


class KafkaReference:
    """A real Apache Kafka cluster of `nodes` combined (broker + controller) KRaft nodes."""

    def __init__(
        self,
        version: str = DEFAULT_VERSION,
        work_dir: str | os.PathLike[str] | None = None,
        *,
        nodes: int = 1,
        overrides: Mapping[str, str] | None = None,
        heap: str = REFERENCE_HEAP,
        ready_timeout: float = READY_TIMEOUT,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self.version = version
        # with users (one must be "admin", the super user): SASL_PLAINTEXT listeners, PLAIN
        self.sasl_users = dict(sasl_users or {})
        self.classpath = classpath(version)
        self.work_dir = Path(work_dir) if work_dir is not None else Path(_mkdtemp())
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.ready_timeout = ready_timeout
        self.cluster_id = new_cluster_id()
        self.nodes: list[KafkaNode] = []
        self.nodes = [KafkaNode(self, node_id) for node_id in range(1, nodes + 1)]
        self.start_seconds: float | None = None

    def __repr__(self) -> str:
        return f"<KafkaReference {full_version(self.version)} {self.bootstrap}>"

    @property
    def full_version(self) -> str:
        return full_version(self.version)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> KafkaReference:
        """Format (first start only), start every node, wait until the cluster is ready.

        A node that cannot bind its port (taken since free_port() chose it) makes the whole
        cluster pick new ports and try again, up to three times, on the first start only.
        """
        began = time.monotonic()
        first = not any(node.data_dir.exists() for node in self.nodes)
        for attempt in range(3 if first else 1):
            if first:
                self._format()
            for node in self.nodes:
                node.start()
            try:
                self.wait_ready()
                self.start_seconds = time.monotonic() - began
                return self
            except ReferenceError:
                logs = self.log_tail()
                self.stop()
                if not first or attempt == 2 or not any(s in logs for s in _CANNOT_BIND):
                    raise
                for node in self.nodes:
                    shutil.rmtree(node.dir, ignore_errors=True)
                    node.port, node.controller_port = free_port(), free_port()
        raise AssertionError("unreachable")

    def _format(self) -> None:
        procs = [node.format() for node in self.nodes]
        for node, proc in zip(self.nodes, procs, strict=True):
            if proc.wait(timeout=self.ready_timeout) != 0:
                raise ReferenceError(
                    f"kafka-storage format of node {node.node_id} failed\n" + node.log_text()
                )

    def wait_ready(self) -> None:
        """Until Metadata from every node lists every broker and a controller."""
        deadline = time.monotonic() + self.ready_timeout
        pending = list(self.nodes)
        last = "no answer yet"
        while pending:
            dead = [n for n in self.nodes if not n.running]
            if dead:
                raise ReferenceError(
                    f"Kafka node {dead[0].node_id} exited with status "
                    f"{dead[0].proc.returncode if dead[0].proc else None} before it was ready\n"
                    + self.log_tail()
                )
            if time.monotonic() > deadline:
                raise ReferenceError(
                    f"Kafka {self.full_version} not ready within {self.ready_timeout:.0f}s "
                    f"({last})\n" + self.log_tail()
                )
            try:
                admin = ("admin", self.sasl_users["admin"]) if self.sasl_users else None
                brokers, controller = metadata_brokers(pending[0].bootstrap, login=admin)
                last = f"node {pending[0].node_id}: brokers {brokers}, controller {controller}"
                if len(brokers) == len(self.nodes) and controller >= 0:
                    pending.pop(0)
                    continue
            except (OSError, ConnectionError, AssertionError) as exc:
                last = f"node {pending[0].node_id}: {exc!r}"
            time.sleep(0.1)

    def stop(self) -> list[int | None]:
        """SIGTERM every node at once, then wait (SIGKILL past STOP_TIMEOUT)."""
        for node in self.nodes:
            node.signal_stop()
        return [node.wait_stopped() for node in self.nodes]

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    def __enter__(self) -> KafkaReference:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- tools and logs ---------------------------------------------------------------------

    def run_class(
        self, main_class: str, *args: str, timeout: float = 120.0, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run `main_class` (e.g. Kafka's `org.apache.kafka.tools.TopicCommand`) with this
        version's classpath and Java; its log output (log4j, WARN and up) goes to stderr."""
        return run_class(self.version, main_class, *args, timeout=timeout, input=input)

    def log_tail(self, max_chars: int = 20_000) -> str:
        out = []
        for node in self.nodes:
            text = node.log_text()
            if len(text) > max_chars:
                text = "...\n" + text[-max_chars:]
            out.append(f"=== Kafka {self.full_version} node {node.node_id} ===\n{text}")
        return "\n".join(out)


def run_class(
    version: str,
    main_class: str,
    *args: str,
    timeout: float = 120.0,
    input: bytes | None = None,
    extra_jvm: Sequence[str] = (),
) -> subprocess.CompletedProcess[bytes]:
    """Run one class of a reference version's classpath (a tool's main) to completion."""
    cmd = [
        java_binary(),
        *jvm_options("256m"),
        *extra_jvm,
        "-cp",
        classpath(version),
        main_class,
        *args,
    ]
    return subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, check=False)


def plain_jaas(users: Mapping[str, str]) -> str:
    """A PlainLoginModule JAAS line: the broker logs in as admin and knows every user."""
    known = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{users["admin"]}" {known};'
    )


def metadata_brokers(
    bootstrap: str, timeout: float = 5.0, login: tuple[str, str] | None = None
) -> tuple[list[int], int]:
    """(broker node ids, controller id) from one Metadata v12 request for no topics, after a
    SASL/PLAIN login when `login` is given."""
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    from odradek.testing.raw import RawClient

    with RawClient(bootstrap, timeout=timeout) as client:
        if login is not None:
            shake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
            assert shake.error_code == 0, shake
            token = f"\0{login[0]}\0{login[1]}".encode()
            auth = client.request(SaslAuthenticateRequest(auth_bytes=token), 2)
            assert auth.error_code == 0, auth
        resp = client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    return sorted(b.node_id for b in resp.brokers), resp.controller_id


def _mkdtemp() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="kafka-reference-")
