"""The request memory pool, as Kafka's `SimpleMemoryPool` bounded by `queued.max.request.bytes`.

Every connection reserves the announced size of a large request frame here before it receives the
frame's body, and gives it back once the request has been answered. When the pool is exhausted a
connection that needs memory stops reading from its socket (Kafka's Selector mutes such channels
while `memoryPool.isOutOfMemory()`) and is woken once memory is released: nothing fails, the
request just waits in the client's and the kernel's buffers.

Like the pool Kafka's SocketServer builds (`strict = false`), a reservation succeeds while any
memory is left, so a single frame larger than what remains (or than the whole pool) still goes
through and the pool may dip below zero by at most one frame per connection. Frames that fit a
connection's 64 KiB scratch buffer do not use the pool: they are bounded by the scratch buffer.

Deviation: Kafka's default is -1 (unbounded); odradek's is 100 MiB so that memory is bounded out of
the box. A capacity <= 0 means unbounded, as in Kafka.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
from collections import deque
from collections.abc import Callable

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20
TRIM_THRESHOLD = 32 << 20


class MemoryPool:
    """Accounting of request-buffer bytes held by all connections together."""

    __slots__ = ("capacity", "_available", "_waiters")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity if capacity > 0 else 0  # 0: unbounded
        self._available = self.capacity
        self._waiters: deque[Callable[[], None]] = deque()

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    @property
    def available(self) -> int:
        return self._available

    @property
    def out_of_memory(self) -> bool:
        return self.bounded and self._available <= 0

    def try_reserve(self, size: int) -> bool:
        """Take `size` bytes if any memory is left (non-strict); False when the pool is out."""
        if not self.bounded:
            return True
        if self._available <= 0:
            return False
        self._available -= size
        return True

    def release(self, size: int) -> None:
        """Give back bytes from `try_reserve`; wakes connections waiting for memory."""
        if not self.bounded or size <= 0:
            return
        self._available += size
        if self._available > 0 and self._waiters:
            loop = asyncio.get_running_loop()
            # each woken connection retries its reservation; one that fails again re-registers
            for _ in range(len(self._waiters)):
                loop.call_soon(self._waiters.popleft())

    def wait(self, callback: Callable[[], None]) -> None:
        """Call `callback` (once, on the event loop) after memory has been released."""
        if callback not in self._waiters:
            self._waiters.append(callback)

    def cancel(self, callback: Callable[[], None]) -> None:
        try:
            self._waiters.remove(callback)
        except ValueError:
            pass


@functools.cache
def tune_allocator() -> bool:
    """Let glibc keep freed request buffers for the next request instead of unmapping them.

    A muted connection frees a request's buffers (the frame, the decoded records) before it reads
    the next request. With glibc's dynamic thresholds a 1 MB produce request then hands ~2 MB back
    to the kernel and faults it in again: ~460 page faults per request, a third more broker CPU.
    Fixed thresholds keep frames up to MMAP_THRESHOLD in the heap and up to TRIM_THRESHOLD of
    free heap: bounded, and no faults on the produce path. A no-op where there is no glibc.

    Once per process (the settings are process-wide): finding libc runs `ldconfig -p` in a
    subprocess, ~1.3 ms, which was a third of an in-process test broker's start.
    """
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
