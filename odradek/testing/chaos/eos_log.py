"""What an idempotent librdkafka producer sent, what the brokers answered, and why it bumped its
epoch: read from its own debug log (`debug=eos,msg`), for the checker's epoch-bump judgement.

librdkafka bumps an idempotent producer's epoch itself (KIP-360) and resends what it had not
seen acknowledged as sequence 0 of the new epoch; no broker can recognise such a resend. Whether
the resulting copy is the client's doing or the broker's depends on what made it bump: its own
timeout, or an answer. This recorder keeps, in order:

    send   {"partition", "pid", "epoch", "seq", "count"}     a ProduceRequest's batch
    error  {"partition", "pid", "epoch", "seq", "count", "error"}
                                                              its failure: a broker's error code
                                                              or a local one (_TIMED_OUT, ...)
    bump   {"pid", "epoch", "to", "reason"}                   librdkafka's drain-and-bump

The lines parsed (librdkafka 2.x, rdkafka_msgset_writer.c, rdkafka_request.c and
rdkafka_idempotence.c):

    PRODUCE  <broker>: <topic> [<p>]: Produce MessageSet with <n> message(s) (..., BaseSeq <s>,
             PID{Id:<pid>,Epoch:<e>}, ...)
    MSGSET   <broker>: <topic> [<p>]: MessageSet with <n> message(s) (MsgId <m>, BaseSeq <s>)
             encountered error: <rd_kafka_err2str> (actions <...>)
    DRAIN    Beginning partition drain in state <st> for PID{Id:<pid>,Epoch:<e>} epoch bump for
             <k> partition(s) with in-flight requests: <reason>
    DRAIN    All partitions drained, bumped epoch to PID{Id:<pid>,Epoch:<e>}
"""

from __future__ import annotations

import re
import threading
from typing import Any

from confluent_kafka import KafkaError

DEBUG = "eos,msg"  # librdkafka debug contexts holding the lines below

_SEND = re.compile(
    r"(?P<topic>\S+) \[(?P<p>\d+)\]: Produce MessageSet with (?P<n>\d+) message\(s\) "
    r"\(.*BaseSeq (?P<seq>-?\d+), PID\{Id:(?P<pid>\d+),Epoch:(?P<epoch>\d+)\}"
)
_ERROR = re.compile(
    r"(?P<topic>\S+) \[(?P<p>\d+)\]: MessageSet with (?P<n>\d+) message\(s\) "
    r"\(MsgId \d+, BaseSeq (?P<seq>-?\d+)\) encountered error: (?P<err>.*) \(actions .*\)"
)
_BUMPING = re.compile(
    r"for PID\{Id:(?P<pid>\d+),Epoch:(?P<epoch>\d+)\} epoch bump for \d+ partition\(s\) "
    r"with in-flight requests: (?P<reason>.*)$"
)
_BUMPED = re.compile(r"bumped epoch to PID\{Id:(?P<pid>\d+),Epoch:(?P<epoch>\d+)\}")


def _error_names() -> dict[str, str]:
    """rd_kafka_err2str text -> error name ("Broker: Unknown Producer Id" -> UNKNOWN_...)."""
    out: dict[str, str] = {}
    for attr in dir(KafkaError):
        code = getattr(KafkaError, attr)
        if attr.isupper() or attr.startswith("_") and attr[1:].isupper():
            if isinstance(code, int):
                try:
                    err = KafkaError(code)
                except (TypeError, ValueError):
                    continue
                out.setdefault(err.str(), err.name())
    return out


_NAMES = _error_names()


class EosLog:
    """A confluent-kafka `logger` for one producer of `topic`: keeps the events above."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._epochs: dict[tuple[int, int], tuple[int, int]] = {}  # (p, seq) -> (pid, epoch)
        self._bumping: dict[str, Any] | None = None

    def log(self, level: int, fmt: str, *args: Any) -> None:
        """librdkafka's log line, as confluent-kafka hands it to a logger: (fac, name, text)."""
        if len(args) != 3:
            return
        fac, _name, text = (str(a) for a in args)
        with self._lock:
            self._line(fac, text)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def _line(self, fac: str, text: str) -> None:
        if fac == "PRODUCE":
            m = _SEND.search(text)
            if m and m["topic"] == self.topic:
                p, seq, pid, epoch = int(m["p"]), int(m["seq"]), int(m["pid"]), int(m["epoch"])
                self._epochs[(p, seq)] = (pid, epoch)
                self.events.append(
                    {"kind": "send", "partition": p, "pid": pid, "epoch": epoch, "seq": seq}
                    | {"count": int(m["n"])}
                )
        elif fac == "MSGSET":
            m = _ERROR.search(text)
            if m and m["topic"] == self.topic:
                p, seq = int(m["p"]), int(m["seq"])
                pid, epoch = self._epochs.get((p, seq), (-1, -1))
                error = _NAMES.get(m["err"], m["err"])
                self.events.append(
                    {"kind": "error", "partition": p, "pid": pid, "epoch": epoch, "seq": seq}
                    | {"count": int(m["n"]), "error": error}
                )
        elif fac == "DRAIN":
            m = _BUMPING.search(text)
            if m:
                self._bumping = {"pid": int(m["pid"]), "epoch": int(m["epoch"])}
                self._bumping["reason"] = m["reason"]
                return
            m = _BUMPED.search(text)
            if m:
                before = self._bumping or {"pid": int(m["pid"]), "epoch": -1, "reason": ""}
                self._bumping = None
                self.events.append(
                    {"kind": "bump", "pid": int(m["pid"]), "epoch": before["epoch"]}
                    | {"to": int(m["epoch"]), "reason": before["reason"]}
                )
