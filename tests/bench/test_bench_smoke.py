"""Smoke test of `python -m bench`: a small run against a spawned odradek broker gives the
expected table rows, and every record produced is consumed back. Timings are never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDS = 2000
WORKLOADS = [
    "produce 100 B",
    "consume 100 B",
    "produce 1024 B",
    "consume 1024 B",
    "produce 1024 B TLS",  # the same broker's SSL listener (--tls-sizes, default 1024)
    "consume 1024 B TLS",
]

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.compat


def test_bench_small_run(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--records",
            str(RECORDS),
            "--startup-runs",
            "0",
            "--json",
            str(out_json),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    table = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header[:6] == ["workload", "client", "partitions", "records", "messages/s", "MB/s"]
    assert "produce p50/p99 ms" in header and "broker CPU s" in header
    assert "broker peak RSS MB" in header
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[0] for row in rows] == WORKLOADS
    for row in rows:
        assert row[3] == f"{RECORDS:,}", row
        assert row[header.index("broker CPU s")] != "", row  # our broker's pid is known
    assert "start to first ApiVersions answer" in proc.stdout

    report = json.loads(out_json.read_text())
    assert [r["workload"] for r in report["rows"]] == WORKLOADS
    for row in report["rows"]:
        assert row["records"] == row["expected"] == RECORDS
        assert row["errors"] == 0 and row["complete"]
    for row in report["rows"][0::2]:  # produce rows carry delivery-report latencies
        assert row["p50_ms"] is not None and row["p99_ms"] >= row["p50_ms"]
    assert len(report["startup_api_versions_ms"]) == 1
