"""`python -m bench.rebalance`: a fourth member joins a group of three, classic and KIP-848, and
the table has both rows with times."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.compat


def test_bench_rebalance_rows() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.rebalance",
            "--partitions",
            "4",
            "--broker-override",
            "group.initial.rebalance.delay.ms=0",
            "--broker-override",
            "group.consumer.heartbeat.interval.ms=500",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = re.findall(r"^\| (classic|consumer) \| 4 \| ([\d.]+) \| ([\d.]+) \|$", proc.stdout, re.M)
    assert [r[0] for r in rows] == ["classic", "consumer"], proc.stdout
    assert all(float(r[2]) > 0 for r in rows)
