"""FutureReplica (log/dir_move.py) at the log level: a copy that follows the current log through
a truncation (a follower's diverged tail after a leader change) ends up equal to it."""

from __future__ import annotations

import asyncio
import os
import uuid

from odradek.log.dir_move import FutureReplica
from odradek.log.log import Log
from odradek.log.manager import LogManager
from tests.log.test_log import append, batch, read_all, small


def _keys(lg: Log) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.key) for _h, recs in lg.records() for r in recs]


def test_future_follows_a_truncated_source_and_swaps_in(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    logs = LogManager([a, b])
    src = logs.get_or_create("t", 0, uuid.uuid4(), small())
    dest = b if logs.dir_of("t", 0) == a else a
    for _ in range(10):
        append(src, batch(3), epoch=1)
    move = FutureReplica(logs, "t", 0, dest)
    move._copy(None)
    assert move.future.log_end_offset == 30 and move.offset_lag == 0
    src.truncate_to(21)  # the tail diverged: a new leader with epoch 2 wrote other records
    for _ in range(5):
        append(src, batch(3, key=b"new"), epoch=2)
    swapped: list[Log] = []
    asyncio.run(move.run(swapped.append))
    [new] = swapped
    assert logs.logs[("t", 0)] is new and logs.dir_of("t", 0) == dest
    assert new.dir == os.path.join(dest, "t-0")
    assert read_all(new) == read_all(src)
    assert _keys(new) == _keys(src) and _keys(new)[21] == (21, b"new")
    assert new.log_end_offset == 36
    logs.close()
