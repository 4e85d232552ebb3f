"""How the CLI tests run `python -m odradek ...` in a subprocess and read its one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
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
