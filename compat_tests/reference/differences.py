"""Rewrite docs/kafka-differences.md from what the differential suite observes.

    python -m compat_tests.reference.differences [extra pytest args, e.g. -k raw]
    python -m compat_tests.reference.differences --again   (re-render the last run's findings)

Runs the `reference` tests (compat_tests/reference/) with ODRADEK_REFERENCE_RECORD set, so each
comparison records its differences instead of failing, then rewrites the table of the page:

- a difference already listed keeps its status and reason (the observed values are refreshed);
- a new one is added with status `new` and no reason: the suite fails on it until someone fixes
  odradek or marks the row `kept` and writes why;
- a `kept` row no longer observed is dropped (the difference is gone), a `fixed` row stays as
  the record of the fix.

Only the text below the TABLE_MARKER line is rewritten; the introduction above it is kept.
With -k or other selections, rows of scenarios that did not run are left as they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from compat_tests.reference.diff import DOC, RECORD_ENV, ROOT, Known, load_known

TABLE_MARKER = "<!-- table: rewritten by python -m compat_tests.reference.differences -->"
LAST = ROOT / ".cache" / "kafka-differences-observed.jsonl"
HEADER = "| Scenario | Field | odradek | Kafka | Status | Reason |\n|--|--|--|--|--|--|\n"


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _versions(vs: set[int | None]) -> str:
    nums = sorted(v for v in vs if v is not None)
    if not nums:
        return ""
    runs: list[list[int]] = []
    for v in nums:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return "v" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def render(observed: list[dict[str, object]], known: dict[tuple[str, str], Known], ran: set[str]):
    grouped: dict[tuple[str, str], dict[str, set]] = defaultdict(
        lambda: {"odradek": set(), "kafka": set(), "versions": set()}
    )
    for row in observed:
        if row["field"] is None:
            continue
        key = (str(row["scenario"]), str(row["field"]))
        grouped[key]["odradek"].add(str(row["odradek"]))
        grouped[key]["kafka"].add(str(row["kafka"]))
        grouped[key]["versions"].add(row.get("version"))  # type: ignore[arg-type]
    lines = []
    for key in sorted(set(grouped) | set(known)):
        scenario, field = key
        row = known.get(key)
        seen = grouped.get(key)
        if seen is None:
            if row is None or (row.status != "fixed" and scenario in ran):
                continue  # gone
            lines.append(_line(scenario, field, "", "", row.status, row.reason))
            continue
        versions = _versions(seen["versions"])
        ours = " / ".join(sorted(seen["odradek"]))
        theirs = " / ".join(sorted(seen["kafka"]))
        if versions:
            ours = f"{ours} ({versions})"
        status = row.status if row else "new"
        lines.append(_line(scenario, field, ours, theirs, status, row.reason if row else ""))
    return HEADER + "".join(lines)


def _line(scenario: str, field: str, ours: str, theirs: str, status: str, reason: str) -> str:
    cells = [f"`{_esc(scenario)}`", f"`{_esc(field)}`", _esc(ours), _esc(theirs), status, reason]
    return "| " + " | ".join(cells) + " |\n"


def main(argv: list[str]) -> int:
    """Run the suite recording (or, with --again, reuse the last run's observations)."""
    status = 0
    if argv[:1] == ["--again"]:
        observed = [json.loads(line) for line in LAST.read_text().splitlines() if line]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            record = Path(tmp) / "observed.jsonl"
            record.touch()
            env = {**os.environ, RECORD_ENV: str(record)}
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            cmd += ["compat_tests/reference", "-m", "reference", *argv]
            status = subprocess.call(cmd, cwd=ROOT, env=env)
            LAST.parent.mkdir(exist_ok=True)
            LAST.write_text(record.read_text())
            observed = [json.loads(line) for line in LAST.read_text().splitlines() if line]
    ran = {str(row["scenario"]) for row in observed}
    known = load_known()
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else TABLE_MARKER + "\n"
    head = text.split(TABLE_MARKER)[0]
    DOC.write_text(head + TABLE_MARKER + "\n\n" + render(observed, known, ran), encoding="utf-8")
    new = sum(1 for line in DOC.read_text().splitlines() if line.endswith("| new |  |"))
    print(f"{DOC.relative_to(ROOT)}: {len(observed)} observations, {new} new rows to explain")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
