"""Per-data-dir offset checkpoint files, as Kafka's OffsetCheckpointFile.

Text files written atomically (temp file, fsync, rename):

    line 1   version (0)
    line 2   number of entries
    then     "<topic> <partition> <offset>" per entry

Used for `recovery-point-offset-checkpoint`, `replication-offset-checkpoint` (high watermarks)
and `log-start-offset-checkpoint`.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

RECOVERY_POINT = "recovery-point-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"


def write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_checkpoint(path: str, entries: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    write_atomic(path, "\n".join(lines) + "\n")


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Entries of a checkpoint file; a missing or malformed file reads as empty (logged)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, part, off = line.rsplit(" ", 2)
            out[(topic, int(part))] = int(off)
        return out
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}
