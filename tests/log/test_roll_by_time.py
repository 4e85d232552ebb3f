"""Time-based segment rolling (segment.ms) counts from the first batch's timestamp to the
incoming batch's, as Kafka's LogSegment.timeWaitedForRoll: old records appended now share a
segment until their own timestamps are segment.ms apart."""

from __future__ import annotations

import time

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch

TS0 = 1_700_000_000_000  # years before the test runs


def append_at(lg: Log, ts: int) -> None:
    data = bytearray(build_batch([(b"k", b"v", [], ts)]))
    lg.append_as_leader(data, list(iter_batches(data)), 0, False)


def config() -> LogConfig:
    return LogConfig(segment_ms=100, index_interval_bytes=64, segment_index_bytes=4096)


def test_old_records_roll_by_their_own_timestamps(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, config())
    for i in range(4):  # 30 ms apart: within segment.ms of the first
        append_at(lg, TS0 + 30 * i)
    assert [s.base_offset for s in lg.segments] == [0]
    append_at(lg, TS0 + 200)  # 200 ms after the first batch's timestamp
    assert [s.base_offset for s in lg.segments] == [0, 4]
    lg.close()


def test_the_first_batch_timestamp_survives_a_restart(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, config())
    append_at(lg, TS0)
    lg.close()
    again = Log(str(tmp_path / "t-0"), "t", 0, config())
    append_at(again, TS0 + 50)
    assert [s.base_offset for s in again.segments] == [0]
    append_at(again, TS0 + 150)
    assert [s.base_offset for s in again.segments] == [0, 2]
    again.close()


def test_current_records_roll_after_segment_ms(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, config())
    now = int(time.time() * 1000)
    append_at(lg, now)
    append_at(lg, now + 101)
    assert [s.base_offset for s in lg.segments] == [0, 1]
    lg.close()
