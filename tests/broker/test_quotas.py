"""Client quotas (quotas.py): Kafka's rate, throttle time, entity precedence and sensor sharing,
and the controller mutation quota taken from the same entities. Pure: a fake clock, no broker."""

from __future__ import annotations

import pytest

from odradek.broker.network.mutation_quota import MutationQuotas
from odradek.broker.network.quotas import (
    FETCH,
    MUTATION,
    PRODUCE,
    ClientQuotas,
    Rate,
    entity,
    user_of,
    validate,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def quotas(configs: dict, clock: Clock | None = None) -> ClientQuotas:
    q = ClientQuotas(11, 1.0, MutationQuotas(None, 11, 1.0, clock or Clock()), clock or Clock())
    q.update(configs)
    return q


def test_rate_spans_at_least_num_minus_one_windows_and_forgets_old_samples() -> None:
    rate = Rate(0.0)
    rate.record(10_000, 0.0, 11, 1000)
    assert rate.measure(0.0, 11, 1000) == (1000.0, 10_000)  # 10,000 bytes over 10 s
    rate.record(5_000, 12_500, 11, 1000)  # the first sample is now older than 11 windows
    value, span = rate.measure(12_500, 11, 1000)
    assert span == 10_000 and value == 500.0


def test_throttle_time_is_the_time_back_to_the_quota_as_kafka_computes_it() -> None:
    clock = Clock()
    q = quotas({entity(client_id="app"): {PRODUCE: 1000.0}}, clock)
    assert q.produce.record("ANONYMOUS", "app", 5_000) == 0  # 500 B/s over 10 s: within
    # 25,000 bytes over the 10 s span: 2,500 B/s, 1.5 x over: (2500-1000)/1000 x 10 s
    assert q.produce.record("ANONYMOUS", "app", 20_000) == 15_000
    assert q.produce.throttled == 1 and q.produce.throttle_ms_total == 15_000
    q.produce.unrecord("ANONYMOUS", "app", 20_000)
    assert q.produce.record("ANONYMOUS", "app", 0) == 0


def test_unlimited_without_an_entity_and_enabled_flags() -> None:
    q = quotas({entity(client_id="app"): {PRODUCE: 1.0}})
    assert q.produce.enabled and not q.fetch.enabled and not q.request.enabled
    assert q.produce.record("ANONYMOUS", "other", 10**9) == 0
    assert q.fetch.max_value_in_window("ANONYMOUS", "app") is None
    q.update({})
    assert not q.produce.enabled
    assert q.produce.record("ANONYMOUS", "app", 10**9) == 0


PRECEDENCE = [
    (entity(user="alice", client_id="app"), 1.0),
    (entity(user="alice", client_id=None), 2.0),
    (entity(user="alice"), 3.0),
    (entity(user=None, client_id="app"), 4.0),
    (entity(user=None, client_id=None), 5.0),
    (entity(user=None), 6.0),
    (entity(client_id="app"), 7.0),
    (entity(client_id=None), 8.0),
]


@pytest.mark.parametrize("level", range(len(PRECEDENCE)))
def test_precedence_is_kafkas_from_user_and_client_to_default_client(level: int) -> None:
    configs = {ent: {PRODUCE: value} for ent, value in PRECEDENCE[level:]}
    q = quotas(configs)
    found = q.find(PRODUCE, "alice", "app")
    assert found is not None and found[1] == PRECEDENCE[level][1]


def test_sensor_sharing_follows_the_level_that_matched() -> None:
    q = quotas({entity(user="alice"): {PRODUCE: 100.0}, entity(client_id=None): {PRODUCE: 50.0}})
    # a user quota is shared by all that user's client-ids
    assert q.find(PRODUCE, "alice", "a") == (("alice", ""), 100.0)
    assert q.find(PRODUCE, "alice", "b") == (("alice", ""), 100.0)
    # the default client-id quota gives each client-id its own sensor
    assert q.find(PRODUCE, "bob", "a") == (("", "a"), 50.0)
    assert q.find(PRODUCE, "bob", "b") == (("", "b"), 50.0)
    assert q.produce.record("alice", "a", 1500) > 0  # 150 B/s > 100
    assert q.produce.record("alice", "b", 1) > 0  # shares alice's sensor
    assert q.produce.record("bob", "a", 400) == 0  # its own 50 B/s
    assert q.produce.record("bob", "b", 400) == 0


def test_fetch_window_cap_is_quota_times_num_minus_one_windows() -> None:
    q = quotas({entity(client_id="c"): {FETCH: 1000.0}})
    assert q.fetch.max_value_in_window("ANONYMOUS", "c") == 10_000


def test_controller_mutation_rate_comes_from_the_entities() -> None:
    clock = Clock()
    q = quotas({entity(client_id="admin"): {MUTATION: 1.0}}, clock)
    m = q.mutation.quota_for("ANONYMOUS", "admin", strict=True)
    assert m.enabled and m.record(12) == 0  # burst 11 x 1 s x 1/s: one burst may overshoot
    assert q.mutation.quota_for("ANONYMOUS", "admin", strict=True).record(1) > 0
    assert not q.mutation.quota_for("ANONYMOUS", "other", strict=True).enabled
    q.update({entity(client_id="admin"): {MUTATION: 100.0}})  # raised: refills at the new rate
    clock.now += 1
    assert q.mutation.quota_for("ANONYMOUS", "admin", strict=True).record(1) == 0


def test_validation_and_user_names() -> None:
    assert user_of("User:alice") == "alice" and user_of("User:ANONYMOUS") == "ANONYMOUS"
    parts = [("client-id", "a")]
    assert validate(parts, PRODUCE, 1024.0) is None
    assert "whole number" in (validate(parts, PRODUCE, 1.5) or "")
    assert "positive" in (validate(parts, "request_percentage", 0.0) or "")
    assert "Invalid configuration key" in (validate(parts, "producer_bytes", 1.0) or "")
