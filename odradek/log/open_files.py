"""Bounded open segment files: an LRU of the segments holding a descriptor or index bytes.

A broker with 10,000 partitions cannot keep every `.log` open: the process has RLIMIT_NOFILE
descriptors, and connections need theirs too. So, as Kafka opens its indexes lazily, a segment
opens its `.log` and reads its indexes on first use (segment.py; indexes hold no descriptor,
index_file.py) and registers here; past `limit` segments the least recently used one lets go of
its descriptor and index bytes, and takes them again when next read or written.

Letting go drops the segment's reference only. The file object closes when its last holder is
gone: a `FileRegion` handed to a connection holds the file, so a region being sent with sendfile
keeps its descriptor valid whatever the LRU does, and a reader in another thread (the cleaner)
that holds the file object in a local variable is never cut off mid-read. Open files
are thus bounded by `limit` plus the regions and reads in flight.

One cache per process, because the descriptor limit is per process (several in-process brokers
share it). `limit_for(soft)` derives the default from RLIMIT_NOFILE; `raise_nofile()` lifts the
soft limit to the hard one (the broker does both at start, server.py).
"""

from __future__ import annotations

import io
import logging
import resource
import threading
from collections import OrderedDict
from typing import Protocol

log = logging.getLogger(__name__)

# descriptors kept for everything else (listeners, connections, checkpoints, ZooKeeper, ...)
RESERVED_FDS = 256
MIN_LIMIT = 16
MAX_LIMIT = 8192  # also bounds the index bytes held in memory


class Evictable(Protocol):
    def release_handles(self) -> None: ...


class SegmentFile(io.FileIO):
    """A segment's `.log`, closed quietly when its last holder lets go of it (no
    ResourceWarning: dropping it is how the LRU closes a file a region may still hold)."""

    def __del__(self) -> None:
        if not self.closed:
            self.close()


FDS_PER_SEGMENT = 1  # its .log: indexes hold no descriptor (index_file.py)


def _room(soft_nofile: int) -> int:
    """Segments the descriptor limit leaves room for: what is left after RESERVED_FDS, shared
    with as many connections (hence / 2), FDS_PER_SEGMENT each."""
    return (soft_nofile - RESERVED_FDS) // (2 * FDS_PER_SEGMENT)


def limit_for(soft_nofile: int) -> int:
    """How many segments may hold files at once under a soft RLIMIT_NOFILE of `soft_nofile`
    (`_room`), within [MIN_LIMIT, MAX_LIMIT]."""
    if soft_nofile == resource.RLIM_INFINITY or soft_nofile < 0:
        return MAX_LIMIT
    return max(MIN_LIMIT, min(MAX_LIMIT, _room(soft_nofile)))


def nofile() -> tuple[int, int]:
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def raise_nofile() -> tuple[int, int]:
    """Lift the soft RLIMIT_NOFILE to the hard limit where allowed; returns (soft, hard)."""
    soft, hard = nofile()
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # e.g. a hard limit above the kernel's nr_open
            log.debug("cannot raise the open-files limit from %d to %d: %s", soft, hard, exc)
    return soft, hard


class OpenSegments:
    """The LRU: segments in the order they were last used, at most `limit` of them."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._lru: OrderedDict[int, Evictable] = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0  # segments that let go of their files (tests, bench)
        self.warned = False
        self._newest = 0  # id of the segment touched last (a hint only)

    def __len__(self) -> int:
        return len(self._lru)

    def set_limit(self, limit: int) -> None:
        with self._lock:
            self.limit = max(1, limit)
        self._shrink()

    def opened(self, seg: Evictable) -> None:
        """`seg` now holds a descriptor or index bytes: count it, let go of the oldest past the
        limit."""
        with self._lock:
            self._lru[id(seg)] = seg
            self._lru.move_to_end(id(seg))
            self._newest = id(seg)
        self._shrink()

    def touch(self, seg: Evictable) -> None:
        """`seg` is used: the last to be let go. (move_to_end is atomic under the GIL; a
        segment let go meanwhile simply is not there.) The most recent one is left where it
        is: a hot partition's appends and reads pay one comparison."""
        key = id(seg)
        if key == self._newest:
            return
        self._newest = key
        try:
            self._lru.move_to_end(key)
        except KeyError:
            pass

    def forget(self, seg: Evictable) -> None:
        """`seg` closed its files itself (close, delete)."""
        with self._lock:
            self._lru.pop(id(seg), None)

    def _shrink(self) -> None:
        while True:
            with self._lock:
                if len(self._lru) <= self.limit:
                    return
                _key, victim = self._lru.popitem(last=False)
                self.evictions += 1
                first = not self.warned
                self.warned = True
            if first:
                log.info(
                    "%d segments hold open files, the limit (from the open-files limit %d): "
                    "the least recently used now close and reopen when read again",
                    self.limit,
                    nofile()[0],
                )
            victim.release_handles()


CACHE = OpenSegments(limit_for(nofile()[0]))


def at_start() -> int:
    """At broker start: lift the soft RLIMIT_NOFILE to the hard limit where allowed and size the
    LRU from it; returns the limit."""
    raise_nofile()
    return configure()


def check_partitions(partitions: int) -> bool:
    """Say clearly, once at start, when the open-files limit is too low to keep a segment file
    open for each of `partitions` (they then share `CACHE.limit` descriptors, reopening files as
    they are read). Returns False when it is too low."""
    soft, hard = nofile()
    unlimited = soft == resource.RLIM_INFINITY or soft < 0
    if partitions <= CACHE.limit or unlimited or _room(soft) >= partitions:
        return True  # (past MAX_LIMIT the LRU bounds memory, not the descriptor limit)
    want = 2 * FDS_PER_SEGMENT * partitions + RESERVED_FDS
    log.warning(
        "open-files limit %d (hard %d) is too low for %d partitions: at most %d segment files "
        "are kept open, the others are reopened when read (slower). Raise it to at least %d "
        "(ulimit -n, or LimitNOFILE= in a systemd unit)",
        soft,
        hard,
        partitions,
        CACHE.limit,
        want,
    )
    return False


def configure(limit: int | None = None) -> int:
    """Set the process's limit (None: derived from the current soft RLIMIT_NOFILE)."""
    CACHE.set_limit(limit_for(nofile()[0]) if limit is None else limit)
    return CACHE.limit
