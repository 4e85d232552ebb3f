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
import threading

from odradek.log.flusher import FSYNC_EXECUTOR

log = logging.getLogger(__name__)

RECOVERY_POINT = "recovery-point-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"


def write_atomic(path: str, text: str, fsync: bool = True) -> None:
    """Replace `path` with `text` through a temp file and a rename, fsync'd before the rename
    unless `fsync` is False (write_soon fsyncs it later, off the event loop)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


_unsynced: set[str] = set()  # paths written by write_soon whose fsync is queued
_unsynced_lock = threading.Lock()


def write_soon(path: str, text: str) -> None:
    """Replace `path` atomically now (temp file, rename) and fsync it in the fsync thread.

    For files written on the event loop in bursts (the leader-epoch checkpoint of every
    partition a broker becomes leader of): an fsync each, on the loop, stalled every broker of
    the process on a busy disk. Kafka too flushes its leader-epoch truncations in the
    background. A process that dies after this call leaves the new content (it is in the page
    cache); a machine that loses power before the fsync may lose it, as it loses the unflushed
    batches written in that epoch, and recovery of the unflushed segments assigns their epochs
    again from the batch headers (Log._recover). Several writes of a path before its fsync runs
    share one fsync."""
    write_atomic(path, text, fsync=False)
    with _unsynced_lock:
        if path in _unsynced:
            return
        _unsynced.add(path)
    FSYNC_EXECUTOR.submit(_fsync_path, path)


def _fsync_path(path: str) -> None:
    with _unsynced_lock:
        _unsynced.discard(path)  # a write from now on queues a sync of its own
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # deleted since (a partition removed): nothing left to keep
    except OSError as exc:
        log.error("cannot open %s to sync it: %s", path, exc)
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        log.error("fsync of %s failed: %s", path, exc)
    finally:
        os.close(fd)


def sync_written() -> None:
    """Wait until every file written by write_soon so far is fsync'd (a clean shutdown)."""
    FSYNC_EXECUTOR.submit(int).result()


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
    if len(lines) < 2 and (not lines or lines[0].strip() == "0"):
        # Kafka creates these files empty at start-up (a killed Kafka leaves them so) and
        # reads an empty file, or a version line alone, as no entries (CheckpointFile)
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
