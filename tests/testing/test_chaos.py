"""The chaos runner over twenty seeds: three in-process brokers, kill -9 / pause / cuts between
brokers / cut clients / full disk (when the brokers offer `fail_disk`) from each seed's
schedule, under an idempotent producer, a transactional producer, two read_committed group
members and a monitor; then the checker of Kafka's guarantees (odradek.testing.chaos.checker).
A failing seed prints its schedule and anomalies: rerun it with
`python -m bench.chaos --seed N`."""

from __future__ import annotations

import pytest

from odradek.testing.chaos import Options, run_seed, supported_kinds

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SEEDS = range(20)
# short seeds: ~2.5 s of faults, bounded operations per client
OPTIONS = Options(duration=2.5, max_fault_s=1.0, max_sends=300, max_txns=40)


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_keeps_kafkas_guarantees(seed: int) -> None:
    result = run_seed(seed, OPTIONS)
    assert result.valid, "\n" + result.explain()
    counts = result.history.counts()
    assert counts["ok"] > 0, "\n" + result.explain()  # the clients did get work done


def test_full_disk_is_in_the_schedule_when_the_brokers_support_it() -> None:
    from odradek.testing.cluster import Cluster

    kinds = supported_kinds()
    assert {"kill", "restart", "pause", "partition", "clients"} <= set(kinds)
    assert ("disk-full" in kinds) == hasattr(Cluster, "fail_disk")
