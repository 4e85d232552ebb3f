"""The data directories and every partition log in them, as Kafka's LogManager.

Owns the per-directory checkpoint files (recovery points, high watermarks, log start offsets) and
the clean-shutdown marker: when the marker is missing at start, logs are recovered from their
recovery points with CRC checks.

Each directory has a `LogDir` (disk_faults.py): an I/O error while writing in it takes it offline,
as Kafka's LogDirFailureChannel does. Nothing more is written to an offline dir, checkpoints and
the clean-shutdown marker included, so the next start recovers its logs from their last
complete batches. New logs go to online dirs. `inject_fault` makes a dir fail (tests).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from odradek.log.checkpoints import (
    HIGH_WATERMARK,
    LOG_START,
    RECOVERY_POINT,
    read_checkpoint,
    sync_written,
    write_checkpoint,
)
from odradek.log.config import LogConfig
from odradek.log.disk_faults import FSYNC, WRITE, LogDir
from odradek.log.log import Log, read_partition_metadata, write_partition_metadata

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOAD_THREADS = 8
PARALLEL_LOAD_FROM = 64  # partitions in a dir from which they are loaded by LOAD_THREADS
_DIR_RE = re.compile(r"^(.+)-(\d+)$")


class DataDirError(Exception):
    """A data directory that cannot be created, written or locked."""


class ReplicaMove(Protocol):
    """A replica moving between log dirs (`log/dir_move.py` FutureReplica, KIP-113)."""

    dest: str
    future: Log

    @property
    def offset_lag(self) -> int: ...
    def abort(self) -> None: ...


class LogManager:
    def __init__(self, dirs: list[str]) -> None:
        self.dirs = [os.path.abspath(d) for d in dirs]
        self.log_dirs = {d: LogDir(d) for d in self.dirs}
        self.logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._locks: list[int] = []  # flock'd file descriptors, one per data dir
        for d in self.dirs:
            if os.path.exists(d) and not os.path.isdir(d):
                raise DataDirError(f"data dir {d} is not a directory")
            try:
                os.makedirs(d, exist_ok=True)
                probe = os.path.join(d, ".odradek-probe")
                with open(probe, "w") as f:
                    f.write("ok")
                os.unlink(probe)
            except OSError as exc:
                raise DataDirError(f"data dir {d} is not usable: {exc.strerror}") from None
            self._lock(d)
        self.high_watermarks: dict[tuple[str, int], int] = {}
        self.moves: dict[tuple[str, int], ReplicaMove] = {}  # replicas moving between dirs
        # AlterReplicaLogDirs for a replica not created yet: where it goes when it is
        self.preferred_dirs: dict[tuple[str, int], str] = {}

    def _lock(self, d: str) -> None:
        import fcntl

        fd = os.open(os.path.join(d, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DataDirError(f"data dir {d} is in use by another broker") from None
        self._locks.append(fd)

    def _partition_dirs(self, d: str) -> list[tuple[str, int, str]]:
        """(topic, partition, path) of the partition directories in data dir `d`; deleted
        replicas and cut-short moves are removed (as `discover`, without reading topic ids)."""
        found = []
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if name.endswith(("-delete", "-future")):
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                continue
            m = _DIR_RE.match(name)
            if m and os.path.isdir(path):
                found.append((m.group(1), int(m.group(2)), path))
        return found

    def discover(self) -> list[tuple[str, int, uuid.UUID | None, str]]:
        """Partition directories on disk: (topic, partition, topic id, path)."""
        found = []
        for d in self.dirs:
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if name.endswith(("-delete", "-future")) and os.path.isdir(path):
                    # a deleted replica, or a move between dirs cut short (log/dir_move.py)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                m = _DIR_RE.match(name)
                if m and os.path.isdir(path):
                    found.append((m.group(1), int(m.group(2)), read_partition_metadata(path), path))
        return found

    def load_all(self, config_for: Callable[[str], LogConfig]) -> None:
        """Open every partition on disk; `config_for(topic)` gives its LogConfig (asked once
        per topic)."""
        configs: dict[str, LogConfig] = {}

        def config_of(topic: str) -> LogConfig:
            cfg = configs.get(topic)
            if cfg is None:
                cfg = configs[topic] = config_for(topic)
            return cfg

        for d in self.dirs:
            clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN))
            recovery = read_checkpoint(os.path.join(d, RECOVERY_POINT))
            starts = read_checkpoint(os.path.join(d, LOG_START))
            self.high_watermarks.update(read_checkpoint(os.path.join(d, HIGH_WATERMARK)))
            found = self._partition_dirs(d)
            if not clean and found:
                log.warning("%s was not shut down cleanly: recovering logs", d)
            for topic, _part, _path in found:
                config_of(topic)  # on this thread: config_for may read shared state

            def load(
                item: tuple[str, int, str],
                d: str = d,
                clean: bool = clean,
                recovery: dict[tuple[str, int], int] = recovery,
                starts: dict[tuple[str, int], int] = starts,
            ) -> Log:
                topic, part, path = item
                return Log(
                    path,
                    topic,
                    part,
                    configs[topic],
                    recovery_point=recovery.get((topic, part), 0),
                    log_start_offset=starts.get((topic, part), 0),
                    clean_shutdown=clean,
                    log_dir=self.log_dirs[d],
                )

            if len(found) >= PARALLEL_LOAD_FROM:
                # as Kafka's num.recovery.threads.per.data.dir: loading is mostly waiting on the
                # disk (a cold page cache), which threads overlap
                with ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="log-load") as pool:
                    loaded = list(pool.map(load, found))
            else:
                loaded = [load(item) for item in found]
            for (topic, part, _path), lg in zip(found, loaded, strict=True):
                self.logs[(topic, part)] = lg
                self._dir_of[(topic, part)] = d
            if clean:
                os.unlink(os.path.join(d, CLEAN_SHUTDOWN))

    def get_or_create(
        self, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig
    ) -> Log:
        key = (topic, partition)
        existing = self.logs.get(key)
        if existing is not None:
            return existing
        online = [x for x in self.dirs if not self.log_dirs[x].offline] or self.dirs
        # the dir with fewest partitions; counting them is a walk over every partition, so
        # only when there is a choice (a create's cost grew with the partition count)
        d = online[0] if len(online) == 1 else min(online, key=self._count_in)
        preferred = self.preferred_dirs.pop(key, None)
        if preferred in online:
            d = preferred
        path = os.path.join(d, f"{topic}-{partition}")
        lg = Log(path, topic, partition, config, log_dir=self.log_dirs[d])
        write_partition_metadata(path, topic_id)
        self.logs[key] = lg
        self._dir_of[key] = d
        return lg

    def _count_in(self, d: str) -> int:
        return sum(1 for v in self._dir_of.values() if v == d)

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def replace(self, key: tuple[str, int], lg: Log, d: str) -> None:
        """A moved replica's log, now in dir `d` (log/dir_move.py)."""
        self.logs[key] = lg
        self._dir_of[key] = d
        self.moves.pop(key, None)

    def delete(self, topic: str, partition: int) -> None:
        move = self.moves.pop((topic, partition), None)
        if move is not None:
            move.abort()
        lg = self.logs.pop((topic, partition), None)
        self._dir_of.pop((topic, partition), None)
        self.high_watermarks.pop((topic, partition), None)
        if lg is not None:
            lg.delete()

    # -- log dir health ---------------------------------------------------------------------------

    def on_dir_failure(self, fn: Callable[[str], None]) -> None:
        """Call `fn(dir)` once when a data dir goes offline."""
        for ld in self.log_dirs.values():
            ld.on_failure(fn)

    @property
    def offline_dirs(self) -> list[str]:
        return [d for d in self.dirs if self.log_dirs[d].offline]

    def inject_fault(
        self, code: int | None, directory: str | None = None, ops: tuple[str, ...] = (WRITE, FSYNC)
    ) -> None:
        """Make writes/fsyncs in `directory` (every dir when None) fail with errno `code`."""
        chosen = self.dirs if directory is None else [os.path.abspath(directory)]
        for d in chosen:
            if d not in self.log_dirs:
                raise ValueError(f"{d} is not a log dir of this broker ({', '.join(self.dirs)})")
            self.log_dirs[d].inject(code, ops)

    # -- checkpoints and shutdown -----------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the three checkpoint files of every online data dir."""
        for d in self.dirs:
            ld = self.log_dirs[d]
            if ld.offline:
                continue
            try:
                ld.raise_injected(WRITE, FSYNC)
                self._checkpoint_dir(d)
            except OSError as exc:
                ld.fail(exc)

    def checkpoint_high_watermarks(self) -> None:
        """Write only the high-watermark checkpoint of every online data dir (Kafka writes it
        every replica.high.watermark.checkpoint.interval.ms, the other two less often)."""
        for d in self.dirs:
            ld = self.log_dirs[d]
            if ld.offline:
                continue
            keys = [k for k, v in self._dir_of.items() if v == d]
            try:
                ld.raise_injected(WRITE, FSYNC)
                write_checkpoint(
                    os.path.join(d, HIGH_WATERMARK),
                    {k: self.high_watermarks.get(k, 0) for k in keys},
                )
            except OSError as exc:
                ld.fail(exc)

    def _checkpoint_dir(self, d: str) -> None:
        keys = [k for k, v in self._dir_of.items() if v == d]
        write_checkpoint(
            os.path.join(d, RECOVERY_POINT), {k: self.logs[k].recovery_point for k in keys}
        )
        write_checkpoint(
            os.path.join(d, LOG_START), {k: self.logs[k].log_start_offset for k in keys}
        )
        write_checkpoint(
            os.path.join(d, HIGH_WATERMARK), {k: self.high_watermarks.get(k, 0) for k in keys}
        )

    def flush_all(self) -> None:
        for lg in self.logs.values():
            if not lg.offline:
                lg.flush()

    def close(self) -> None:
        """Clean shutdown: close every log, write checkpoints and the clean-shutdown marker.
        Logs of an offline dir (or one failing now) are only let go: the next start recovers
        them. Moves between dirs not yet swapped are dropped."""
        for move in list(self.moves.values()):
            move.abort()
        self.moves.clear()
        for lg in self.logs.values():
            if lg.offline:
                _release(lg)
                continue
            try:
                lg.close()
            except Exception:  # KafkaStorageError: its dir just went offline
                _release(lg)
        self.checkpoint()
        sync_written()  # leader-epoch checkpoints durable before the marker skips recovery
        for d in self.dirs:
            if self.log_dirs[d].offline:
                log.warning("log dir %s is offline: its logs are recovered at the next start", d)
                continue
            try:
                with open(os.path.join(d, CLEAN_SHUTDOWN), "w") as f:
                    f.write("")
            except OSError as exc:
                self.log_dirs[d].fail(exc)
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()

    def abandon(self) -> None:
        """Let go of the data dirs without flushing or marking a clean shutdown (a crash)."""
        for lg in self.logs.values():
            _release(lg)
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()


def _release(lg: Log) -> None:
    """Close a log's files and maps without writing anything."""
    for seg in lg.segments:
        seg.release()
