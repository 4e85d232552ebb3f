"""Faults from a seed over a `HostCluster`: Jepsen's nemesis with real network faults.

    partition-leader      isolate a partition's leader from every other host
    partition-controller  isolate the controller broker from every other host
    majority-minority     a minority of the brokers (1 of 3, 2 of 5) and a ZooKeeper node
                          cut off from the rest
    bridge                two halves that only one broker connects
    zk-cut                one or two brokers cut off from every ZooKeeper node
    netem                 loss, delay and reordering on a broker's link (tc netem)
    kill                  kill -9 a broker, start it again when the fault ends
    pause                 SIGSTOP a broker, SIGCONT when the fault ends
    power-loss            kill -9 a broker and throw away what it had not fsync'd
                          (`odradek.log.power_loss`), start it again when the fault ends
    disk-full             fill a broker's data dir (its own tmpfs): its writes fail with
                          ENOSPC, its log dir goes offline and it halts, as Kafka's broker
                          does; the space is freed and the broker started when the fault ends

Faults come one at a time (one broker at a time loses power, once every replica is back in
sync); the same seed and kinds give the
same schedule. Which broker a fault hits is drawn from the seed when it is not decided by the
cluster's state (the leader or the controller at that moment).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from odradek.log.power_loss import discard_unsynced
from odradek.testing.jepsen.history import INFO, History
from odradek.testing.jepsen.hosts import CLIENT, ZK, HostCluster

NETWORK = ("partition-leader", "partition-controller", "majority-minority", "bridge", "zk-cut")
PROCESS = ("kill", "pause")
ALL = (*NETWORK, "netem", *PROCESS, "power-loss", "disk-full")
NETEM = "delay 40ms 20ms loss 8% reorder 20% 50%"
POWER_LOSS_SYNC_WAIT_S = 10.0


@dataclass(slots=True, frozen=True)
class Fault:
    at: float
    kind: str
    pick: int  # the seed's draw for which hosts the fault hits
    duration: float

    def __str__(self) -> str:
        return f"t={self.at:.2f}s {self.kind} (draw {self.pick}) for {self.duration:.2f}s"


def schedule(seed: int, duration: float, kinds: tuple[str, ...], longest: float) -> list[Fault]:
    rng = random.Random(f"jepsen-nemesis-{seed}")
    out: list[Fault] = []
    t = rng.uniform(0.1, 0.4)
    while t < duration - 0.3:
        length = min(rng.uniform(0.4, longest), duration - t)
        out.append(Fault(round(t, 3), rng.choice(kinds), rng.randrange(1 << 30), round(length, 3)))
        t += length + rng.uniform(0.2, 0.6)
    return out


class Nemesis:
    def __init__(
        self, cluster: HostCluster, topic: str, keys: int, journal: dict[str, str]
    ) -> None:
        self.c = cluster
        self.topic = topic
        self.keys = keys
        self.journal = journal  # broker -> its power-loss journal file
        self.down: set[str] = set()
        self.starting: set[str] = set()  # restarted, perhaps not listening yet
        self.full: set[str] = set()  # brokers whose disk is full
        self.lost: list[str] = []  # what power loss threw away, for the report

    def begin(self, f: Fault) -> str:
        """Start `f`; returns what it did, for the history."""
        rng = random.Random(f.pick)
        c, net = self.c, self.c.net
        brokers = list(c.brokers)
        b = rng.choice(brokers)
        if f.kind == "partition-leader":
            b = c.leader(self.topic, rng.randrange(self.keys)) or b
            net.isolate({b}, c.others(b))
            return f"isolated leader {b}"
        if f.kind == "partition-controller":
            b = c.controller() or b
            net.isolate({b}, c.others(b))
            return f"isolated controller {b}"
        if f.kind == "majority-minority":
            # a minority of the brokers (1 of 3, 2 of 5) and of the ZooKeeper nodes (1 of 3)
            more = rng.sample([x for x in brokers if x != b], (len(brokers) - 1) // 2 - 1)
            minority = {b, *more, rng.choice(ZK)}
            net.isolate(minority, set(net.hosts) - minority)
            return f"minority {sorted(minority)}"
        if f.kind == "bridge":
            rest = [h for h in net.hosts if h not in (b, CLIENT)]
            rng.shuffle(rest)
            half = len(rest) // 2
            net.isolate(set(rest[:half]), set(rest[half:]))
            return f"bridge {b} between {sorted(rest[:half])} and {sorted(rest[half:])}"
        if f.kind == "zk-cut":
            cut = set(rng.sample(brokers, rng.randint(1, 2)))
            net.isolate(cut, set(ZK))
            return f"ZooKeeper cut from {sorted(cut)}"
        if f.kind == "netem":
            return f"{b}: " + net.netem(b, NETEM)
        if f.kind == "kill":
            c.kill(b)
            self.down.add(b)
            return f"kill -9 {b}"
        if f.kind == "pause":
            c.pause(b, True)
            return f"SIGSTOP {b}"
        if f.kind == "power-loss":
            # one broker at a time: a power loss while another replica is still out of the
            # ISR (killed or cut off just before) is a double fault, which acks=all with
            # min.insync.replicas=2 does not cover; wait for every replica, else a kill -9
            if not c.all_in_sync(POWER_LOSS_SYNC_WAIT_S):
                c.kill(b)
                self.down.add(b)
                return f"kill -9 {b} (not power loss: replicas were not all in sync)"
            c.kill(b)
            self.down.add(b)
            changes = discard_unsynced(c.data_dir(b), self.journal[b])
            self.lost.append(f"{b}: {len(changes)} file(s) rolled back")
            return f"power loss of {b}: " + ("; ".join(changes[:6]) or "nothing unsynced")
        if f.kind == "disk-full":
            self.full.add(b)
            return f"disk full on {b}: " + c.fill_disk(b)
        raise ValueError(f"unknown fault {f.kind}")

    def end(self, wait: bool = True) -> None:
        """Heal: the network, paused and stopped brokers. Restarted brokers start meanwhile
        unless `wait` (the last heal waits for every one of them to listen)."""
        self.c.net.heal()
        for host in sorted(self.c.paused):
            self.c.pause(host, False)
        for b in sorted(self.full):
            # its log dir went offline (it halted) or is about to: as Kafka's, it needs a
            # restart with the space back
            self.c.kill(b)
            self.c.free_disk(b)
            self.down.add(b)
        self.full.clear()
        for b in sorted(self.down):
            self.c.start_broker(b, wait=False)
        self.starting |= self.down
        self.down.clear()
        if wait:
            for b in sorted(self.starting):
                self.c.wait_broker(b)
            self.starting.clear()

    def run(
        self, faults: list[Fault], history: History, stop: threading.Event, duration: float
    ) -> list[str]:
        start = time.monotonic()
        done: list[str] = []
        try:
            for f in faults:
                if stop.wait(max(0.0, start + f.at - time.monotonic())):
                    break
                inv = history.invoke("nemesis", "nemesis", {"fault": str(f), "phase": "begin"})
                what = self.begin(f)
                history.complete(inv, INFO, {"did": what})
                done.append(f"{f}: {what}")
                stop.wait(max(0.0, start + f.at + f.duration - time.monotonic()))
                inv = history.invoke("nemesis", "nemesis", {"fault": str(f), "phase": "end"})
                self.end(wait=False)
                history.complete(inv, INFO)
            stop.wait(max(0.0, start + duration - time.monotonic()))
        finally:
            self.end()
        return done
