"""Power loss for tests: what a machine that crashes keeps is what it fsync'd (Jepsen's LazyFS).

Never active in a normal run: only `odradek serve` with the environment variable
`ODRADEK_TEST_POWER_LOSS_JOURNAL=<file>` installs it. Then every `os.fsync` of a regular file
also appends to that journal (itself fsync'd) the file's path and size, and for a small file
that is not a segment or an index (checkpoints, producer snapshots) its whole content. After
the process is killed (kill -9: the "crash"), `discard_unsynced(data_dir, journal)` puts the
data directory back to what the disk would hold after the machine lost power:

- a segment (`.log`) is cut to its size at its last fsync, or emptied if it never had one;
- a checkpoint or snapshot gets back its content at its last fsync (a temp file fsync'd before
  its rename counts for the renamed file), or is removed if it never had one;
- a transaction index (`.txnindex`, not a hint: read_committed fetches trust it) is cut to
  its size at its last fsync too, or removed if it never had one;
- the offset and time indexes are left as they are: they are hints, rebuilt above the
  recovery point as Kafka's LogLoader does after an unclean shutdown.

Kafka counterpart: the recovery point and the unclean-shutdown recovery of LogLoader; the
guarantee exercised is acks=all with min.insync.replicas surviving the loss of one replica's
unflushed tail (replication, not fsync, makes a write durable: flush.messages defaults to off).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
from pathlib import Path
from typing import Protocol

ENV = "ODRADEK_TEST_POWER_LOSS_JOURNAL"
SMALL = 1 << 16
INDEXES = (".index", ".timeindex", ".txnindex")


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


_lock = threading.Lock()
_journal: int | None = None
_real_fsync = os.fsync


def install_from_env() -> bool:
    """Install the journal when `ODRADEK_TEST_POWER_LOSS_JOURNAL` names a file."""
    path = os.environ.get(ENV)
    if path:
        install(path)
    return bool(path)


def install(path: str) -> None:
    global _journal
    with _lock:
        if _journal is None:
            _journal = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.fsync = _journaled_fsync


def _journaled_fsync(fd: int | _HasFileno) -> None:
    n = fd if isinstance(fd, int) else fd.fileno()
    _real_fsync(n)
    try:
        st = os.fstat(n)
        if not stat.S_ISREG(st.st_mode):
            return
        path = os.readlink(f"/proc/self/fd/{n}")
        entry: dict[str, object] = {"path": path, "size": st.st_size}
        if st.st_size <= SMALL and not path.endswith((".log", *INDEXES)):
            entry["content"] = base64.b64encode(os.pread(n, st.st_size, 0)).decode()
    except OSError:
        return
    line = (json.dumps(entry) + "\n").encode()
    with _lock:
        if _journal is not None:
            os.write(_journal, line)
            _real_fsync(_journal)


def _synced(journal: str) -> dict[str, dict[str, object]]:
    """The last journal entry per path (a `.tmp` file's entry stands for the renamed file)."""
    out: dict[str, dict[str, object]] = {}
    try:
        text = Path(journal).read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # the journal's own torn last line
        path = str(entry["path"])
        out[path.removesuffix(".tmp")] = entry
    return out


def discard_unsynced(data_dir: str | os.PathLike[str], journal: str) -> list[str]:
    """Roll `data_dir` back to what was fsync'd (see the module docstring); the changes made."""
    synced = _synced(journal)
    changes: list[str] = []
    root = Path(data_dir).resolve()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith((".index", ".timeindex")):
            continue
        in_partition = path.parent != root
        if not in_partition and not path.name.endswith("-checkpoint"):
            continue  # meta.properties and the like are not written in a test's lifetime
        entry = synced.get(str(path))
        size = path.stat().st_size
        if path.suffix == ".log":
            keep = int(entry["size"]) if entry else 0  # type: ignore[call-overload]
            if size > keep:
                os.truncate(path, keep)
                changes.append(f"{path.relative_to(root)}: {size} -> {keep} bytes")
        elif path.suffix == ".txnindex":
            keep = int(entry["size"]) if entry else 0  # type: ignore[call-overload]
            if not keep:
                path.unlink()
                changes.append(f"{path.relative_to(root)}: removed (never fsync'd)")
            elif size > keep:
                os.truncate(path, keep)
                changes.append(f"{path.relative_to(root)}: {size} -> {keep} bytes")
        elif entry is None:
            path.unlink()
            changes.append(f"{path.relative_to(root)}: removed (never fsync'd)")
        elif "content" in entry:
            old = path.read_bytes()
            new = base64.b64decode(str(entry["content"]))
            if old != new:
                path.write_bytes(new)
                changes.append(f"{path.relative_to(root)}: back to its fsync'd content")
    return changes
