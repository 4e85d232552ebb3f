"""The checker of a chaos run: Kafka's guarantees, judged from a finished `History`.

As Jepsen's checkers, it reads only what clients saw. An `info` operation (outcome unknown)
may or may not have taken effect, so it never proves an anomaly by itself. The guarantees:

- lost:        an acknowledged send (idempotent producer, acks=all) or a committed
               transaction's record is missing from the final read, or the acknowledged offset
               holds another record (Kafka: acknowledged writes with acks=all survive the loss of
               any minority of the ISR; unclean.leader.election.enable=false).
- duplicate:   a record appears twice in the final read (KIP-98: the idempotent producer writes
               each record once whatever its retries; a transaction commits once). Copies
               written by one producer id under successive epochs may be the client's doing:
               a broker deduplicates within an epoch only (a new epoch starts its sequences at
               0, KIP-360), and librdkafka bumps its own epoch after some errors and resends
               records that may already be written (librdkafka issue 4953). Such a copy is
               listed as `known`, not as an anomaly, only when the producer's own log shows the
               bump followed what Kafka would also have given it (a timeout, or an answer Kafka
               gives in that situation: `epochs`); a bump after a broker refused a batch it
               had written (OUT_OF_ORDER_SEQUENCE_NUMBER where Kafka deduplicates) is a
               duplicate. Every report counts its known items (`stats["known"]`).
- order:       one producer's records in a partition are not in the order it sent them (the
               idempotent producer keeps order per partition, KIP-98 sequence numbers).
- aborted-read: a read_committed read saw a record of a transaction that was aborted (or that
               certainly did not commit), or saw part of a transaction but not all of it.
- offset-back: a group's committed offset read lower than an acknowledged commit or an earlier
               read of it that had completed before this read began.
- hw-back:     a partition's high watermark read lower than an earlier completed read, or not
               past an offset acknowledged (acks=all) before this read began.
- unavailable: the final read could not be made after every fault was healed.
- under-replicated: a partition has fewer replicas than its topic's replication factor (an
               internal topic created while a broker was down must not settle for fewer: Kafka
               answers COORDINATOR_NOT_AVAILABLE until enough brokers are alive).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.testing.chaos.epochs import Batch, judge
from odradek.testing.chaos.history import FAIL, OK, History, Op

Key = tuple[str, int]  # (topic, partition)


@dataclass(slots=True, frozen=True)
class Anomaly:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass
class Report:
    anomalies: list[Anomaly] = field(default_factory=list)
    known: list[Anomaly] = field(default_factory=list)  # client behaviour, not the broker's
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies}

    def add(self, kind: str, detail: str) -> None:
        self.anomalies.append(Anomaly(kind, detail))


def check(history: History, idem_topic: str, txn_topic: str, limit: int = 20) -> Report:
    """Check every guarantee; at most `limit` anomalies of each kind are listed."""
    report = Report()
    finals = _finals(history)
    idem = finals.get((idem_topic, "read_uncommitted"))
    txn = finals.get((txn_topic, "read_committed"))
    if idem is None or txn is None:
        missing = [name for name, r in (("idempotent", idem), ("transactional", txn)) if r is None]
        report.add("unavailable", f"no final read of the {' and '.join(missing)} topic")
    if idem is not None:
        _check_idempotent(history, idem_topic, idem, report)
    if txn is not None:
        _check_transactions(history, txn_topic, txn, report)
    _check_group_reads(history, txn_topic, report)
    _check_monotonic(history, idem_topic, report)
    _check_replicas(history, report)
    _trim(report, limit)
    report.stats = {**history.counts(), "known": len(report.known)}
    return report


# -- final reads -------------------------------------------------------------------------------

Records = list[tuple[int, int, str]]  # (partition, offset, value)


def _finals(history: History) -> dict[tuple[str, str], Records]:
    out: dict[tuple[str, str], Records] = {}
    for _inv, done in history.completions("final"):
        if done.type == OK:
            out[(done.value["topic"], done.value["isolation"])] = list(done.value["records"])
    return out


def _positions(records: Records) -> dict[str, list[tuple[int, int]]]:
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, offset, value in records:
        where[value].append((partition, offset))
    return where


def _duplicates(where: dict[str, list[tuple[int, int]]], what: str, report: Report) -> None:
    for value, places in where.items():
        if len(places) > 1:
            report.add("duplicate", f"{what} record {value!r} at {sorted(places)}")


# -- idempotent producer -----------------------------------------------------------------------


def _writers(history: History) -> dict[tuple[int, int], Batch]:
    """(partition, offset) -> the batch holding it in the idempotent topic's final log, from
    the batch headers the runner recorded (empty when it recorded none)."""
    out: dict[tuple[int, int], Batch] = {}
    for _inv, done in history.completions("batches"):
        if done.type != OK:
            continue
        for partition, batches in done.value["batches"].items():
            for base, last, pid, epoch, seq in batches:
                batch = Batch(int(partition), base, last, pid, epoch, seq)
                for offset in range(base, last + 1):
                    out[(int(partition), offset)] = batch
    return out


def _eos_events(history: History) -> list[dict[str, Any]]:
    """The idempotent producers' own records of sends, answers and epoch bumps (eos_log)."""
    out: list[dict[str, Any]] = []
    for _inv, done in history.completions("eos"):
        if done.type == OK:
            out.extend(done.value["events"])
    return out


def _epoch_bumped(places: list[tuple[int, int]], writers: dict[tuple[int, int], Batch]) -> bool:
    """Every later copy was written by the same producer id under a higher epoch."""
    found = [writers.get(place) for place in sorted(places)]
    if any(w is None for w in found) or len({p for p, _o in places}) != 1:
        return False
    pids = {w.pid for w in found if w is not None}
    epochs = [w.epoch for w in found if w is not None]
    return len(pids) == 1 and all(a < b for a, b in zip(epochs, epochs[1:], strict=False))


def _check_idempotent(history: History, topic: str, final: Records, report: Report) -> None:
    where = _positions(final)
    writers = _writers(history)
    events = _eos_events(history)
    log = set(writers.values())
    for value, places in where.items():
        if len(places) < 2:
            continue
        if not _epoch_bumped(places, writers):
            report.add("duplicate", f"{topic} record {value!r} at {sorted(places)}")
            continue
        copies = ", ".join(
            f"producer {writers[p].pid} epoch {writers[p].epoch}" for p in sorted(places)
        )
        verdicts = [judge(writers[p], events, log) for p in sorted(places)[:-1]]
        detail = f"{topic} record {value!r} at {sorted(places)}: {copies}; " + "; ".join(
            v.why for v in verdicts
        )
        if all(v.known for v in verdicts):
            report.known.append(Anomaly("epoch-bump duplicate", detail))
        else:
            report.add("duplicate", detail)
    sends = history.completions("produce")
    seq_of: dict[str, tuple[str, int]] = {}
    for inv, done in sends:
        value = inv.value["value"]
        seq_of[value] = (inv.value["process"], inv.value["seq"])
        if done.type != OK:
            if done.type == FAIL and value in where:
                report.add("lost", f"{value!r} failed for sure but is in the log at {where[value]}")
            continue
        acked = (done.value["partition"], done.value["offset"])
        places = where.get(value, [])
        if not places:
            report.add("lost", f"acknowledged {value!r} at {acked} is not in the final read")
        elif acked[1] is None:
            if acked[0] not in {p for p, _o in places}:
                report.add("lost", f"acknowledged {value!r} in {acked[0]} but read at {places}")
        elif acked not in places:
            report.add("lost", f"acknowledged {value!r} at {acked} but read at {places}")
    # order: per (producer, partition), offsets must grow with the send sequence
    # (a duplicate's copies are reported once, as duplicates: only first copies count here)
    seen: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for partition, offset, value in final:
        if value in seq_of and where[value][0] == (partition, offset):
            process, seq = seq_of[value]
            seen[(process, partition)].append((offset, seq, value))
    for (process, partition), items in seen.items():
        items.sort()
        for (o1, s1, v1), (o2, s2, v2) in zip(items, items[1:], strict=False):
            if s2 < s1:
                report.add(
                    "order",
                    f"producer {process} partition {partition}: {v1!r} (seq {s1}) at offset {o1} "
                    f"before {v2!r} (seq {s2}) at offset {o2}",
                )


# -- transactions ------------------------------------------------------------------------------


def _txn_outcomes(history: History) -> list[tuple[Op, str]]:
    """(invoke, outcome) with outcome "commit", "abort" (took effect) or "unknown"."""
    out = []
    for inv, done in history.completions("txn"):
        if done.type == OK:
            out.append((inv, done.value["decision"]))
        elif done.type == FAIL:
            out.append((inv, "abort"))  # certainly not committed
        else:
            out.append((inv, "unknown"))
    return out


def _check_transactions(history: History, topic: str, final: Records, report: Report) -> None:
    where = _positions(final)
    _duplicates(where, f"{topic} (read_committed)", report)
    for inv, outcome in _txn_outcomes(history):
        values = [v for _p, v in inv.value["values"]]
        present = [v for v in values if v in where]
        name = inv.value.get("txn", inv.index)
        if outcome == "commit" and len(present) < len(values):
            missing = sorted(set(values) - set(present))
            report.add("lost", f"committed transaction {name}: {missing} not in the final read")
        elif outcome == "abort" and present:
            report.add(
                "aborted-read",
                f"read_committed final read has {present} of aborted transaction {name}",
            )
        elif outcome == "unknown" and present and len(present) < len(values):
            report.add(
                "aborted-read",
                f"read_committed final read has part of transaction {name}: {present} of {values}",
            )


def _check_group_reads(history: History, topic: str, report: Report) -> None:
    """Group consumers read with isolation.level=read_committed."""
    aborted: dict[str, Any] = {}
    for inv, outcome in _txn_outcomes(history):
        if outcome == "abort":
            for _p, v in inv.value["values"]:
                aborted[v] = inv.value.get("txn", inv.index)
    for _inv, done in history.completions("poll"):
        if done.type == OK and done.value["topic"] == topic and done.value["value"] in aborted:
            v = done.value
            report.add(
                "aborted-read",
                f"group member {v['process']} read {v['value']!r} at {v['partition']}:"
                f"{v['offset']} of aborted transaction {aborted[v['value']]}",
            )


# -- committed offsets and high watermarks -----------------------------------------------------


def _check_monotonic(history: History, idem_topic: str, report: Report) -> None:
    """A read must not be lower than what was known before it was invoked: acknowledged
    writes (commits; acks=all sends for the high watermark) and earlier completed reads."""
    events: list[tuple[int, int, str, Op]] = []  # (history index, order, role, op)
    for f in ("committed", "hw"):
        for inv, done in history.completions(f):
            if done.type == OK:
                events.append((inv.index, 0, "read-start", done))
                events.append((done.index, 1, "read-done", done))
    for _inv, done in history.completions("commit"):
        if done.type == OK:
            events.append((done.index, 1, "commit-done", done))
    for _inv, done in history.completions("produce"):
        if done.type == OK and done.value["offset"] is not None:
            events.append((done.index, 1, "ack-done", done))
    events.sort(key=lambda e: (e[0], e[1]))
    known: dict[tuple[str, Key], tuple[int, str]] = {}  # (f, key) -> (lower bound, why)
    snapshot: dict[int, dict[tuple[str, Key], tuple[int, str]]] = {}
    for _index, _order, role, op in events:
        if role == "read-start":
            snapshot[op.invoke] = dict(known)
        elif role == "read-done":
            f = op.f
            field_ = "offsets" if f == "committed" else "hw"
            kind = "offset-back" if f == "committed" else "hw-back"
            before = snapshot.pop(op.invoke, {})
            for key, value in op.value[field_].items():
                bound = before.get((f, key))
                if bound is not None and value < bound[0]:
                    report.add(
                        kind,
                        f"{key[0]}-{key[1]} read {value} at t={op.time:.3f}s after {bound[1]}",
                    )
                _raise(known, (f, key), value, f"a read of {value} at t={op.time:.3f}s")
        elif role == "commit-done":
            for key, value in op.value["offsets"].items():
                why = f"a commit of {value} acknowledged at t={op.time:.3f}s"
                _raise(known, ("committed", key), value, why)
        elif role == "ack-done":
            key = (idem_topic, op.value["partition"])
            end = op.value["offset"] + 1
            why = f"an acks=all send acknowledged at offset {end - 1} at t={op.time:.3f}s"
            _raise(known, ("hw", key), end, why)


def _check_replicas(history: History, report: Report) -> None:
    for _inv, done in history.completions("replicas"):
        if done.type != OK:
            continue
        expected = done.value["expected"]
        for (topic, p), count in sorted(done.value["replicas"].items()):
            if count < expected:
                report.add(
                    "under-replicated",
                    f"{topic}-{p} has {count} replicas, its replication factor is {expected}",
                )


def _raise(known: dict[Any, tuple[int, str]], key: Any, value: int, why: str) -> None:
    if key not in known or value > known[key][0]:
        known[key] = (value, why)


def _trim(report: Report, limit: int) -> None:
    per: dict[str, int] = defaultdict(int)
    kept: list[Anomaly] = []
    dropped: dict[str, int] = defaultdict(int)
    for a in report.anomalies:
        per[a.kind] += 1
        if per[a.kind] <= limit:
            kept.append(a)
        else:
            dropped[a.kind] += 1
    for kind, n in dropped.items():
        kept.append(Anomaly(kind, f"... and {n} more"))
    report.anomalies = kept


def summarize(anomalies: Iterable[Anomaly]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for a in anomalies:
        out[a.kind] += 1
    return dict(out)
