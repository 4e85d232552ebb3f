"""The broker's wall clock in milliseconds, as Kafka's Time.milliseconds(): record timestamps
(LogAppendTime), segment ages, retention, flush.ms, transaction and transactional-id deadlines,
offset commit and expiry times, group state timestamps. Durations measured within one process
(timeouts, the event loop's timers, replica lag, sessions) use time.monotonic instead, as Kafka's
use hiResClockMs.

The clock can be shifted for fault injection (`set_offset_ms`, the admin endpoint's
`POST /clock`): one offset for the whole process, as a jump of the machine's clock would be,
which is what Jepsen's clock nemesis does to one node. Monotonic time is never shifted.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

_offset_ms = 0


def now_ms() -> int:
    """Milliseconds since the epoch (wall clock, plus the injected offset)."""
    return int(time.time() * 1000) + _offset_ms


def offset_ms() -> int:
    """How far this process's wall clock is shifted from the system clock, in ms."""
    return _offset_ms


def set_offset_ms(ms: int) -> None:
    """Shift this process's wall clock to system time + `ms` (0: back to the system clock)."""
    global _offset_ms
    if ms != _offset_ms:
        log.warning(
            "wall clock jumps by %+d ms: offset %+d ms from the system clock", ms - _offset_ms, ms
        )
    _offset_ms = ms
