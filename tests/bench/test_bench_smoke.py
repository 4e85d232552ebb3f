"""Smoke test of `python -m bench`: a small run against a spawned odradek broker gives the
expected table rows (the native driver's first, then the Python client's), and every record
produced is consumed back. Timings are never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDS = 2000
RATE_RECORDS = 977  # --rate 2 (MB/s) for --rate-seconds 0.5, of 1024 B values
NATIVE = "odradek_perf"
RAW = "raw Fetch"
NATIVE_WORKLOADS = [
    "produce 100 B",
    "consume 100 B",
    "consume 100 B raw fetch",
    "produce 1024 B",
    "consume 1024 B",
    "consume 1024 B raw fetch",
    "produce 1024 B at 2 MB/s offered, linger 1 ms",
    "produce 1024 B acks=all flush.messages=1",
    "produce 1024 B acks=all flush.messages=1 at 2 MB/s offered, linger 1 ms",
]
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

from bench import native  # noqa: E402  (after the importorskip: bench imports confluent_kafka)

try:
    native.ensure_built()
    HAVE_NATIVE = True
except native.NativeUnavailable:  # no librdkafka-dev or gcc: the Python rows only
    HAVE_NATIVE = False


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
            "--native-records",
            str(RECORDS),
            "--rate",
            "2",
            "--rate-seconds",
            "0.5",
            "--no-ceilings",
            "--drivers",
            "native,python" if HAVE_NATIVE else "python",
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
    assert "produce p50/p99/p99.9 ms" in header and "broker CPU s" in header
    assert "broker peak RSS MB" in header and "broker CPU s/GB" in header
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    native = [row for row in rows if row[1].startswith((NATIVE, RAW))]
    python = [row for row in rows if not row[1].startswith((NATIVE, RAW))]
    assert rows == native + python  # the native rows first
    native_workloads = NATIVE_WORKLOADS if HAVE_NATIVE else []
    assert [row[0] for row in native] == native_workloads
    assert [row[0] for row in python] == WORKLOADS
    for row in rows:
        expected = RATE_RECORDS if "offered" in row[0] else RECORDS
        assert row[3] == f"{expected:,}", row
        assert row[header.index("broker CPU s")] != "", row  # our broker's pid is known
    assert "start to first ApiVersions answer" in proc.stdout
    assert ("Targets (issue 17" in proc.stdout) == HAVE_NATIVE

    report = json.loads(out_json.read_text())
    assert [r["workload"] for r in report["rows"]] == native_workloads + WORKLOADS
    for row in report["rows"]:
        assert row["records"] == row["expected"] and row["expected"] in (RECORDS, RATE_RECORDS)
        assert row["errors"] == 0 and row["complete"]
    for row in report["rows"]:
        if row["workload"].startswith("produce"):  # delivery-report latencies
            assert row["p50_ms"] is not None and row["p99_ms"] >= row["p50_ms"]
            if row["client"].startswith(NATIVE):
                assert row["p999_ms"] >= row["p99_ms"]
    assert len(report["startup_api_versions_ms"]) == 1
