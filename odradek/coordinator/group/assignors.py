"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`, as Kafka's
UniformAssignor and RangeAssignor (group-coordinator's `assignor` package) decide.

An assignor sees every member's subscribed topic ids and its current target assignment, and the
partition count of each subscribed topic; it returns the new target assignment of every member.
Both are sticky: a member keeps what it had when that stays within its share.

- `uniform` balances the total count: every member gets floor(P/N) or one more partition of the
  topics it subscribes to (homogeneous subscriptions); with heterogeneous subscriptions each
  partition goes to the least loaded subscriber, its previous owner first while it is under the
  fair share of that topic's subscribers.
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
    counts = dict.fromkeys(members, 0)
    previous: dict[tuple[uuid.UUID, int], str] = {}
    for m, spec in members.items():
        for tp in _valid_current(spec, partitions):
            previous.setdefault(tp, m)
    for t in sorted(partitions, key=str):
        subscribers = sorted(m for m, s in members.items() if t in s.subscribed)
        if not subscribers:
            continue
        fair = -(-partitions[t] // len(subscribers))
        per_topic = dict.fromkeys(subscribers, 0)
        for p in range(partitions[t]):
            owner = previous.get((t, p))
            if owner is None or owner not in per_topic or per_topic[owner] >= fair:
                owner = min(subscribers, key=lambda m: (counts[m], per_topic[m], m))
            out[owner].setdefault(t, set()).add(p)
            counts[owner] += 1
            per_topic[owner] += 1
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
