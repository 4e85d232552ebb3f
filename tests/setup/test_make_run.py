"""`make run` on a fresh copy of the checkout (issue 13): it sets up only what the broker needs
(a venv with odradek and its runtime deps: no apt packages, no test extra, no pipelines), prints
a progress line per step, and the broker it starts gets ready; `scripts/setup.sh` refuses an
unknown profile. The profile `make test` uses is exercised by every CI run itself."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_DEADLINE_S = 240  # a cold pip cache on a slow machine; about 15 s here


def _copy_checkout(dest: Path) -> None:
    """The checkout's tracked files as they are now (uncommitted edits included), no .venv."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src = REPO / name
        if not src.is_file():
            continue  # deleted in the work tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src.read_bytes())
        target.chmod(src.stat().st_mode)


def _fake_system_tools(bin_dir: Path, log: Path) -> None:
    """apt-get and sudo that record being called and fail: `make run` must need neither."""
    bin_dir.mkdir()
    for tool in ("apt-get", "sudo"):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\nexit 1\n')
        script.chmod(0o755)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_make_run_sets_up_only_the_broker_and_starts_it(tmp_path: Path) -> None:
    if subprocess.run(["which", "make"], capture_output=True).returncode != 0:
        pytest.skip("make is not installed")
    checkout = tmp_path / "odradek"
    _copy_checkout(checkout)
    warm = REPO / ".cache" / "pip"  # the pip cache of this checkout's own set-up, if any
    if warm.is_dir():
        (checkout / ".cache").mkdir(exist_ok=True)
        (checkout / ".cache" / "pip").symlink_to(warm)
    calls = tmp_path / "system-calls.log"
    _fake_system_tools(tmp_path / "bin", calls)
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "PYTHONPATH": "",
    }
    env.pop("VIRTUAL_ENV", None)
    args = f"--override listeners=PLAINTEXT://127.0.0.1:{port} --override log.dirs={tmp_path}/data"
    out = tmp_path / "make-run.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            ["make", "run", f"ARGS={args}"],
            cwd=checkout,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and the broker it starts: one group to stop
        )
    try:
        deadline = time.monotonic() + READY_DEADLINE_S
        while "odradek ready" not in (text := out.read_text(errors="replace")):
            assert proc.poll() is None, f"make run exited {proc.returncode}:\n{text}"
            assert time.monotonic() < deadline, f"no 'odradek ready' yet:\n{text}"
            time.sleep(0.2)  # polling the output with a deadline
        # make run says how to reach the odradek command; what it says works in a new shell
        hint = [line for line in text.splitlines() if line.startswith("make run: the odradek")]
        assert hint and hint[0].endswith("in another shell: source .venv/bin/activate"), text
        shell = subprocess.run(
            ["bash", "-c", f"source .venv/bin/activate && odradek topics list -b 127.0.0.1:{port}"],
            cwd=checkout,
            env={k: v for k, v in env.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shell.returncode == 0, shell.stdout + shell.stderr
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = text.splitlines()
    assert "setup: [2/3] python -m venv .venv" in lines, text
    assert any(line.startswith("setup: [3/3] pip install -e . (runtime deps") for line in lines)
    assert any(line.startswith("Successfully installed") for line in lines), text  # pip shown
    assert "setup: ready for make run (.venv with odradek and its runtime deps)" in lines
    assert f"127.0.0.1:{port}" in text
    assert not calls.exists(), calls.read_text()  # no apt-get: no java, kcat, zookeeper
    venv_python = checkout / ".venv" / "bin" / "python"
    installed = subprocess.run(
        [str(venv_python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    ).stdout.lower()
    assert "kafka-python==" in installed and "odradek==" in installed
    for extra in ("pytest==", "pyspark==", "apache-flink==", "confluent-kafka==", "mypy=="):
        assert extra not in installed, f"{extra} installed by make run"
    # a second `make run` setup does nothing
    again = subprocess.run(
        ["bash", "scripts/setup.sh", "run"], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0 and again.stdout.splitlines() == [
        "setup: ready for make run (.venv with odradek and its runtime deps)"
    ], again.stdout + again.stderr


def test_setup_refuses_an_unknown_profile() -> None:
    proc = subprocess.run(
        ["bash", "scripts/setup.sh", "everything"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "usage: scripts/setup.sh [run|test]"
