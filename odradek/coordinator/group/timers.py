"""Keyed one-shot timers: Kafka's delayed-operation purgatories, reduced to what groups need.

The group state machine schedules a session expiry per member, a join completion per group
(rebalance timeout, or the initial rebalance delay) and a sync expiry per group. Scheduling a key
that is already scheduled replaces it, as completing a DelayedHeartbeat and watching a new one
does in Kafka. `AsyncioScheduler` runs them on the event loop; `ManualScheduler` runs them when a
test advances its clock, so the state machine is tested without sockets or sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable
from typing import Protocol

from odradek.clock import now_ms

log = logging.getLogger(__name__)


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def pending(self, key: Hashable) -> bool: ...


def _run(key: Hashable, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:
        log.exception("group coordinator timer %r failed", key)


class AsyncioScheduler:
    """Timers on the running event loop (loop.call_later, monotonic); `now_ms` is the wall
    clock (odradek.clock) that group state and offset commit timestamps take."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def now_ms(self) -> int:
        return now_ms()

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        self.cancel(key)
        loop = self._loop or asyncio.get_running_loop()

        def fire() -> None:
            if self._handles.get(key) is handle:
                del self._handles[key]
            _run(key, fn)

        handle = loop.call_later(max(delay_ms, 0) / 1000, fire)
        self._handles[key] = handle

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def pending(self, key: Hashable) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def __len__(self) -> int:
        return len(self._handles)


class ManualScheduler:
    """A fake clock for tests: timers fire, in deadline order, inside `advance(ms)`."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        seq = next(self._seq)
        self._live[key] = (seq, fn)
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), seq, key))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def pending(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        if entry is None:
            return None
        for when, seq, k in self._heap:
            if k == key and seq == entry[0]:
                return when
        return None

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms`, firing every timer that falls due on the way."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            when, seq, key = heapq.heappop(self._heap)
            entry = self._live.get(key)
            if entry is None or entry[0] != seq:
                continue
            del self._live[key]
            self._now = max(self._now, when)
            _run(key, entry[1])
        self._now = target
