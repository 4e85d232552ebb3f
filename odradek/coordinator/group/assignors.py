"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`, as Kafka's
UniformAssignor and RangeAssignor (group-coordinator's `assignor` package) decide.

An assignor sees every member's subscribed topic ids and its current target assignment, and the
partition count of each subscribed topic; it returns the new target assignment of every member.
Both are sticky: a member keeps what it had when that stays within its share.

- `uniform` balances the total count: every member gets floor(P/N) or one more partition of the
  topics it subscribes to (homogeneous subscriptions); with heterogeneous subscriptions members
  keep what they had, free partitions go to the least loaded subscriber (topics with the most
  partitions per subscriber first), then each topic's subscribers are levelled to within one
  partition of each other in total (Kafka's UniformHeterogeneousAssignmentBuilder).
- `range` balances each topic on its own: the subscribers of a topic, in member id order, get
  floor(P/N) partitions, the first P mod N one more; a new group gets consecutive ranges (so
  co-partitioned topics land on the same member), and later a member keeps its previous
  partitions of a topic while it is under its quota, the rest filled in partition order.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, set[int]]

UNIFORM = "uniform"
RANGE = "range"
MAX_BALANCE_ROUNDS = 16  # Kafka's MAX_ITERATION_COUNT: overlapping subscriptions converge slowly
# Kafka's class names, which group.consumer.assignors also accepts
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


def assignor_name(configured: str) -> str:
    """`group.consumer.assignors` entries: a short name or Kafka's class name."""
    name = configured.strip()
    return _CLASS_NAMES.get(name, name)


@dataclass(slots=True)
class MemberSpec:
    subscribed: set[uuid.UUID]
    current: Assignment = field(default_factory=dict)


def assign(
    name: str, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    if name == RANGE:
        return range_assign(members, partitions)
    return uniform_assign(members, partitions)


def _valid_current(
    spec: MemberSpec, partitions: Mapping[uuid.UUID, int]
) -> list[tuple[uuid.UUID, int]]:
    out: list[tuple[uuid.UUID, int]] = []
    for tid, parts in spec.current.items():
        if tid in spec.subscribed and tid in partitions:
            out.extend((tid, p) for p in sorted(parts) if p < partitions[tid])
    return out


def uniform_assign(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in members}
    if not members:
        return out
    subscriptions = {frozenset(s.subscribed) for s in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partitions, out)
    return _uniform_heterogeneous(members, partitions, out)


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec],
    partitions: Mapping[uuid.UUID, int],
    out: dict[str, Assignment],
) -> dict[str, Assignment]:
    topics = sorted(
        (t for t in next(iter(members.values())).subscribed if t in partitions), key=str
    )
    all_parts = [(t, p) for t in topics for p in range(partitions[t])]
    n = len(members)
    base, extra = divmod(len(all_parts), n)
    kept = {m: _valid_current(s, partitions) for m, s in members.items()}
    # the members keeping most get the extra partition first (fewest moves), then by id
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    taken: set[tuple[uuid.UUID, int]] = set()
    counts = dict.fromkeys(members, 0)
    for m in order:
        for tp in kept[m]:
            if counts[m] >= quota[m]:
                break
            if tp not in taken:
                taken.add(tp)
                out[m].setdefault(tp[0], set()).add(tp[1])
                counts[m] += 1
    free = [tp for tp in all_parts if tp not in taken]
    free.reverse()
    for m in order:
        while counts[m] < quota[m] and free:
            t, p = free.pop()
            out[m].setdefault(t, set()).add(p)
            counts[m] += 1
    return out


def _uniform_heterogeneous(
    members: Mapping[str, MemberSpec],
    partitions: Mapping[uuid.UUID, int],
    out: dict[str, Assignment],
) -> dict[str, Assignment]:
    """Kafka's UniformHeterogeneousAssignmentBuilder: keep each member's current partitions of
    the topics it still subscribes to; hand out the free ones topic by topic (most partitions
    per subscriber first) to the subscriber with the fewest partitions in total; then, topic by
    topic, move partitions from a topic's most loaded subscriber to its least loaded one until
    their totals differ by at most one (at most MAX_BALANCE_ROUNDS passes)."""
    ids = sorted(members)
    rank = {m: i for i, m in enumerate(ids)}
    subscribers = {
        t: [m for m in ids if t in members[m].subscribed]
        for t in partitions
        if any(t in members[m].subscribed for m in ids)
    }
    sizes = dict.fromkeys(ids, 0)
    owned: dict[uuid.UUID, dict[str, set[int]]] = {t: {} for t in subscribers}
    taken: set[tuple[uuid.UUID, int]] = set()
    for m in ids:
        for t, p in _valid_current(members[m], partitions):
            if (t, p) not in taken:
                taken.add((t, p))
                owned[t].setdefault(m, set()).add(p)
                sizes[m] += 1
    topics = sorted(
        subscribers,
        key=lambda t: (-partitions[t] / len(subscribers[t]), len(subscribers[t]), str(t)),
    )
    for t in topics:
        for p in range(partitions[t]):
            if (t, p) not in taken:
                m = min(subscribers[t], key=lambda x: (sizes[x], rank[x]))
                owned[t].setdefault(m, set()).add(p)
                sizes[m] += 1
    shared = [t for t in topics if len(subscribers[t]) >= 2]
    for _ in range(MAX_BALANCE_ROUNDS):
        moved = False
        for t in shared:
            while True:
                least = min(subscribers[t], key=lambda x: (sizes[x], rank[x]))
                holders = [m for m in subscribers[t] if owned[t].get(m)]
                if not holders:
                    break  # a topic without partitions
                most = max(holders, key=lambda x: (sizes[x], -rank[x]))
                if sizes[most] - sizes[least] <= 1:
                    break
                p = max(owned[t][most])
                owned[t][most].discard(p)
                owned[t].setdefault(least, set()).add(p)
                sizes[most] -= 1
                sizes[least] += 1
                moved = True
        if not moved:
            break
    for t, by_member in owned.items():
        for m, ps in by_member.items():
            if ps:
                out[m][t] = set(ps)
    return out


def range_assign(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in members}
    for t in sorted(partitions, key=str):
        subscribers = sorted(m for m, s in members.items() if t in s.subscribed)
        if not subscribers:
            continue
        count = partitions[t]
        base, extra = divmod(count, len(subscribers))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(subscribers)}
        taken: set[int] = set()
        got = dict.fromkeys(subscribers, 0)
        for m in subscribers:  # sticky: previous partitions while under the quota
            for p in sorted(members[m].current.get(t, ())):
                if p < count and p not in taken and got[m] < quota[m]:
                    taken.add(p)
                    out[m].setdefault(t, set()).add(p)
                    got[m] += 1
        free = [p for p in range(count) if p not in taken]
        free.reverse()
        for m in subscribers:
            while got[m] < quota[m] and free:
                out[m].setdefault(t, set()).add(free.pop())
                got[m] += 1
    return out
