"""Faults from a seed over a cluster on hosts (`deployment.Deployment`: odradek's
`HostCluster`, or Apache Kafka's KRaft nodes in compat_tests/reference/kafka_hosts.py): Jepsen's
nemesis with real network faults.

    partition-leader      isolate a partition's leader from every other host
    partition-controller  isolate the controller broker from every other host
    majority-minority     a minority of the brokers (1 of 3, 2 of 5) and a ZooKeeper node
                          (where the cluster has one) cut off from the rest
    bridge                two halves that only one broker connects
    zk-cut                one or two brokers cut off from every ZooKeeper node (on KRaft
                          nodes: from every other node's controller listener)
    netem                 loss, delay and reordering on a broker's link (tc netem)
    kill                  kill -9 a broker, start it again when the fault ends
    pause                 SIGSTOP a broker, SIGCONT when the fault ends
    power-loss            kill -9 a broker and throw away what it had not fsync'd
                          (`odradek.log.power_loss`), start it again when the fault ends
    disk-full             fill a broker's data dir (its own tmpfs): its writes fail with
                          ENOSPC, its log dir goes offline and it halts, as Kafka's broker
                          does; the space is freed and the broker started when the fault ends
    eio                   a broker's log dir writes and/or fsyncs fail with EIO (injected,
                          odradek.log.disk_faults; once every replica is in sync: one broker
                          at a time, as power loss): the first failing I/O takes the dir offline
                          and the broker halts, as Kafka's does; the end starts it again
                          without the fault (one that no I/O met is cleared in place)
    clock-jump            a broker's wall clock (odradek.clock: LogAppendTime, retention,
                          transaction timeouts, commit timestamps) jumps a minute to 6 hours
                          forward or back, and returns when the fault ends

Faults come one at a time (one broker at a time loses power, once every replica is back in
sync); the same seed and kinds give the
same schedule. Which broker a fault hits is drawn from the seed when it is not decided by the
cluster's state (the leader or the controller at that moment).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass

from odradek.log.disk_faults import FSYNC, WRITE
from odradek.log.power_loss import discard_unsynced
from odradek.testing.jepsen.deployment import Deployment
from odradek.testing.jepsen.history import INFO, History
from odradek.testing.jepsen.hosts import CLIENT

NETWORK = ("partition-leader", "partition-controller", "majority-minority", "bridge", "zk-cut")
PROCESS = ("kill", "pause")
ALL = (*NETWORK, "netem", *PROCESS, "power-loss", "disk-full", "eio", "clock-jump")
NETEM = "delay 40ms 20ms loss 8% reorder 20% 50%"
POWER_LOSS_SYNC_WAIT_S = 10.0
CLOCK_JUMP_MS = (60_000, 6 * 3600 * 1000)  # shortest and longest jump (below retention.ms)
EIO_OPS = ((WRITE, FSYNC), (WRITE, FSYNC), (WRITE,), (FSYNC,))


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
    def __init__(self, cluster: Deployment, topic: str, keys: int, journal: dict[str, str]) -> None:
        self.c = cluster
        self.topic = topic
        self.keys = keys
        self.journal = journal  # broker -> its power-loss journal file
        self.down: set[str] = set()
        self.starting: set[str] = set()  # restarted, perhaps not listening yet
        self.full: set[str] = set()  # brokers whose disk is full
        self.failing: set[str] = set()  # brokers whose log dir I/O fails with EIO
        self.jumped: set[str] = set()  # brokers whose wall clock is shifted
        self.lost: list[str] = []  # what power loss threw away, for the report

    def begin(self, f: Fault) -> str:
        """Start `f`; returns what it did, for the history."""
        rng = random.Random(f.pick)
        c, net = self.c, self.c.net
        if f.kind in c.unsupported:
            raise ValueError(f"{f.kind} does not apply here: {c.unsupported[f.kind]}")
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
            minority = {b, *more}
            if c.zookeeper:
                minority.add(rng.choice(c.zookeeper))
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
            return c.cut_from_quorum(cut)
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
        if f.kind == "eio":
            ops = rng.choice(EIO_OPS)
            # one broker at a time, as for power loss: a second broker halting while the
            # first is still restarting leaves one replica, a double fault (soak seed 16:
            # 17 s at ISR [2], and librdkafka's epoch bump duplicated a record)
            if not c.all_in_sync(POWER_LOSS_SYNC_WAIT_S):
                return f"EIO on {b}: not injected (replicas were not all in sync)"
            try:
                offline = c.fail_disk_io(b, "EIO", ops)
            except OSError as exc:
                return f"EIO on {b}: not injected ({exc})"
            self.failing.add(b)
            return f"EIO on {b}'s {'/'.join(ops)}" + (f" (offline: {offline})" if offline else "")
        if f.kind == "clock-jump":
            low, high = (math.log(x) for x in CLOCK_JUMP_MS)
            offset = rng.choice((-1, 1)) * round(math.exp(rng.uniform(low, high)))
            try:
                c.jump_clock(b, offset)
            except OSError as exc:
                return f"clock of {b}: not jumped ({exc})"
            self.jumped.add(b)
            return f"clock of {b} jumps {offset / 60_000:+.1f} min"
        raise ValueError(f"unknown fault {f.kind}")

    def end(self, wait: bool = True) -> None:
        """Heal: the network, paused and stopped brokers. Restarted brokers start meanwhile
        unless `wait` (the last heal waits for every one of them to listen)."""
        self.c.net.heal()
        for host in sorted(self.c.paused):
            self.c.pause(host, False)
        for b in sorted(self.jumped):
            try:
                self.c.jump_clock(b, 0)
            except OSError:
                pass  # it exited: it starts again on the system clock
        self.jumped.clear()
        for b in sorted(self.failing):
            # a log dir that failed stays offline until a restart, as Kafka's (the broker has
            # halted or is halting); a fault that no write or fsync met is just cleared
            try:
                offline = self.c.fail_disk_io(b, None, (WRITE, FSYNC))
            except OSError:
                offline = ["(no answer)"]
            if offline:
                self.c.kill(b)
                self.down.add(b)
        self.failing.clear()
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
