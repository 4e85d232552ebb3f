"""A throwaway Apache ZooKeeper server for tests of clusters with `zookeeper.connect`.

    with ZooKeeperServer() as zk:                 # 127.0.0.1, a free port, a temp data dir
        overrides = {"zookeeper.connect": zk.connect("/odradek-test-1")}

It runs Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`, or the jar named by
`ODRADEK_ZOOKEEPER_JAR`) as a standalone `ZooKeeperServerMain` in a child JVM, with a short
tick (so sessions may be as short as one second and a killed broker's registration goes
quickly) and everything it writes under its own directory. `scripts/setup.sh` installs the
package.

Its log goes to `zookeeper.log` in that directory (kept when the caller gave the directory,
as pytest's tmp paths are), through SLF4J's simple binding from the same Debian package as the
SLF4J API the jar needs (libslf4j-java; without a binding ZooKeeper logs nothing), and its
last lines are printed when the block using the server raises. As Kafka's EmbeddedZookeeper,
the transaction log is not fsync'd (`forceSync=no`): on a busy test machine one fsync can
take longer than a session timeout, and every session open waits for one. The server is
ready when `srvr` says it serves (`ruok` answers before the server is running) and one real
session has been opened and closed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"  # Debian's libslf4j-java, as slf4j-api.jar
LOG_NAME = "zookeeper.log"
READY_TIMEOUT_S = 30.0
TICK_MS = 250  # minimum session timeout is 2 ticks, maximum 20


class ZooKeeperUnavailable(RuntimeError):
    """No ZooKeeper jar or Java here, or the server did not come up."""


def zookeeper_jar() -> str | None:
    jar = os.environ.get("ODRADEK_ZOOKEEPER_JAR", DEFAULT_JAR)
    return jar if os.path.isfile(jar) else None


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ZooKeeperServer:
    def __init__(self, work_dir: str | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="odradek-zk-"))
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work_dir / LOG_NAME

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log ("" if there is none)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connect(self, chroot: str = "") -> str:
        """A `zookeeper.connect` value, optionally under a chroot path (one per test)."""
        return self.address + chroot

    def start(self) -> ZooKeeperServer:
        jar = zookeeper_jar()
        java = shutil.which("java")
        if jar is None or java is None:
            raise ZooKeeperUnavailable(
                f"ZooKeeper needs {DEFAULT_JAR} (Debian package zookeeper) and java: "
                "run scripts/setup.sh"
            )
        data = self.work_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.port = _free_port(self.host)
        config = self.work_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\ndataDir={data}\nclientPort={self.port}\n"
            f"clientPortAddress={self.host}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\nforceSync=no\n",
            encoding="utf-8",
        )
        classpath = jar + (f":{SLF4J_SIMPLE}" if os.path.isfile(SLF4J_SIMPLE) else "")
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it)
        try:
            self._proc = subprocess.Popen(
                [
                    java,
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-Dzookeeper.admin.enableServer=false",
                    "-Dzookeeper.forceSync=no",
                    # slf4j-simple writes to stderr, which goes to the log file
                    "-Dorg.slf4j.simpleLogger.showDateTime=true",
                    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
                    "-cp",
                    classpath,
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    str(config),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
            )
        finally:
            log.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._serving():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._fail("did not start")
            time.sleep(0.05)
        if not self._open_session(deadline - time.monotonic()):
            self._fail("serves but opened no session")
        return self

    def _fail(self, what: str) -> None:
        tail = self.log_tail()
        where = self.log_path
        self.stop()
        raise ZooKeeperUnavailable(f"ZooKeeper {what} on {self.address} (log {where}):\n{tail}")

    def _serving(self) -> bool:
        """`srvr` names the server's mode only once it serves requests (ZooKeeper answers
        "not currently serving requests" before; `ruok` says imok from the start)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as sock:
                sock.sendall(b"srvr")
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
        except OSError:
            return False
        return b"Mode: " in answer

    def _open_session(self, timeout: float) -> bool:
        """Open and close one session, as the brokers will (kazoo, when it is installed)."""
        try:
            from kazoo.client import KazooClient
            from kazoo.handlers.threading import KazooTimeoutError
        except ImportError:
            return True
        # a short session: kazoo gives each connect attempt the session timeout, then retries
        # on a new connection (under load a connection accepted early was seen never to be
        # read: its ConnectRequest sat unread in the socket for the broker's whole 18 s)
        client = KazooClient(hosts=self.address, timeout=2.0)
        try:
            client.start(timeout=max(timeout, 1.0))
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()
        return True

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and exc_type is not ZooKeeperUnavailable:
            # the failing test's report shows its captured stderr: the server's last words
            sys.stderr.write(f"--- {self.log_path} (last lines) ---\n{self.log_tail()}\n")
        self.stop()
