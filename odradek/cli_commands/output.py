"""What the CLI prints: aligned tables for people, JSON for scripts, a progress line on stderr.

Results go to stdout, errors and progress to stderr, so `odradek consume ... > file` keeps only
the records. Tables follow the look of Kafka's own tools (kafka-topics.sh,
kafka-consumer-groups.sh): upper-case headers, columns padded to their widest cell.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


class CliError(Exception):
    """A failure to report as one line on stderr, ending the command with `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows as aligned columns, two spaces apart, with a header line; no trailing blanks."""
    text_rows = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = []
    for row in [list(headers), *text_rows]:
        lines.append("  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip())
    return "\n".join(lines)


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None
) -> None:
    print(table(headers, rows), file=out or sys.stdout)


def print_json(data: Any, out: TextIO | None = None) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str), file=out or sys.stdout)


def print_json_line(data: Any, out: TextIO | None = None) -> None:
    print(json.dumps(data, separators=(",", ":"), default=str), file=out or sys.stdout)


def text(data: bytes | None) -> str | None:
    """Bytes for display: UTF-8 where it is, backslash escapes where it is not."""
    if data is None:
        return None
    return data.decode("utf-8", errors="backslashreplace")


class Progress:
    """A status line on stderr at most once per `interval` seconds.

    On a terminal it rewrites one line in place; otherwise (only with --progress) it prints one
    line per update so logs stay readable.
    """

    def __init__(
        self,
        label: str,
        enabled: bool | None = None,
        interval: float = 1.0,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = self.tty if enabled is None else enabled
        self.label = label
        self.interval = interval
        self.count = 0
        self.started = time.monotonic()
        self._last = self.started
        self._shown = False

    def add(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._show(now)

    def _show(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        line = f"{self.label}: {self.count} records, {self.count / elapsed:.0f}/s"
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self.enabled and self._shown and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
