"""The log under a jumping wall clock (odradek.clock's offset, what the Jepsen clock nemesis
shifts), with Kafka's semantics: LogAppendTime stamps follow the broker's clock; segment.ms
compares record timestamps; retention.ms compares each segment's largest timestamp with the
clock, so a jump by less than retention.ms deletes nothing; and retention never deletes what
the high watermark has not passed (UnifiedLog.deleteOldSegments)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from odradek import clock
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch

HOUR = 3600 * 1000


@pytest.fixture(autouse=True)
def system_clock() -> Iterator[None]:
    yield
    clock.set_offset_ms(0)


def config(**kw: int) -> LogConfig:
    return LogConfig(segment_bytes=kw.pop("segment_bytes", 1 << 20), **kw)


def append(lg: Log, n: int = 2, ts: int | None = None, log_append_time: bool = False) -> int:
    t = int(time.time() * 1000) if ts is None else ts
    data = bytearray(build_batch([(b"k", b"v%d" % i, [], t) for i in range(n)]))
    return lg.append_as_leader(data, list(iter_batches(data)), 0, log_append_time).first_offset


def stamps(lg: Log) -> list[int]:
    """Each segment's largest timestamp, oldest segment first."""
    return [seg.max_timestamp for seg in lg.segments]


def test_log_append_time_follows_the_clock_back_without_rolling_or_deleting(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, config(segment_ms=HOUR, retention_ms=2 * HOUR))
    append(lg, log_append_time=True)
    first = lg.segments[0].max_timestamp
    clock.set_offset_ms(-3 * HOUR)  # back by more than segment.ms and retention.ms
    append(lg, log_append_time=True)
    assert lg.apply_retention(clock.now_ms()) == 0
    clock.set_offset_ms(0)
    append(lg, log_append_time=True)
    assert lg.apply_retention(clock.now_ms()) == 0
    # one segment: stamped 3 h earlier, the second batch is no reason to roll (its timestamp
    # minus the first one's is negative), and the largest timestamp is still the first's
    assert len(lg.segments) == 1 and lg.log_start_offset == 0 and lg.log_end_offset == 6
    assert first <= stamps(lg)[0] <= clock.now_ms()


def test_a_jump_forward_below_retention_deletes_nothing_and_rolls_as_kafka(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, config(segment_ms=HOUR, retention_ms=6 * HOUR))
    append(lg, log_append_time=True)
    clock.set_offset_ms(2 * HOUR)
    append(lg, log_append_time=True)  # 2 h past the first stamp: segment.ms rolls
    assert lg.apply_retention(clock.now_ms()) == 0
    clock.set_offset_ms(0)
    append(lg, log_append_time=True)
    assert lg.apply_retention(clock.now_ms()) == 0
    assert [seg.base_offset for seg in lg.segments] == [0, 2]
    assert lg.log_start_offset == 0 and lg.log_end_offset == 6


def test_a_jump_past_retention_deletes_only_below_the_high_watermark(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, config(segment_ms=HOUR, retention_ms=HOUR))
    for _ in range(3):
        append(lg)
        lg.roll()
    append(lg)  # segments at 0, 2, 4 and the active one at 6
    clock.set_offset_ms(2 * HOUR)
    # a follower (or a leader whose followers lag) has a high watermark of 3: the segment at
    # 2 holds offset 3, which is not below it; Kafka keeps it and everything after
    assert lg.apply_retention(clock.now_ms(), high_watermark=3) == 1
    assert lg.log_start_offset == 2 and lg.log_end_offset == 8
    # with the high watermark at the end everything old goes, the active segment rolled first
    assert lg.apply_retention(clock.now_ms(), high_watermark=8) == 3
    assert lg.log_start_offset == 8 == lg.log_end_offset
