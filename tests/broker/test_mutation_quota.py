"""Controller mutation quota (KIP-599): Kafka's token bucket, strict and permissive."""

from __future__ import annotations

from odradek.broker.network.mutation_quota import MutationQuotas


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_strict_quota_accepts_while_not_negative_then_throttles() -> None:
    clock = Clock()
    quotas = MutationQuotas(rate=2.0, window_num=2, window_size_s=1.0, clock=clock)  # burst 4
    q = quotas.quota_for(None, "c", strict=True)
    assert q.record(3) == 0  # 4 -> 1
    assert q.record(10) == 0  # 1 -> -9: accepted, the bucket may overshoot once
    assert q.record(1) == 4500  # -9 / 2 per s -> 4.5 s to get back to zero
    assert q.throttle_time_ms == 4500
    clock.now += 1.0
    assert q.throttle_time_ms == 3500  # the throttle time counts down from when it was measured
    again = quotas.quota_for(None, "c", strict=True)
    assert again.record(1) == 3500  # -9 + 2 = -7: still throttled
    clock.now += 3.5
    assert quotas.quota_for(None, "c", strict=True).record(1) == 0  # back at zero: accepted


def test_permissive_quota_accepts_and_reports_throttle_time() -> None:
    clock = Clock()
    quotas = MutationQuotas(rate=1.0, window_num=1, window_size_s=1.0, clock=clock)  # burst 1
    q = quotas.quota_for(None, "old-client", strict=False)
    assert q.record(5) == 0
    assert q.record(5) == 0
    assert q.throttle_time_ms == 9000  # 1 - 10 = -9 tokens at 1/s


def test_buckets_are_per_client_id_and_unlimited_by_default() -> None:
    clock = Clock()
    quotas = MutationQuotas(rate=1.0, window_num=1, window_size_s=1.0, clock=clock)
    assert quotas.quota_for(None, "a", strict=True).record(5) == 0
    assert quotas.quota_for(None, "a", strict=True).record(1) > 0
    assert quotas.quota_for(None, "b", strict=True).record(1) == 0
    unlimited = MutationQuotas(rate=None).quota_for(None, "a", strict=True)
    assert not unlimited.enabled
    assert all(unlimited.record(1_000_000) == 0 for _ in range(3))
    assert unlimited.throttle_time_ms == 0


def test_the_burst_caps_refill() -> None:
    clock = Clock()
    quotas = MutationQuotas(rate=1.0, window_num=3, window_size_s=1.0, clock=clock)  # burst 3
    q = quotas.quota_for(None, "c", strict=True)
    clock.now += 3600  # an hour idle refills to the burst, not beyond
    assert q.record(3) == 0
    assert q.record(1) == 0  # 0 -> -1
    assert q.record(1) == 1000
