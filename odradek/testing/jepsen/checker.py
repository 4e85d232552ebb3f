"""Checkers of the queue workload (Jepsen's Kafka analyses of Redpanda and Bufstream), judged
from a finished history (`odradek.testing.jepsen.history`). As Jepsen's, they read only what
clients saw; an `info` op may or may not have happened and never proves an anomaly alone.

Each key's version order is its offsets: every value seen at an offset (acknowledged sends,
polls, the final read). Values written by ops not known to have committed (fail, info, or a
transaction aborted) enter it only when read, so that read_committed readers passing over an
aborted write are not skips. The anomalies, by kind:

    inconsistent-offsets  one offset of a key seen with two values
    duplicate             one value at two offsets (Kafka: an idempotent or transactional
                          producer writes each record once, KIP-98)
    lost-write            an acknowledged write never read, though reads went past its offset
    unseen                an acknowledged write never read at all, after the final read
    int-poll-skip         one poll of a key jumped over a version
    ext-poll-skip         a consumer's next poll of a key (same assignment) jumped over one
    int-nonmonotonic-poll one poll's offsets of a key do not increase
    ext-nonmonotonic-poll a consumer's next poll of a key (same assignment) went back
    nonmonotonic-send     one producer's acknowledged sends to a key got decreasing offsets
    reused-sequence       an acknowledged send whose offset holds (read_uncommitted, after
                          the faults) another value of the same producer: the client sent a
                          new batch with an old sequence number and the broker answered it
                          as a retry of the old one, as Kafka's ProducerStateManager does;
                          lost, but by the client (it replaces the lost-write and the poll
                          skips such a send would otherwise show)
    implicit-ack-lost     a send outside a transaction that librdkafka reported delivered
                          without an offset and that was never read: no broker acknowledged
                          it (librdkafka takes a later batch's success as the earlier one's,
                          rd_kafka_dr_implicit_ack, and a broker accepts any first sequence
                          from a producer it has no state for, as Kafka's checkSequence); not
                          a guarantee Kafka makes, and seen on Kafka 4.4 too (docs/jepsen.md)
    epoch-bump-duplicate  a duplicate whose later copy the log holds in a batch of the same
                          idempotent (not transactional) producer under a later producer
                          epoch: the client bumped its epoch (KIP-360) and sent, from
                          sequence 0, a record it had possibly written already. Brokers
                          cannot tell it from a new record (Kafka's checkSequence takes any
                          first sequence of a new epoch); librdkafka does this on message
                          timeouts (its maintainers in librdkafka issue 4953: the idempotent
                          producer's exactly-once is partial across an epoch bump)
    G1a                   a read of a value whose write was aborted or certainly failed
    uncommitted-read      a read_committed read finished before the writing transaction's
                          commit was sent
    G0, G1c, G2           dependency cycles (`elle`); Kafka does not promise to prevent them
    offset-back           a committed offset read lower than a commit acknowledged, or a read
                          completed, before it began
    hw-back               a high watermark read lower than an earlier completed read, or not
                          past an acks=all write acknowledged before it began
    stale-hw              the same, but the answer came from a leader of an older leader
                          epoch than that read's or that write's (a deposed leader that has
                          not learned it yet; Kafka answers a ListOffsets without a current
                          leader epoch from it too, KIP-320 fences only clients that send one)

The record batches' headers (`batches`, read after the faults healed) give each offset's
producer id, producer epoch and partition leader epoch; without them the two kinds that need
them are reported as `duplicate` and `hw-back`.

`check(history)` returns a `Report` whose `anomalies` are the kinds in `guarantees`
(`KAFKA_GUARANTEES` by default: what Kafka documents) and whose `observed` are the rest (found,
but not promised against).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from odradek.testing.jepsen import elle
from odradek.testing.jepsen.batches import Batch, batch_at
from odradek.testing.jepsen.history import FAIL, INFO, OK, History, Op

CYCLES = frozenset({"G0", "G1c", "G2"})
KAFKA_GUARANTEES = frozenset(
    {
        "inconsistent-offsets",
        "duplicate",
        "lost-write",
        "unseen",
        "int-poll-skip",
        "ext-poll-skip",
        "int-nonmonotonic-poll",
        "ext-nonmonotonic-poll",
        "nonmonotonic-send",
        "reused-sequence",
        "G1a",
        "uncommitted-read",
        "offset-back",
        "hw-back",
        "unavailable",
    }
)
CLIENT_MADE = frozenset({"implicit-ack-lost", "epoch-bump-duplicate"})
NOT_PROMISED = frozenset({"stale-hw"})
ALL_KINDS = KAFKA_GUARANTEES | CYCLES | CLIENT_MADE | NOT_PROMISED


@dataclass(slots=True, frozen=True)
class Anomaly:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass
class Report:
    anomalies: list[Anomaly] = field(default_factory=list)
    observed: list[Anomaly] = field(default_factory=list)  # found, not promised against
    stats: dict[str, int] = field(default_factory=dict)
    clients: dict[str, str] = field(default_factory=dict)  # process -> its client library

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies}

    def all_kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies + self.observed}


class _Found:
    def __init__(self, limit: int) -> None:
        self.items: list[Anomaly] = []
        self.per: dict[str, int] = defaultdict(int)
        self.limit = limit

    def add(self, kind: str, detail: str) -> None:
        self.per[kind] += 1
        if self.per[kind] <= self.limit:
            self.items.append(Anomaly(kind, detail))


@dataclass
class _Model:
    """What the history says, indexed: writes, reads, outcomes and version orders."""

    acked: dict[str, tuple[int, int | None, Op]] = field(default_factory=dict)
    written_by: dict[str, Op] = field(default_factory=dict)
    outcome: dict[int, str] = field(default_factory=dict)  # invoke index -> commit/abort/unknown
    seen: dict[int, dict[int, set[str]]] = field(default_factory=dict)  # key -> offset -> values
    read: dict[str, list[tuple[Op, int, int]]] = field(default_factory=dict)  # value -> reads
    final: dict[int, list[list[Any]]] | None = None
    # value -> (key, offset, the value the log holds there): a send acknowledged at an offset
    # holding another write of the same producer (a retry of it, to the broker)
    reused: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    batches: dict[int, list[Batch]] = field(default_factory=dict)  # key -> its log's batches


def _outcome(done: Op) -> str:
    if done.type == OK:
        return str(done.value.get("decision", "commit"))
    return "abort" if done.type == FAIL else "unknown"


def _model(history: History) -> _Model:
    m = _Model()
    seen: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    read: dict[str, list[tuple[Op, int, int]]] = defaultdict(list)
    log: dict[int, dict[int, str]] = {}  # key -> offset -> value, read_uncommitted
    for _inv, done in history.completions("final-uncommitted"):
        if done.type == OK:
            log = {int(k): {o: v for o, v in recs} for k, recs in done.value["records"].items()}
    for inv, done in history.completions("txn"):
        m.outcome[inv.index] = _outcome(done)
        for mop in done.value.get("mops", []):
            if mop[0] == "send":
                _f, key, value, offset = mop
                m.written_by[value] = inv
                if done.type == OK and m.outcome[inv.index] == "commit":
                    m.acked[value] = (key, offset, done)
            elif mop[0] == "poll" and done.type == OK:
                _f, key, records = mop
                for offset, value in records:
                    seen[key][offset].add(value)
                    read[value].append((done, key, offset))
    for value, (key, offset, _done) in m.acked.items():
        if offset is None:
            continue  # others enter the order only when read
        held = log.get(key, {}).get(offset)
        other = m.written_by.get(held) if held is not None and held != value else None
        mine = m.written_by[value]
        if other is not None and other.process == mine.process and other.index < mine.index:
            m.reused[value] = (key, offset, held or "")  # acknowledged, never written
        else:
            seen[key][offset].add(value)
    for _inv, done in history.completions("final"):
        if done.type == OK:
            m.final = {int(k): list(v) for k, v in done.value["records"].items()}
            for key, records in m.final.items():
                for offset, value in records:
                    seen[key][offset].add(value)
                    read[value].append((done, key, offset))
    for _inv, done in history.completions("batches"):
        rows = done.value.get("batches", {})
        m.batches = {int(k): [Batch.from_list(r) for r in v] for k, v in rows.items()}
    m.seen = {k: dict(v) for k, v in seen.items()}
    m.read = dict(read)
    return m


def _orders(m: _Model, found: _Found) -> dict[int, list[tuple[int, str]]]:
    """Each key's versions by offset; an offset with two values is reported, the first kept."""
    orders: dict[int, list[tuple[int, str]]] = {}
    for key, by_offset in m.seen.items():
        versions = []
        for offset in sorted(by_offset):
            values = sorted(by_offset[offset])
            if len(values) > 1:
                found.add("inconsistent-offsets", f"key {key} offset {offset}: {values}")
            versions.append((offset, values[0]))
        orders[key] = versions
    return orders


def check(
    history: History, guarantees: frozenset[str] = KAFKA_GUARANTEES, limit: int = 20
) -> Report:
    """Run every checker; at most `limit` anomalies of each kind are listed."""
    found = _Found(limit)
    m = _model(history)
    orders = _orders(m, found)
    _duplicates(m, found)
    _lost(m, orders, found)
    _polls(history, orders, found)
    _sends(history, m.reused, found)
    _aborted(history, m, found)
    _cycles(history, m, orders, found)
    _monotonic(history, m, found)
    if m.final is None:
        found.add("unavailable", "no final read after the faults healed")
    report = Report()
    for a in found.items:
        (report.anomalies if a.kind in guarantees else report.observed).append(a)
    for kind, n in found.per.items():
        if n > limit:
            target = report.anomalies if kind in guarantees else report.observed
            target.append(Anomaly(kind, f"... and {n - limit} more"))
    report.stats = {**history.counts(), **{f"found {k}": n for k, n in found.per.items()}}
    report.clients = clients(history)
    for _inv, done in history.completions("txn"):
        key = f"{done.type} txn ops {done.value.get('client', 'librdkafka')}"
        report.stats[key] = report.stats.get(key, 0) + 1
    return report


def clients(history: History) -> dict[str, str]:
    """Each client process's library, as its ops recorded it ("librdkafka" when unnamed)."""
    out: dict[str, str] = {}
    for op in history.ops:
        if op.f in ("txn", "assign", "commit"):
            out.setdefault(op.process, str(op.value.get("client", "librdkafka")))
    return out


def _by(op: Op) -> str:
    """An op named with its process and client, for an anomaly's detail."""
    return f"op {op.index} of {op.process} ({op.value.get('client', 'librdkafka')})"


def _duplicates(m: _Model, found: _Found) -> None:
    for value, reads in m.read.items():
        places = sorted({(k, o) for _op, k, o in reads})
        if len(places) > 1:
            writer = m.written_by.get(value)
            by = f", written by {_by(writer)}" if writer is not None else ""
            bumped = _epoch_bumped(m, places)
            if bumped:
                found.add("epoch-bump-duplicate", f"{value!r} at {bumped}{by}")
            else:
                found.add("duplicate", f"{value!r} at (key, offset) {places}{by}")


def _epoch_bumped(m: _Model, places: list[tuple[int, int]]) -> str:
    """If every copy of a value (one key) sits in a non-transactional batch of one producer id,
    each under a later producer epoch than the one before: the copies, named by epoch and
    sequence; otherwise ''."""
    if len({k for k, _o in places}) != 1:
        return ""
    key = places[0][0]
    held = [batch_at(m.batches.get(key, []), o) for _k, o in places]
    found = [b for b in held if b is not None and not b.transactional and not b.control]
    if len(found) != len(places) or len({b.producer_id for b in found}) != 1:
        return ""
    epochs = [b.producer_epoch for b in found]
    if any(later <= earlier for earlier, later in zip(epochs, epochs[1:], strict=False)):
        return ""
    return f"key {key}: " + ", ".join(
        f"offset {o} (producer {b.producer_id} epoch {b.producer_epoch} sequence "
        f"{b.base_sequence + o - b.base_offset})"
        for (_k, o), b in zip(places, found, strict=True)
    )


def _lost(m: _Model, orders: dict[int, list[tuple[int, str]]], found: _Found) -> None:
    highest = {k: max((o for o, v in vs if v in m.read), default=-1) for k, vs in orders.items()}
    for value, (key, offset, _done) in m.acked.items():
        if value in m.read:
            continue
        if value in m.reused:
            _k, _o, held = m.reused[value]
            found.add(
                "reused-sequence",
                f"{_by(m.written_by[value])} acknowledged {value!r} at key {key} offset "
                f"{offset}, which holds {held!r} of its own {_by(m.written_by[held])} "
                f"({m.outcome.get(m.written_by[held].index, 'unknown')}): the client reused "
                "a sequence number and the broker took the batch for a retry of that one, "
                "as Kafka's does; it was never written",
            )
            continue
        where = f"key {key} offset {offset}"
        writer = m.written_by[value]
        if offset is None and writer.value.get("txn") is False and m.final is not None:
            found.add(
                "implicit-ack-lost",
                f"{value!r} to key {key} ({_by(writer)}) reported delivered with no offset "
                "(no broker acknowledged it) and never read",
            )
        elif offset is not None and offset < highest.get(key, -1):
            found.add(
                "lost-write",
                f"acknowledged {value!r} at {where} ({_by(m.written_by[value])}) never "
                f"read; reads reached offset {highest[key]}",
            )
        elif m.final is not None:
            found.add(
                "unseen",
                f"acknowledged {value!r} at {where} ({_by(m.written_by[value])}) not in the "
                "final read",
            )


def _polls(history: History, orders: dict[int, list[tuple[int, str]]], found: _Found) -> None:
    """Skips and going back, inside one poll and between a consumer's polls of a key."""
    rank = {k: {o: i for i, (o, _v) in enumerate(vs)} for k, vs in orders.items()}
    last: dict[tuple[str, int], tuple[int, int]] = {}  # (process, key) -> (offset, op)
    for op in sorted(history.ops, key=lambda o: o.index):
        if op.type != OK:
            continue
        process = str(op.value.get("process", op.process))
        if op.f == "assign":
            for key in list(last):
                if key[0] == process:
                    del last[key]
            continue
        if op.f != "txn":
            continue
        for mop in op.value.get("mops", []):
            if mop[0] != "poll" or not mop[2]:
                continue
            key, records = mop[1], [r[0] for r in mop[2]]
            r = rank.get(key, {})
            for a, b in zip(records, records[1:], strict=False):
                if b <= a:
                    found.add("int-nonmonotonic-poll", f"op {op.invoke} key {key}: {a} then {b}")
                elif r[b] - r[a] > 1:
                    found.add(
                        "int-poll-skip",
                        f"op {op.invoke} key {key}: {a} then {b}, "
                        f"skipping {_between(orders[key], a, b)}",
                    )
            prev = last.get((process, key))
            if prev is not None:
                a, b = prev[0], records[0]
                if b <= a:
                    found.add(
                        "ext-nonmonotonic-poll",
                        f"{process} key {key}: op {prev[1]} read "
                        f"up to {a}, op {op.invoke} from {b}",
                    )
                elif r[b] - r[a] > 1:
                    found.add(
                        "ext-poll-skip",
                        f"{process} key {key}: op {prev[1]} read up to "
                        f"{a}, op {op.invoke} from {b}, skipping {_between(orders[key], a, b)}",
                    )
            last[(process, key)] = (records[-1], op.invoke)


def _between(versions: list[tuple[int, str]], a: int, b: int) -> list[tuple[int, str]]:
    return [(o, v) for o, v in versions if a < o < b][:5]


def _sends(history: History, reused: dict[str, tuple[int, int, str]], found: _Found) -> None:
    last: dict[tuple[str, int], tuple[int, str]] = {}
    for _inv, done in sorted(history.completions("txn"), key=lambda p: p[0].index):
        if done.type != OK or done.value.get("decision", "commit") != "commit":
            continue
        process = str(done.value.get("process", done.process))
        for mop in done.value.get("mops", []):
            if mop[0] != "send" or mop[3] is None or mop[2] in reused:
                continue
            _f, key, value, offset = mop
            prev = last.get((process, key))
            if prev is not None and offset <= prev[0]:
                found.add(
                    "nonmonotonic-send",
                    f"{process} key {key}: {prev[1]!r} at {prev[0]} then {value!r} at {offset}",
                )
            last[(process, key)] = (offset, value)


def _aborted(history: History, m: _Model, found: _Found) -> None:
    """G1a and reads of writes whose commit had not been sent yet."""
    commit_sent = {
        int(done.value["op"]): done.index
        for _inv, done in history.completions("end-txn")
        if done.type == OK
    }
    for value, reads in m.read.items():
        writer = m.written_by.get(value)
        if writer is None:
            continue
        outcome = m.outcome.get(writer.index, "unknown")
        for op, key, offset in reads:
            if op.invoke == writer.index:
                continue
            if outcome == "abort":
                found.add(
                    "G1a",
                    f"op {op.invoke} read {value!r} (key {key} offset {offset}) "
                    f"of {_by(writer)}, which did not commit",
                )
            elif writer.value.get("txn"):
                sent = commit_sent.get(writer.index)
                if sent is not None and op.index < sent:
                    found.add(
                        "uncommitted-read",
                        f"op {op.invoke} read {value!r} (key {key} "
                        f"offset {offset}) before op {writer.index}'s commit was sent",
                    )


def _cycles(
    history: History, m: _Model, orders: dict[int, list[tuple[int, str]]], found: _Found
) -> None:
    writer = {v: op.index for v, op in m.written_by.items() if m.outcome.get(op.index) != "abort"}
    reads: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for inv, done in history.completions("txn"):
        if done.type != OK:
            continue
        for mop in done.value.get("mops", []):
            if mop[0] == "poll":
                reads[inv.index][mop[1]].extend(v for _o, v in mop[2])
    # a duplicate's later copies are reported as duplicates, not as a write cycle with itself
    versions = {k: list(dict.fromkeys(v for _o, v in vs)) for k, vs in orders.items()}
    for cycle in elle.cycles(elle.edges(versions, writer, reads)):
        found.add(cycle.kind, cycle.path())


def _monotonic(history: History, m: _Model, found: _Found) -> None:
    """Committed offsets and high watermarks: a read is not lower than what was known when it
    was invoked (acknowledged commits and sends, earlier completed reads). A high watermark
    answered under an older leader epoch than what bounds it is `stale-hw`: each bound keeps
    the leader epoch it was known under (a read's answer, a write's batch in the log)."""
    events: list[tuple[int, int, str, Op]] = []
    for f in ("committed", "hw"):
        for inv, done in history.completions(f):
            if done.type == OK:
                events.append((inv.index, 0, "start", done))
                events.append((done.index, 1, "done", done))
    for _inv, done in history.completions("commit"):
        if done.type == OK:
            events.append((done.index, 1, "commit", done))
    for _inv, done in history.completions("txn"):
        if done.type == OK and done.value.get("decision", "commit") == "commit":
            events.append((done.index, 1, "ack", done))
    events.sort(key=lambda e: (e[0], e[1]))
    # ("hw" | group, key) -> bound, why, leader epoch it was known under (-1 unknown)
    known: dict[tuple[str, int], tuple[int, str, int]] = {}
    before: dict[int, dict[tuple[str, int], tuple[int, str, int]]] = {}
    for _i, _o, role, op in events:
        if role == "start":
            before[op.invoke] = dict(known)
        elif role == "done":
            field_, kind = ("offsets", "offset-back") if op.f == "committed" else ("hw", "hw-back")
            name = "hw" if op.f == "hw" else "group " + str(op.value.get("group", ""))
            bounds = before.pop(op.invoke, {})
            epochs = op.value.get("epochs", {})
            for key, value in op.value[field_].items():
                bound = bounds.get((name, int(key)))
                epoch = int(epochs.get(key, -1))
                if bound is not None and value < bound[0]:
                    stale = kind == "hw-back" and 0 <= epoch < bound[2]
                    at = f" from leader epoch {epoch}, older than {bound[2]}" if stale else ""
                    found.add(
                        "stale-hw" if stale else kind,
                        f"key {key} read {value} (op {op.invoke}){at} after {bound[1]}",
                    )
                _raise(known, (name, int(key)), value, f"a read of {value} (op {op.invoke})", epoch)
        elif role == "commit":
            name = "group " + str(op.value.get("group", ""))
            for key, value in op.value["offsets"].items():
                _raise(known, (name, int(key)), value, f"commit of {value} (op {op.invoke})")
        else:
            for mop in op.value.get("mops", []):
                if mop[0] == "send" and mop[3] is not None:
                    key, offset = mop[1], mop[3]
                    batch = batch_at(m.batches.get(key, []), offset)
                    epoch = batch.leader_epoch if batch is not None else -1
                    why = f"a write acked at {offset} (op {op.invoke})"
                    _raise(known, ("hw", key), offset + 1, why, epoch)


def _raise(
    known: dict[tuple[str, int], tuple[int, str, int]],
    key: tuple[str, int],
    v: int,
    why: str,
    epoch: int = -1,
) -> None:
    """Raise a bound; at an equal value the newer leader epoch is kept."""
    if key not in known or v > known[key][0] or (v == known[key][0] and epoch > known[key][2]):
        known[key] = (v, why, epoch)


def summarize(anomalies: list[Anomaly]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for a in anomalies:
        out[a.kind] += 1
    return dict(out)


__all__ = [
    "ALL_KINDS",
    "CLIENT_MADE",
    "NOT_PROMISED",
    "CYCLES",
    "INFO",
    "KAFKA_GUARANTEES",
    "Anomaly",
    "Report",
    "check",
    "clients",
]
