"""Fault schedules derived from a seed: Jepsen's nemesis, over `odradek.testing.Cluster`.

A schedule is a list of faults, each starting at an offset from the start of the fault phase and
lasting a while. Faults come one after another; with probability `overlap` a second fault hits
another broker while the first lasts (then an RF-3 partition may have one live in-sync replica:
acks=all writes must be refused with min.insync.replicas=2, and nothing acknowledged may be
lost). No broker has two faults at once. The kinds:

    kill       kill -9 the broker, start it again when the fault ends (recovery runs)
    restart    kill -9 and start again at once (a crash loop's single turn)
    pause      the broker holds every request it receives until resumed (a frozen process:
               connections stay open, nothing is answered)
    partition  cut the broker off from its peers (replica fetches fail both ways) then heal
    clients    cut the broker off from its clients (connections close, new ones are refused)
    disk-full  the broker's log dir answers writes with ENOSPC, then space returns

`kinds` says which kinds may be drawn.

The same seed and kinds always give the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BASE_KINDS = ("kill", "restart", "pause", "partition", "clients")
DISK_KIND = "disk-full"


@dataclass(slots=True, frozen=True)
class Fault:
    at: float  # seconds after the fault phase starts
    kind: str
    node: int
    duration: float  # 0 for an instant fault (restart)

    def __str__(self) -> str:
        span = f" for {self.duration:.2f}s" if self.duration else ""
        return f"t={self.at:.2f}s {self.kind} broker {self.node}{span}"


@dataclass(slots=True, frozen=True)
class Schedule:
    seed: int
    faults: tuple[Fault, ...]
    duration: float

    def __str__(self) -> str:
        lines = [f"seed {self.seed}: {len(self.faults)} faults over {self.duration:.1f}s"]
        lines += [f"  {f}" for f in self.faults]
        return "\n".join(lines)


def generate(
    seed: int,
    duration: float = 4.0,
    brokers: int = 3,
    kinds: tuple[str, ...] = BASE_KINDS,
    max_fault_s: float = 1.5,
    overlap: float = 0.3,
) -> Schedule:
    """Faults for `duration` seconds: gaps of 0.1-0.6 s, faults of 0.3-`max_fault_s` s, each
    ending before the next begins and before `duration`; sometimes (`overlap`) a second fault
    on another broker inside the first one's span."""
    rng = random.Random(f"chaos-schedule-{seed}")
    faults: list[Fault] = []
    t = rng.uniform(0.1, 0.5)
    while t < duration - 0.3:
        first = _draw(rng, t, kinds, rng.randrange(brokers), duration, max_fault_s)
        faults.append(first)
        end = first.at + first.duration
        if brokers > 1 and first.duration > 0.2 and rng.random() < overlap:
            node = rng.choice([n for n in range(brokers) if n != first.node])
            start = rng.uniform(first.at, end - 0.1)
            second = _draw(rng, start, kinds, node, end, max_fault_s)
            faults.append(second)
        t = end + rng.uniform(0.1, 0.6)
    return Schedule(seed, tuple(sorted(faults, key=lambda f: f.at)), duration)


def _draw(
    rng: random.Random, at: float, kinds: tuple[str, ...], node: int, until: float, longest: float
) -> Fault:
    kind = rng.choice(kinds)
    length = 0.0 if kind == "restart" else rng.uniform(0.3, longest)
    length = min(length, max(0.0, until - at))
    return Fault(round(at, 3), kind, node, round(length, 3))
