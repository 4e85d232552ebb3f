"""`python -m bench.txn`: one-record transactions on a three-broker cluster with replication
factor 3 commit, and the table has the row with its commit times (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.compat


def test_bench_txn_row() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.txn", "--transactions", "10"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = re.findall(
        r"^\| 3 \| 3 \| 10 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", proc.stdout, re.M
    )
    assert len(rows) == 1, proc.stdout
    p50, p99, worst, _whole = (float(x) for x in rows[0])
    assert 0 < p50 <= p99 <= worst
