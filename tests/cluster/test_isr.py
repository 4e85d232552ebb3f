"""Leader-side follower tracking: high watermark, caught-up time, ISR shrink and expand."""

from __future__ import annotations

from odradek.broker.replication.isr import UNKNOWN, LeaderTracker


def tracker(isr=(0, 1, 2), start=0, now=0.0) -> LeaderTracker:
    return LeaderTracker(0, [0, 1, 2], list(isr), start, now)


def test_high_watermark_is_the_smallest_log_end_over_the_isr() -> None:
    t = tracker()
    assert t.high_watermark([0, 1, 2], 10) == UNKNOWN  # followers not heard from yet
    t.on_fetch(1, 7, 10, 1.0)
    t.on_fetch(2, 4, 10, 1.0)
    assert t.high_watermark([0, 1, 2], 10) == 4
    assert t.high_watermark([0, 1], 10) == 7
    assert t.high_watermark([0], 10) == 10


def test_unknown_replica_fetches_are_ignored() -> None:
    assert tracker().on_fetch(7, 0, 0, 0.0) is None


def test_fetch_at_the_log_end_is_caught_up_now() -> None:
    t = tracker(now=0.0)
    t.on_fetch(1, 10, 10, 500.0)
    assert t.followers[1].last_caught_up_ms == 500.0
    assert t.out_of_sync([0, 1], 10, 1400.0, 1000) == []
    assert t.out_of_sync([0, 1], 12, 1600.0, 1000) == [1]


def test_reaching_the_previous_fetch_end_counts_from_the_previous_fetch() -> None:
    t = tracker(now=0.0)
    t.on_fetch(1, 5, 10, 100.0)  # behind: not caught up
    assert t.followers[1].last_caught_up_ms == 0.0
    t.on_fetch(1, 10, 20, 900.0)  # reached what the leader had at the previous fetch
    assert t.followers[1].last_caught_up_ms == 100.0


def test_a_follower_at_the_leader_end_never_lags() -> None:
    t = tracker(now=0.0)
    t.on_fetch(1, 10, 10, 0.0)
    assert t.out_of_sync([0, 1], 10, 10_000.0, 1000) == []


def test_isr_members_get_a_grace_period_others_do_not() -> None:
    t = tracker(isr=(0, 1), now=5000.0)
    assert t.out_of_sync([0, 1, 2], 3, 5500.0, 1000) == [2]


def test_joining_needs_the_high_watermark_and_the_epoch_start() -> None:
    t = tracker(isr=(0, 1), start=8)
    t.on_fetch(2, 6, 10, 0.0)
    assert not t.can_join(2, [0, 1], 5)  # below the leader epoch's start offset
    t.on_fetch(2, 9, 10, 0.0)
    assert t.can_join(2, [0, 1], 9)
    assert not t.can_join(2, [0, 1], 10)
    assert not t.can_join(1, [0, 1], 0)  # already in
