"""The `uniform` assignor with mixed subscriptions (members subscribed to different topics), shape
by shape against the counts Kafka 4.x's UniformHeterogeneousAssignmentBuilder gives: existing
assignments kept, the free partitions handed out topic by topic (most partitions per subscriber
first) to the least loaded subscriber, then partitions moved within each topic's subscribers
until their totals differ by at most one."""

from __future__ import annotations

import uuid

from odradek.coordinator.group.assignors import Assignment, MemberSpec, uniform_assign

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
C = uuid.UUID(int=3)


def _counts(out: dict[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in out.items()}


def _check_valid(
    members: dict[str, MemberSpec], parts: dict[uuid.UUID, int], out: dict[str, Assignment]
) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for m, assignment in out.items():
        for t, ps in assignment.items():
            assert t in members[m].subscribed, (m, t)
            for p in ps:
                assert (t, p) not in seen and 0 <= p < parts[t]
                seen.add((t, p))
    subscribed = {t for s in members.values() for t in s.subscribed}
    assert seen == {(t, p) for t in subscribed for p in range(parts[t])}


def test_a_topic_with_one_subscriber_is_placed_first() -> None:
    # B has 4 partitions per subscriber, A 2: Kafka assigns B first, so m1 gets all of A (4/4);
    # A first would give m1 2 and m2 6
    members = {"m1": MemberSpec({A}), "m2": MemberSpec({A, B})}
    parts = {A: 4, B: 4}
    out = uniform_assign(members, parts)
    _check_valid(members, parts, out)
    assert _counts(out) == {"m1": 4, "m2": 4}


def test_nested_subscriptions_end_level() -> None:
    # C (m3 only) first, then B (m2, m3: m2 is least loaded), then A (m1): 3/3/3
    members = {"m1": MemberSpec({A}), "m2": MemberSpec({A, B}), "m3": MemberSpec({A, B, C})}
    parts = {A: 3, B: 3, C: 3}
    out = uniform_assign(members, parts)
    _check_valid(members, parts, out)
    assert _counts(out) == {"m1": 3, "m2": 3, "m3": 3}


def test_an_unbalanced_previous_assignment_is_rebalanced_keeping_what_it_can() -> None:
    # m2 owned everything while m1 was away; m1 is back on A: two of A move to m1, B stays
    previous: Assignment = {A: {0, 1, 2, 3}, B: {0, 1, 2, 3}}
    members = {"m1": MemberSpec({A}), "m2": MemberSpec({A, B}, previous)}
    parts = {A: 4, B: 4}
    out = uniform_assign(members, parts)
    _check_valid(members, parts, out)
    assert _counts(out) == {"m1": 4, "m2": 4}
    assert out["m2"][B] == {0, 1, 2, 3}


def test_a_member_leaving_hands_its_partitions_to_the_least_loaded() -> None:
    # m1, m2 on A (6); m3 on A and B (2): the totals end within one of each other, and
    # what each kept stays with it
    first = uniform_assign(
        {"m1": MemberSpec({A}), "m2": MemberSpec({A}), "m3": MemberSpec({A, B})}, {A: 6, B: 2}
    )
    assert sorted(_counts(first).values()) == [2, 3, 3]
    members = {"m1": MemberSpec({A}, first["m1"]), "m3": MemberSpec({A, B}, first["m3"])}
    parts = {A: 6, B: 2}
    out = uniform_assign(members, parts)
    _check_valid(members, parts, out)
    assert sorted(_counts(out).values()) == [4, 4]
    for m in members:
        for t, ps in first[m].items():
            assert ps <= out[m].get(t, set())  # nobody lost a partition it had


def test_disjoint_subscriptions_each_topic_to_its_own_subscribers() -> None:
    members = {"m1": MemberSpec({A}), "m2": MemberSpec({A}), "m3": MemberSpec({B})}
    parts = {A: 5, B: 1}
    out = uniform_assign(members, parts)
    _check_valid(members, parts, out)
    assert _counts(out) == {"m1": 3, "m2": 2, "m3": 1}


def test_a_topic_without_partitions_is_ignored() -> None:
    members = {"m1": MemberSpec({A, B}), "m2": MemberSpec({A})}
    out = uniform_assign(members, {A: 3, B: 0})
    assert sorted(_counts(out).values()) == [1, 2]
