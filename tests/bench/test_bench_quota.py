"""`python -m bench --quota-rate`: the throttled-producer row runs against a spawned broker, the
producer is throttled and held to its producer_byte_rate quota over one quota period."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
QUOTA = 1_000_000

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.compat


def test_bench_throttled_producer_row(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--sizes",
            "100",
            "--records",
            "1000",
            "--startup-runs",
            "0",
            "--drivers",
            "python",  # the throttled row is the Python client's
            "--tls-sizes",
            "none",
            "--no-ceilings",
            "--quota-rate",
            str(QUOTA),
            "--quota-periods",
            "1",
            "--json",
            str(out_json),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    report = json.loads(out_json.read_text())
    row = report["rows"][-1]
    assert row["workload"] == "produce 1024 B, producer_byte_rate=1 MB/s"
    assert row["complete"] and row["errors"] == 0
    # the broker holds the producer to its quota: over a whole period it cannot go much
    # faster (a slow machine may only make it slower)
    achieved = row["measured_bytes"] / row["elapsed_s"]
    assert achieved < 1.5 * QUOTA
    note = next(n for n in report["notes"] if n.startswith(row["workload"]))
    assert int(note.rsplit(" ", 1)[1]) > 0  # the largest throttle_time_ms the producer saw
