"""`python -m bench.down_convert` (issue 16): every row reads all the records back, and one large
Fetch v3 (40 MB, down-converted while written) leaves the broker's peak RSS within a bound well
below the answer's size: the conversion holds a chunk at a time, not the response. No timings
are asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDS = 40_000  # of 1 KiB: 40 MB in the partition
LARGE_MB = 40
RSS_GROWTH_BOUND_MB = 20  # a whole converted answer would be 40

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.compat


def test_down_convert_rows_and_bounded_memory(tmp_path: Path) -> None:
    out = tmp_path / "dc.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.down_convert", "--records", str(RECORDS)]
        + ["--large-mb", str(LARGE_MB), "--rounds", "1", "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    names = [r["name"] for r in result["rows"]]
    assert names == ["Fetch v12 (zero-copy)", "Fetch v3 (magic 1)", "Fetch v1 (magic 0)"]
    assert all(r["records"] == RECORDS for r in result["rows"])
    v12, v3 = result["large"]
    assert v3["wire_mb"] == pytest.approx(LARGE_MB, rel=0.01)  # the answer is the region's size
    assert v3["records"] > RECORDS * 0.9
    assert v3["peak_rss_mb"] - v3["rss_before_mb"] < RSS_GROWTH_BOUND_MB
    assert v12["peak_rss_mb"] - v12["rss_before_mb"] < RSS_GROWTH_BOUND_MB
