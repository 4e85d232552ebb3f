"""An odradek broker in a child process, started the way a user starts it.

`python -m odradek serve --override listeners=PLAINTEXT://127.0.0.1:PORT --override
log.dirs=DIR` on a free loopback port with a temporary data directory. The start is timed two
ways from the moment before the process is spawned: until a raw ApiVersions v0 request is first
answered (bench.probe) and until the broker prints its `odradek ready` line. Optionally the broker
runs under cProfile (`python -m cProfile -o FILE -m odradek ...`); the profile is written when it
stops on SIGTERM.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bench.probe import wait_for_api_versions

HOST = "127.0.0.1"
READY_MARKER = "odradek ready"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
REPO_ROOT = Path(__file__).resolve().parent.parent
_KEPT_LINES = 200


class BrokerStartError(RuntimeError):
    """The broker did not start; the message ends with what it printed."""


def free_port(host: str = HOST) -> int:
    """A TCP port that was free a moment ago (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True)
class StartupTiming:
    """Milliseconds from spawning the process to its first ApiVersions answer / ready line."""

    api_versions_ms: float
    ready_line_ms: float


class OdradekProcess:
    """One `python -m odradek serve` child; a context manager that always stops it."""

    def __init__(
        self,
        *,
        python: str = sys.executable,
        host: str = HOST,
        overrides: dict[str, str] | None = None,
        profile_to: Path | None = None,
        keep_data: bool = False,
        brokers: int = 1,
        tls: bool = False,
    ) -> None:
        self.python = python
        self.host = host
        self.port = free_port(host)
        self.overrides = dict(overrides or {})
        self.profile_to = profile_to
        self.keep_data = keep_data
        # brokers > 1: `odradek cluster --brokers N`, replicating brokers in one process; the
        # bootstrap is the first broker, whose port is read from the ready line
        self.brokers = brokers
        self.data_dir = Path(tempfile.mkdtemp(prefix="odradek-bench-"))
        # tls: an SSL listener beside the PLAINTEXT one, with a throwaway CA (odradek.testing)
        self.tls_ca: str | None = None
        self.tls_port: int | None = None
        self._tls_config: dict[str, str] = {}
        if tls:
            if brokers > 1:
                raise ValueError("a TLS listener is served by a single spawned broker only")
            from odradek.testing.certs import TlsMaterial

            material = TlsMaterial(str(self.data_dir / "tls"))
            self.tls_ca = material.ca
            self.tls_port = free_port(host)
            self._tls_config = material.broker_config()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._ready_at: float | None = None
        self._ready = threading.Event()
        self._lines: collections.deque[str] = collections.deque(maxlen=_KEPT_LINES)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def tls_bootstrap(self) -> str | None:
        return None if self.tls_port is None else f"{self.host}:{self.tls_port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("broker not started")
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """The last lines the broker printed (stdout and stderr together)."""
        return "\n".join(self._lines)

    def command(self) -> list[str]:
        if self.brokers > 1:
            cmd = [
                self.python,
                "-m",
                "odradek",
                "cluster",
                "--brokers",
                str(self.brokers),
                "--port",
                "0",
                "--listen-host",
                self.host,
                "--base-dir",
                str(self.data_dir / "data"),
            ]
            for key, value in self.overrides.items():
                cmd += ["--override", f"{key}={value}"]
            return cmd
        listeners = f"PLAINTEXT://{self.host}:{self.port}"
        if self.tls_port is not None:
            listeners += f",SSL://{self.host}:{self.tls_port}"
        overrides = {
            "listeners": listeners,
            "log.dirs": str(self.data_dir / "data"),
            **self._tls_config,
            **self.overrides,
        }
        cmd = [self.python]
        if self.profile_to is not None:
            cmd += ["-m", "cProfile", "-o", str(self.profile_to)]
        cmd += ["-m", "odradek", "serve"]
        for key, value in overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = READY_TIMEOUT_S) -> StartupTiming:
        """Spawn the broker and wait until it answers ApiVersions and has printed its ready line."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        spawned_at = time.perf_counter()
        self._proc = subprocess.Popen(
            self.command(),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._reader = threading.Thread(target=self._read_output, name="broker-output", daemon=True)
        self._reader.start()
        try:
            if self.brokers > 1:  # ports are free ones: learn the first from the ready line
                if not self._ready.wait(timeout):
                    raise BrokerStartError(f"no {READY_MARKER!r} line within {timeout:.0f} s")
                ready = next(line for line in self._lines if READY_MARKER in line)
                self.port = int(ready.split("listeners=", 1)[1].split(",", 1)[0].rsplit(":", 1)[1])
            answered_at = wait_for_api_versions(
                self.host, self.port, timeout=timeout, alive=self.alive
            )
            if not self._ready.wait(max(0.0, spawned_at + timeout - time.perf_counter())):
                raise BrokerStartError(f"no {READY_MARKER!r} line within {timeout:.0f} s")
        except Exception as exc:
            self.stop()
            raise BrokerStartError(f"{exc}\n--- broker output ---\n{self.output()}") from exc
        assert self._ready_at is not None
        return StartupTiming(
            api_versions_ms=(answered_at - spawned_at) * 1000.0,
            ready_line_ms=(self._ready_at - spawned_at) * 1000.0,
        )

    def _read_output(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for raw in proc.stdout:  # ends at EOF, when the broker exits
            line = raw.decode("utf-8", "replace").rstrip()
            self._lines.append(line)
            if not self._ready.is_set() and READY_MARKER in line:
                self._ready_at = time.perf_counter()
                self._ready.set()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` s; removes the data dir unless keep_data."""
        proc, self._proc = self._proc, None
        code: int | None = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
            code = proc.returncode
        if self._reader is not None:
            self._reader.join(timeout)
            self._reader = None
        if not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return code

    def __enter__(self) -> OdradekProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def with_nofile(cmd: list[str], nofile: int | None, python: str) -> list[str]:
    """`cmd` behind a Python trampoline (run by `python`) that sets RLIMIT_NOFILE to `nofile`
    and execs it (same pid), as `ulimit -n` in the shell that starts a broker would; `cmd`
    unchanged when `nofile` is None."""
    if nofile is None:
        return cmd
    trampoline = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [python, "-c", trampoline, *cmd]
