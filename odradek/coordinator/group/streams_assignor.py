"""The broker-side task assignor of KIP-1071 streams groups, after Kafka's StickyTaskAssignor.

A task is (subtopology id, partition). Members are grouped by their process (one Kafka Streams
instance may run several members); a process' capacity is its member count. Active tasks first:

- a task stays with the member that owned it (active, or being revoked) when that member's
  process is still under its share of the tasks (sticky);
- the rest go, one at a time in task order, to the least loaded process (load relative to its
  capacity) and there to its least loaded member.

Standby replicas (`num_standby`, the group's `streams.num.standby.replicas`) then go, per task, to
processes that hold no copy of it yet (never next to its active task), preferring the member that
held it as a standby before, else the least loaded process; a task gets fewer standbys when fewer
processes are left. Warm-up tasks are not planned (Kafka assigns them only when it moves a stateful
task to a process that has not caught up). Deterministic: ties break on member id.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Task = tuple[str, int]
Tasks = dict[str, set[int]]  # subtopology id -> partitions


@dataclass(slots=True)
class AssignorMember:
    """What the assignor knows of a member: its process and what it held before."""

    member_id: str
    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)


@dataclass(slots=True)
class MemberTasks:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)


def flatten(tasks: Mapping[str, Iterable[int]]) -> set[Task]:
    return {(sub, p) for sub, parts in tasks.items() for p in parts}


def nest(tasks: Iterable[Task]) -> Tasks:
    out: Tasks = {}
    for sub, p in tasks:
        out.setdefault(sub, set()).add(p)
    return out


def assign(
    partitions: Mapping[str, int], members: Iterable[AssignorMember], num_standby: int = 0
) -> dict[str, MemberTasks]:
    """Target tasks per member id; `partitions` is every subtopology's task count."""
    by_id = {m.member_id: m for m in sorted(members, key=lambda m: m.member_id)}
    if not by_id:
        return {}
    tasks = sorted((sub, p) for sub, n in partitions.items() for p in range(n))
    processes: dict[str, list[str]] = defaultdict(list)
    for m in by_id.values():
        processes[m.process_id].append(m.member_id)
    load: dict[str, int] = dict.fromkeys(by_id, 0)
    process_load: dict[str, int] = dict.fromkeys(processes, 0)
    active: dict[str, set[Task]] = {mid: set() for mid in by_id}
    quota = math.ceil(len(tasks) / len(by_id))

    def give(mid: str, task: Task, into: dict[str, set[Task]]) -> None:
        into[mid].add(task)
        load[mid] += 1
        process_load[by_id[mid].process_id] += 1

    def least_member(process: str) -> str:
        return min(processes[process], key=lambda mid: (load[mid], mid))

    def process_order(candidates: Iterable[str]) -> list[str]:
        return sorted(candidates, key=lambda p: (process_load[p] / len(processes[p]), p))

    previous = {t: m.member_id for m in by_id.values() for t in flatten(m.active)}
    unassigned = []
    for task in tasks:
        owner = previous.get(task)
        if owner is not None and load[owner] < quota:
            give(owner, task, active)
        else:
            unassigned.append(task)
    for task in unassigned:
        process = process_order(processes)[0]
        give(least_member(process), task, active)

    standby: dict[str, set[Task]] = {mid: set() for mid in by_id}
    if num_standby > 0:
        held_before = {mid: flatten(m.standby) for mid, m in by_id.items()}
        for task in tasks:
            hosting = {by_id[mid].process_id for mid in by_id if task in active[mid]}
            for _ in range(num_standby):
                free = [p for p in processes if p not in hosting]
                if not free:
                    break
                sticky = [
                    mid
                    for p in free
                    for mid in processes[p]
                    if task in held_before[mid] and load[mid] < quota * (1 + num_standby)
                ]
                mid = sticky[0] if sticky else least_member(process_order(free)[0])
                give(mid, task, standby)
                hosting.add(by_id[mid].process_id)
    return {mid: MemberTasks(nest(active[mid]), nest(standby[mid])) for mid in by_id}
