"""A throwaway Apache ZooKeeper server for tests of clusters with `zookeeper.connect`.

    with ZooKeeperServer() as zk:                 # 127.0.0.1, a free port, a temp data dir
        overrides = {"zookeeper.connect": zk.connect("/odradek-test-1")}

It runs Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`, or the jar named by
`ODRADEK_ZOOKEEPER_JAR`) as a standalone `ZooKeeperServerMain` in a child JVM, with a short
tick (so sessions may be as short as one second and a killed broker's registration goes
quickly) and everything it writes under its own directory. `scripts/setup.sh` installs the
package.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DEFAULT_JAR = "/usr/share/java/zookeeper.jar"
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
            "4lw.commands.whitelist=ruok,srvr\n",
            encoding="utf-8",
        )
        log = open(self.work_dir / "zookeeper.log", "ab")  # noqa: SIM115 (the child keeps it)
        try:
            self._proc = subprocess.Popen(
                [
                    java,
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-Dzookeeper.admin.enableServer=false",
                    "-cp",
                    jar,
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
        while not self._answers_ruok():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperUnavailable(f"ZooKeeper did not start on {self.address}")
            time.sleep(0.05)
        return self

    def _answers_ruok(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False

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

    def __exit__(self, *exc: object) -> None:
        self.stop()
