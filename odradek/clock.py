"""The wall clock in milliseconds, as Kafka's Time.milliseconds(): record timestamps, segment
ages, retention and transaction deadlines. Durations measured within one process use
time.monotonic instead."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch (wall clock)."""
    return int(time.time() * 1000)
