"""Fault schedules derived from a seed: Jepsen's nemesis, over `odradek.testing.Cluster`.

A schedule is a list of faults, each starting at an offset from the start of the fault phase and
lasting a while; the faults of one schedule do not overlap (one broker at a time is faulty,
so a majority of every RF-3 ISR stays up and the guarantees must hold throughout):

    kill       kill -9 the broker, start it again when the fault ends (recovery runs)
    restart    kill -9 and start again at once (a crash loop's single turn)
    pause      the broker holds every request it receives until resumed (a frozen process:
               connections stay open, nothing is answered)
    partition  cut the broker off from its peers (replica fetches fail both ways) then heal
    clients    cut the broker off from its clients (connections close, new ones are refused)
    disk-full  the broker's log dir answers writes with ENOSPC, then space returns (only when
               the cluster's brokers offer `fail_disk`; `kinds` says which kinds may be drawn)

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
) -> Schedule:
    """Faults for `duration` seconds: gaps of 0.1-0.6 s, faults of 0.3-`max_fault_s` s, each
    ending before the next begins and before `duration`."""
    rng = random.Random(f"chaos-schedule-{seed}")
    faults: list[Fault] = []
    t = rng.uniform(0.1, 0.5)
    while t < duration - 0.3:
        kind = rng.choice(kinds)
        node = rng.randrange(brokers)
        length = 0.0 if kind == "restart" else rng.uniform(0.3, max_fault_s)
        length = min(length, max(0.0, duration - t))
        faults.append(Fault(round(t, 3), kind, node, round(length, 3)))
        t += length + rng.uniform(0.1, 0.6)
    return Schedule(seed, tuple(faults), duration)
