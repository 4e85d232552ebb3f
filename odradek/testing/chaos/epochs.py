"""Is a record written under two epochs of one producer id the client's doing or the broker's?

librdkafka bumps an idempotent producer's epoch itself (KIP-360) and resends what it had not
seen acknowledged as sequence 0 of the new epoch, which no broker can recognise as a resend
(librdkafka issue 4953). Such a copy is known client behaviour only when the bump followed what
Kafka would also have given the client, from the producer's own log (`eos_log`):

- "<n> message(s) timed out on <topic> [<p>]": no answer in time (a request lost with its
  connection, a broker paused or cut off). Kafka cannot answer through a cut either.
- "unknown producer id": an UNKNOWN_PRODUCER_ID answer (Kafka: no state for the producer id on
  that partition, KIP-360).
- "skipped sequence numbers": OUT_OF_ORDER_SEQUENCE_NUMBER for a batch X after an earlier
  request failed. Kafka answers that only when the batch before X is missing: if the batch
  ending at X's sequence - 1 is in the log under the same epoch, Kafka would have appended X.
- "message sequence gap": a permanent error answer made a gap in the sequence.

Whatever the reason, a sequence error (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID) for the
very batch holding the first copy means the broker refused a batch it had written: Kafka
deduplicates a resend of any of a producer's last five batches (ProducerStateEntry) and answers
it with the original offset. Either way the copy is the broker's: an anomaly.

A duplicate without the producer's log, or whose bump has another reason, is an anomaly too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SEQUENCE_ERRORS = frozenset({"OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID"})
DEDUP_WINDOW = 5  # batches per producer whose resends Kafka recognises (ProducerStateEntry)
_TIMED_OUT = re.compile(r"^\d+ message\(s\) timed out on ")

Event = dict[str, Any]


@dataclass(slots=True, frozen=True)
class Batch:
    """A batch header of the final log: offsets, producer id, epoch and sequences."""

    partition: int
    base: int
    last: int
    pid: int
    epoch: int
    seq: int

    @property
    def last_seq(self) -> int:
        return self.seq + self.last - self.base


@dataclass(slots=True, frozen=True)
class Verdict:
    known: bool
    why: str


def judge(first: Batch, events: list[Event], log: Iterable[Batch]) -> Verdict:
    """Why the producer resent the record of `first` (its copy under the older epoch) under a
    later epoch: `events` are the producer's own (`eos_log`), `log` the partitions' batches."""
    mine = [e for e in events if e.get("pid") == first.pid]
    bump_at = next(
        (i for i, e in enumerate(mine) if e["kind"] == "bump" and e["epoch"] == first.epoch),
        None,
    )
    if bump_at is None:
        return Verdict(False, f"no epoch bump of producer {first.pid} from {first.epoch} recorded")
    bump = mine[bump_at]
    answers = [e for e in mine[:bump_at] if e["kind"] == "error" and e["epoch"] == first.epoch]
    said = f"bump to epoch {bump['to']} after {bump['reason']!r}, answers {_names(answers)}"
    same_epoch = [b for b in log if b.pid == first.pid and b.epoch == first.epoch]
    for e in answers:
        if (
            e["error"] in SEQUENCE_ERRORS
            and e["partition"] == first.partition
            and e["seq"] == first.seq
            and _recent(first, same_epoch)
        ):
            return Verdict(
                False,
                f"{e['error']} for the batch it had written (base sequence {first.seq}): "
                f"Kafka deduplicates; {said}",
            )
    reason = bump["reason"]
    if _TIMED_OUT.match(reason):
        return Verdict(True, said)
    if reason == "unknown producer id":
        ok = any(e["error"] == "UNKNOWN_PRODUCER_ID" for e in answers)
        return Verdict(ok, said if ok else f"no UNKNOWN_PRODUCER_ID answer: {said}")
    if reason == "skipped sequence numbers":
        return _skipped(answers, same_epoch, said)
    if reason == "message sequence gap":
        ok = any(not e["error"].startswith("_") for e in answers)
        return Verdict(ok, said if ok else f"no broker error answer: {said}")
    return Verdict(False, f"unexplained reason: {said}")


def _skipped(answers: list[Event], same_epoch: list[Batch], said: str) -> Verdict:
    """OUT_OF_ORDER_SEQUENCE_NUMBER for X is Kafka's answer only when X's predecessor is missing."""
    gaps = [e for e in answers if e["error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"]
    if not gaps:
        return Verdict(False, f"no OUT_OF_ORDER_SEQUENCE_NUMBER answer: {said}")
    for e in gaps:
        before = [
            b for b in same_epoch if b.partition == e["partition"] and b.last_seq == e["seq"] - 1
        ]
        if before:
            return Verdict(
                False,
                f"OUT_OF_ORDER_SEQUENCE_NUMBER for base sequence {e['seq']} in partition "
                f"{e['partition']}, whose preceding batch is in the log: Kafka appends it; {said}",
            )
    return Verdict(True, said)


def _recent(first: Batch, same_epoch: list[Batch]) -> bool:
    """`first` is among the last DEDUP_WINDOW batches of its producer epoch in its partition."""
    later = [b for b in same_epoch if b.partition == first.partition and b.seq > first.seq]
    return len(later) < DEDUP_WINDOW


def _names(answers: list[Event]) -> str:
    if not answers:
        return "none"
    return ", ".join(f"{e['error']} (p{e['partition']} seq {e['seq']})" for e in answers)
