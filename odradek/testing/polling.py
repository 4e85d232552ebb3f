"""Reading records with a kafka-python consumer until a bounded deadline, each `poll()` waiting
for all the time left.

A group member (subscribe, or topics given to KafkaConsumer, with a group_id) joins through
JoinGroup/SyncGroup inside `poll()`. kafka-python 3.0.12 loses a round that a `poll()` ends in the
middle of: a round finishing between two polls is discarded and another started (the leader's
JoinGroup rebalances the group again), and a leader's rejoin for a metadata change (the topic's
partitions learnt after the first join) is not awaited by the next poll once the leader has
assigned, so its SyncGroup assignment is never applied (docs/notes.md). Short polls in a loop
(100-500 ms) on a loaded machine, where a round takes longer, kept a group from ever reading;
one poll for the time left sees each round through, and returns as soon as it has records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Batches(Protocol[R_co]):
    """What a poll returns: records by partition (only the records are read)."""

    def values(self) -> Iterable[Sequence[R_co]]: ...


class Polling(Protocol[R_co]):
    """What `poll_until` needs of a consumer: kafka-python's `KafkaConsumer.poll`."""

    def poll(self, timeout_ms: int = ..., max_records: int | None = ...) -> Batches[R_co]: ...


def poll_until(
    consumer: Polling[R],
    done: Callable[[list[R]], bool],
    timeout_s: float,
    *,
    max_records: int | None = None,
) -> list[R]:
    """The records polled, in the order they came, once `done(records)` holds or `timeout_s`
    has passed (the caller asserts on what came). Each poll waits for the whole time left;
    with `max_records`, never more than that many in all (each poll asks for the rest), so a
    member that commits afterwards commits exactly what it read."""
    got: list[R] = []
    deadline = time.monotonic() + timeout_s
    while not done(got):
        left_ms = int((deadline - time.monotonic()) * 1000)
        rest = None if max_records is None else max_records - len(got)
        if left_ms <= 0 or (rest is not None and rest <= 0):
            break
        for records in consumer.poll(timeout_ms=left_ms, max_records=rest).values():
            got.extend(records)
    return got
