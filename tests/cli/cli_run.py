"""How the CLI tests run `python -m odradek ...` in a subprocess (to its end, or in the
background reading its output lines) and read its one-line error."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 60


def run_odradek(
    *args: str,
    bootstrap: str | None = None,
    status: int | None = 0,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m odradek ARGS` from the repository, text in and out. `bootstrap` goes to
    ODRADEK_BOOTSTRAP, `env` over the rest of the environment; the exit status must be `status`
    (not checked when None)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    if bootstrap is not None:
        full_env["ODRADEK_BOOTSTRAP"] = bootstrap
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        input=stdin,
        text=True,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        env=full_env,
        cwd=REPO,
    )
    if status is not None:
        assert proc.returncode == status, (proc.stdout, proc.stderr)
    return proc


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single `odradek: ...` line a failed command writes to stderr."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("odradek: "), proc.stderr
    return lines[0]


def start_odradek(*args: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """Start `python -m odradek ARGS` from the repository in the background (stderr dropped);
    its stdout lines, without the newline, arrive in the queue as it prints them. The caller
    stops the process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines
