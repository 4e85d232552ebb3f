"""The results table (markdown) and the lines around it; also a JSON form of the same data."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

MB = 1e6  # MB/s and MB of RSS are decimal megabytes


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: one phase (produce or consume) of one workload."""

    workload: str
    client: str
    partitions: int
    records: int
    expected: int
    elapsed_s: float
    value_bytes: int
    measured_records: int
    measured_bytes: int
    errors: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None  # the native driver's produce rows
    broker_cpu_s: float | None = None
    broker_cpu_percent: float | None = None  # broker CPU s over elapsed_s (the rate interval)
    broker_peak_rss_mb: float | None = None
    client_cpu_s: float | None = None
    # host busy CPU s minus broker and client: other processes' load (the broker's own, too,
    # when its pid is unknown)
    others_cpu_s: float | None = None

    @property
    def messages_per_s(self) -> float:
        return self.measured_records / self.elapsed_s if self.elapsed_s > 0 else math.nan

    @property
    def mb_per_s(self) -> float:
        return self.measured_bytes / MB / self.elapsed_s if self.elapsed_s > 0 else math.nan

    @property
    def broker_cpu_s_per_gb(self) -> float | None:
        """Broker CPU seconds per GB (10^9 bytes) of values the phase moved."""
        if self.broker_cpu_s is None or self.value_bytes <= 0:
            return None
        return self.broker_cpu_s / (self.value_bytes / 1e9)

    @property
    def complete(self) -> bool:
        return self.records == self.expected and self.errors == 0


@dataclass(slots=True)
class Report:
    """Everything a run found: a header, the rows, and the start-up and memory findings."""

    settings: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    startup_api_versions_ms: list[float] = field(default_factory=list)
    startup_ready_line_ms: list[float] = field(default_factory=list)
    # (GB of values written so far, broker VmRSS MB, peak RSS MB during that produce phase)
    rss_after_written: tuple[float, float, float] | None = None
    notes: list[str] = field(default_factory=list)
    ceilings: list[str] = field(default_factory=list)  # the machine's (bench.ceilings)
    targets: list[str] = field(default_factory=list)  # issue 17's targets, met or not

    def to_json(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            data = asdict(row)
            data.update(
                messages_per_s=row.messages_per_s,
                mb_per_s=row.mb_per_s,
                broker_cpu_s_per_gb=row.broker_cpu_s_per_gb,
                complete=row.complete,
            )
            rows.append(data)
        return {
            "settings": self.settings,
            "rows": rows,
            "startup_api_versions_ms": self.startup_api_versions_ms,
            "startup_ready_line_ms": self.startup_ready_line_ms,
            "rss_after_written": self.rss_after_written,
            "notes": self.notes,
            "ceilings": self.ceilings,
            "targets": self.targets,
        }


COLUMNS = (
    "workload",
    "client",
    "partitions",
    "records",
    "messages/s",
    "MB/s",
    "produce p50/p99/p99.9 ms",
    "broker CPU s",
    "broker CPU %",
    "broker CPU s/GB",
    "broker peak RSS MB",
    "client CPU s",
    "others CPU s",
)


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or math.isnan(value):
        return ""
    return f"{value:,.{digits}f}"


def _cells(row: Row) -> list[str]:
    latency = ""
    if row.p50_ms is not None and row.p99_ms is not None:
        latency = f"{_num(row.p50_ms, 2)} / {_num(row.p99_ms, 2)}"
        if row.p999_ms is not None:
            latency += f" / {_num(row.p999_ms, 2)}"
    records = f"{row.records:,}" if row.complete else f"{row.records:,} of {row.expected:,} (!)"
    return [
        row.workload,
        row.client,
        str(row.partitions),
        records,
        _num(row.messages_per_s, 0),
        _num(row.mb_per_s, 1),
        latency,
        _num(row.broker_cpu_s, 2),
        _num(row.broker_cpu_percent, 0),
        _num(row.broker_cpu_s_per_gb, 2),
        _num(row.broker_peak_rss_mb, 1),
        _num(row.client_cpu_s, 2),
        _num(row.others_cpu_s, 2),
    ]


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    if len(ordered) == 1:
        return f"{median:.0f} ms"
    return (
        f"{median:.0f} ms median of {len(ordered)} starts "
        f"(min {ordered[0]:.0f}, max {ordered[-1]:.0f})"
    )


def render(report: Report) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in report.settings.items())
    out = [f"Settings: {settings}", "", markdown_table(report.rows), ""]
    if report.startup_api_versions_ms:
        out.append(
            "- start to first ApiVersions answer: " + _spread(report.startup_api_versions_ms)
        )
    if report.startup_ready_line_ms:
        out.append("- start to `odradek ready` line: " + _spread(report.startup_ready_line_ms))
    if report.rss_after_written is not None:
        written_gb, rss, hwm = report.rss_after_written
        out.append(
            f"- broker RSS after {written_gb:.2f} GB written: {rss:.1f} MB "
            f"(peak during that produce phase {hwm:.1f} MB)"
        )
    out += [f"- {note}" for note in report.notes]
    if report.ceilings:
        out += ["", "The machine's ceilings (bench.ceilings, measured before the broker started):"]
        out += [f"- {line}" for line in report.ceilings]
    if report.targets:
        out += ["", "Targets (issue 17; native driver, one partition):"]
        out += [f"- {line}" for line in report.targets]
    return "\n".join(out)
