"""Log directory failures, as Kafka's LogDirFailureChannel and KafkaStorageException.

An I/O error (ENOSPC, EIO, ...) while writing or syncing a log takes the whole log directory
offline, as Kafka does: every partition on it answers KAFKA_STORAGE_ERROR (56) from then on and
nothing more is written there until the broker restarts. Listeners are told once per directory
(Kafka's LogDirFailureHandler): the broker decides what that means for leadership.

Tests inject faults per directory: `LogDir.inject(errno.ENOSPC)` makes the next writes (and/or
fsyncs) of logs in that directory fail as a full or broken disk would, and the next checkpoint
written there too (checkpoint files are written and fsync'd, as Kafka's CheckpointFile). An
injected write failure writes half of the data first, as a short write on a filling disk does, so
the roll back to the last complete batch is exercised too.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

WRITE, FSYNC = "write", "fsync"
ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO, "EROFS": errno.EROFS, "EDQUOT": errno.EDQUOT}


class KafkaStorageError(Exception):
    """A read or write on an offline log directory (Kafka's KafkaStorageException)."""

    def __init__(self, directory: str, reason: str) -> None:
        super().__init__(f"log dir {directory} is offline: {reason}")
        self.directory = directory


def errno_for(error: str | int) -> int:
    """An errno from a name ("ENOSPC", "EIO", ...) or a number."""
    if isinstance(error, int):
        return error
    code = ERRNOS.get(error.upper()) or getattr(errno, error.upper(), None)
    if not isinstance(code, int):
        raise ValueError(f"unknown errno {error!r}: use one of {', '.join(ERRNOS)}")
    return code


class LogDir:
    """One data directory's health: online or offline, and the fault a test injected."""

    __slots__ = ("path", "offline", "reason", "write_errno", "fsync_errno", "_listeners")

    def __init__(self, path: str) -> None:
        self.path = path
        self.offline = False
        self.reason = ""
        self.write_errno: int | None = None
        self.fsync_errno: int | None = None
        self._listeners: list[Callable[[str], None]] = []

    # -- fault injection (tests) ------------------------------------------------------------

    def inject(self, code: int | None, ops: tuple[str, ...] = (WRITE, FSYNC)) -> None:
        """Fail the chosen operations with `code` from now on (None: stop failing them)."""
        if WRITE in ops:
            self.write_errno = code
        if FSYNC in ops:
            self.fsync_errno = code
        log.info(
            "disk fault on %s: %s on %s",
            self.path,
            "cleared" if code is None else errno.errorcode.get(code, code),
            "/".join(ops),
        )

    def raise_injected(self, *ops: str) -> None:
        """Raise the injected error of the first of `ops` that has one: for writes that do not
        go through a segment (checkpoint files, written and fsync'd before their rename)."""
        for op in ops:
            if (self.write_errno if op == WRITE else self.fsync_errno) is not None:
                raise self.injected_error(op)

    def injected_error(self, op: str) -> OSError:
        code = self.write_errno if op == WRITE else self.fsync_errno
        assert code is not None
        return OSError(code, f"{os.strerror(code)} (injected on {op})", self.path)

    # -- failure ----------------------------------------------------------------------------

    def on_failure(self, fn: Callable[[str], None]) -> None:
        self._listeners.append(fn)

    def fail(self, exc: OSError) -> KafkaStorageError:
        """Take the directory offline (once) and tell the listeners; returns the error for
        the caller to raise."""
        reason = exc.strerror or str(exc)
        if not self.offline:
            self.offline = True
            self.reason = reason
            log.error("I/O error in log dir %s: %s; the log dir is now offline", self.path, reason)
            for fn in self._listeners:
                try:
                    fn(self.path)
                except Exception:
                    log.exception("log dir failure listener failed for %s", self.path)
        return KafkaStorageError(self.path, reason)

    def check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(self.path, self.reason)


def storage_op(fn: Callable[..., T]) -> Callable[..., T]:
    """For methods of objects with a `log_dir: LogDir | None` that write to it: refused with
    KafkaStorageError on an offline dir; an OSError inside takes the dir offline."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> T:
        ld: LogDir | None = self.log_dir
        if ld is None:
            return fn(self, *args, **kwargs)
        ld.check_online()
        try:
            return fn(self, *args, **kwargs)
        except OSError as exc:
            raise ld.fail(exc) from exc

    return wrapper
