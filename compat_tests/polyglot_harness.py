"""Go (franz-go, sarama) and Node.js (KafkaJS) client programs, built once per test session.

- `compat_tests/go/`: one Go program, `odradek-compat <franz|sarama> <scenario> '<json>'`,
  modules pinned by go.mod / go.sum. Built into `.cache/go/bin/odradek-compat` with the module
  and build caches in `.cache/go/` (CI caches `.cache/`); rebuilt only when a source file,
  go.mod or go.sum is newer than the binary.
- `compat_tests/js/`: `kafkajs.js <scenario> '<json>'`, packages pinned by package.json /
  package-lock.json; `scripts/setup.sh test` installs them into `.cache/js/node_modules`
  (`npm ci`), found here through NODE_PATH.

Each scenario prints one JSON object on stdout; `run()` returns it parsed, or raises
ClientProgramError with the program's stderr. A missing toolchain is an error naming the
set-up command, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from compat_tests.harness import HOST, BrokerProcess, free_port
from odradek.testing.security import Security

REPO_ROOT = Path(__file__).resolve().parents[1]
GO_DIR = Path(__file__).resolve().parent / "go"
JS_DIR = Path(__file__).resolve().parent / "js"
CACHE = REPO_ROOT / ".cache"
# ODRADEK_GO_BINARY builds and runs the program elsewhere (a worktree sharing .cache/go).
GO_BINARY = Path(os.environ.get("ODRADEK_GO_BINARY") or CACHE / "go" / "bin" / "odradek-compat")
NODE_MODULES = CACHE / "js" / "node_modules"
GO_CANDIDATES = ("go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go")


def _with_defaults(spec: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """The spec as the programs take it: a timeout of their own, ten seconds inside ours, and
    "brokers" one address an entry (a cluster's bootstrap is comma-separated)."""
    out = {"timeout_s": max(timeout - 10.0, 5.0), **spec}
    out["brokers"] = [a for entry in spec.get("brokers", []) for a in entry.split(",") if a]
    return out


class ClientProgramError(AssertionError):
    """A client program is missing, failed to build, exited non-zero or timed out."""


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def go_env() -> dict[str, str]:
    """The environment for `go`: module and build caches under .cache/go."""
    return {
        **os.environ,
        "GOMODCACHE": str(CACHE / "go" / "mod"),
        "GOCACHE": str(CACHE / "go" / "build"),
        "GOFLAGS": "-modcacherw",
        "GOTOOLCHAIN": "local",
    }


def find_go() -> str:
    for candidate in GO_CANDIDATES:
        path = shutil.which(candidate)
        if path:
            return path
    raise ClientProgramError("go not found; run `bash scripts/setup.sh test`")


def _run_json(cmd: list[str], timeout: float, env: Mapping[str, str]) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=dict(env),
        )
    except subprocess.TimeoutExpired as exc:
        raise ClientProgramError(
            f"{' '.join(cmd[:3])} ran past {timeout}s and was killed\n--- stdout ---\n"
            f"{_text(exc.stdout)[-4000:]}\n--- stderr ---\n{_text(exc.stderr)[-8000:]}"
        ) from None
    if proc.returncode != 0:
        raise ClientProgramError(
            f"{' '.join(cmd[:3])} exited {proc.returncode}\n--- stdout ---\n"
            f"{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-8000:]}"
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise ClientProgramError(f"{' '.join(cmd[:3])} printed no JSON\n{proc.stderr[-8000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


class GoPrograms:
    """Builds compat_tests/go once (when out of date) and runs its scenarios."""

    def __init__(self, binary: Path = GO_BINARY) -> None:
        self.binary = binary
        self._built = False
        self._lock = threading.Lock()

    def _stale(self) -> bool:
        if not self.binary.is_file():
            return True
        built = self.binary.stat().st_mtime
        sources = [*GO_DIR.glob("*.go"), GO_DIR / "go.mod", GO_DIR / "go.sum"]
        return any(src.stat().st_mtime > built for src in sources)

    def build(self, timeout: float = 900.0) -> Path:
        with self._lock:
            if self._built:
                return self.binary
            if self._stale():
                self.binary.parent.mkdir(parents=True, exist_ok=True)
                cmd = [find_go(), "build", "-o", str(self.binary), "."]
                proc = subprocess.run(
                    cmd, cwd=GO_DIR, capture_output=True, text=True, timeout=timeout, env=go_env()
                )
                if proc.returncode != 0:
                    raise ClientProgramError(f"go build failed:\n{proc.stdout}{proc.stderr}")
            self._built = True
            return self.binary

    def run(
        self, family: str, scenario: str, spec: Mapping[str, Any], timeout: float = 120.0
    ) -> dict[str, Any]:
        """Run `<family> <scenario>` with `spec` (JSON); its JSON result."""
        binary = self.build()
        spec = _with_defaults(spec, timeout)
        return _run_json([str(binary), family, scenario, json.dumps(spec)], timeout, os.environ)


class NodePrograms:
    """Runs compat_tests/js/<script> with the packages setup.sh installed in .cache/js."""

    def __init__(self, node_modules: Path = NODE_MODULES) -> None:
        self.node_modules = node_modules

    def run(
        self, script: str, scenario: str, spec: Mapping[str, Any], timeout: float = 120.0
    ) -> dict[str, Any]:
        node = shutil.which("node")
        if node is None:
            raise ClientProgramError("node not found; run `bash scripts/setup.sh test`")
        if not (self.node_modules / "kafkajs").is_dir():
            raise ClientProgramError(
                f"kafkajs is not installed in {self.node_modules}; run `bash scripts/setup.sh test`"
            )
        env = {**os.environ, "NODE_PATH": str(self.node_modules)}
        spec = _with_defaults(spec, timeout)
        return _run_json([node, str(JS_DIR / script), scenario, json.dumps(spec)], timeout, env)


def start_sasl_ssl_broker(
    fresh_broker: Callable[..., BrokerProcess],
    directory: Path,
    mechanism: str,
    overrides: Mapping[str, str] | None = None,
) -> tuple[BrokerProcess, Security]:
    """A broker process with a SASL_SSL listener (its `bootstrap`) for `mechanism`, users
    admin (a super user) and alice. SCRAM users are added as an operator would, with
    `odradek users add` (AlterUserScramCredentials) through a PLAINTEXT admin listener."""
    scram = mechanism.startswith("SCRAM-")
    sec = Security("sasl_ssl", mechanism=mechanism, plaintext_too=scram, directory=str(directory))
    port = free_port()
    ports = {sec.listener: port}
    if scram:
        ports["PLAINTEXT"] = free_port()
    settings = {
        **sec.broker_config(),
        "listeners": sec.listeners(HOST, ports),
        "offsets.topic.num.partitions": "1",
        **(overrides or {}),
    }
    broker = fresh_broker(settings, port=port)
    if scram:
        for user in ("admin", *sec.users):
            cmd = [sys.executable, "-m", "odradek", "users", "add", user]
            cmd += ["--password", sec.password(user), "--mechanism", mechanism]
            cmd += ["--bootstrap-server", f"{HOST}:{ports['PLAINTEXT']}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=broker.env)
            if proc.returncode != 0:
                raise ClientProgramError(f"odradek users add {user}: {proc.stdout}{proc.stderr}")
    return broker, sec
