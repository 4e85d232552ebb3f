"""The nemesis over five brokers (`bench.jepsen --brokers 5`): a majority/minority split cuts a
minority of the brokers (two of five, one of three) and one ZooKeeper node from the rest, and
three brokers' splits are drawn as before (a failing seed of an older soak still reproduces)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from odradek.testing.jepsen.hosts import CLIENT, ZK
from odradek.testing.jepsen.nemesis import Fault, Nemesis


class _Net:
    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        self.cuts: list[tuple[set[str], set[str]]] = []

    def isolate(self, a: set[str], b: set[str]) -> None:
        self.cuts.append((set(a), set(b)))


class _Cluster:
    def __init__(self, brokers: int, zookeeper: tuple[str, ...] = ZK) -> None:
        self.brokers = [f"b{i}" for i in range(brokers)]
        self.zookeeper = zookeeper
        self.unsupported: dict[str, str] = {}
        self.net = _Net([*zookeeper, *self.brokers, CLIENT])


def _split(brokers: int, pick: int, zookeeper: tuple[str, ...] = ZK) -> tuple[set[str], set[str]]:
    c: Any = _Cluster(brokers, zookeeper)
    Nemesis(c, "t", 4, {}).begin(Fault(0.0, "majority-minority", pick, 1.0))
    [cut] = c.net.cuts
    return cut


@pytest.mark.parametrize("brokers", [3, 5])
def test_majority_minority_cuts_a_minority_of_brokers_and_of_zookeeper(brokers: int) -> None:
    minorities = set()
    for pick in range(40):
        minority, rest = _split(brokers, pick)
        assert len(minority & set(ZK)) == 1
        assert len([h for h in minority if h.startswith("b")]) == (brokers - 1) // 2
        assert rest == set(_Cluster(brokers).net.hosts) - minority
        minorities.add(frozenset(minority))
    assert len(minorities) > 5  # the seed's draw decides which


def test_three_brokers_draw_as_before() -> None:
    for pick in range(40):
        rng = random.Random(pick)
        b = rng.choice([f"b{i}" for i in range(3)])
        assert _split(3, pick)[0] == {b, rng.choice(ZK)}


def test_kraft_nodes_split_as_brokers_alone() -> None:
    """KRaft combined nodes (Kafka on hosts) have no quorum hosts of their own: the minority is
    the drawn broker alone, the same broker as on odradek's hosts for the same draw."""
    for pick in range(40):
        minority, rest = _split(3, pick, zookeeper=())
        assert minority == {random.Random(pick).choice([f"b{i}" for i in range(3)])}
        assert rest == {"b0", "b1", "b2", CLIENT} - minority
