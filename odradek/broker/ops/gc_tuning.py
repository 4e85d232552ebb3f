"""Python's garbage collector for a long-running broker process.

A broker with 10,000 partitions or 2,000 connections holds millions of long-lived objects;
every full (generation 2) collection walks all of them: 25-100 ms of a stopped event loop
measured with 2,000 connections and 1,000 groups (`python -m bench.scale`), which every client
then sees as latency. Once the broker has started, `tune()` freezes what start-up made (logs,
indexes, configs, metadata: moved to a permanent generation that collections skip) and raises
the young-generation threshold, so collections are rarer and each walks only what was made
since. Reference counting still frees everything without cycles as before; frozen cycles are
never collected, so only start-up's objects are frozen, once. `odradek serve` calls it; an
in-process test broker (odradek.testing) leaves its host process's collector alone.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000  # allocations between young collections (Python's default: 700)


def tune() -> None:
    gc.collect()  # start-up's garbage goes before the rest is frozen
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
