"""The history of a chaos run, Jepsen-style: every client operation is recorded when it is
invoked and again when its outcome is known.

An operation's outcome is `ok` (it happened), `fail` (it certainly did not happen) or `info`
(unknown: a timeout, a lost connection; it may or may not have taken effect, now or later).
The checker (`odradek.testing.chaos.checker`) reads a finished history; nothing here judges.

Operation kinds (`f`) and their values:

    produce   idempotent send     invoke {"process", "seq", "partition", "value"}
                                  ok adds {"offset"}
    txn       transaction         invoke {"process", "values": [(partition, value)...],
                                  "decision": "commit" | "abort"}; ok = that decision took effect
    fatal     transactional       ok {"transactional_id", "reason"}, error: the fatal error's
              producer replaced   name (a new producer takes the same transactional.id)
    poll      group consumer      ok {"process", "topic", "partition", "offset", "value"}
    commit    offset commit       invoke/ok {"offsets": {(topic, partition): offset}}
    committed monitor read        ok {"offsets": {(topic, partition): offset}}
    hw        monitor read        ok {"hw": {(topic, partition): high watermark}}
    final     the read after the faults, per topic and isolation level
                                  ok {"topic", "isolation", "records": [(partition, offset, value)]}
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


@dataclass(slots=True)
class Op:
    """One history entry. `index` orders entries; `time` is monotonic seconds since start."""

    index: int
    type: str
    f: str
    process: str
    value: dict[str, Any]
    time: float
    invoke: int = -1  # for a completion, the index of its invoke entry
    error: str = ""


@dataclass
class History:
    """A thread-safe, append-only list of `Op`s."""

    ops: list[Op] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _append(
        self, type_: str, f: str, process: str, value: dict[str, Any], invoke: int, error: str
    ) -> Op:
        with self._lock:
            op = Op(
                len(self.ops),
                type_,
                f,
                process,
                value,
                time.monotonic() - self.started,
                invoke,
                error,
            )
            self.ops.append(op)
            return op

    def invoke(self, f: str, process: str, value: dict[str, Any]) -> Op:
        return self._append(INVOKE, f, process, value, -1, "")

    def complete(
        self, inv: Op, type_: str, value: dict[str, Any] | None = None, error: str = ""
    ) -> Op:
        """Record the outcome of `inv`; `value` is merged over the invoke's value."""
        assert type_ in (OK, FAIL, INFO)
        merged = {**inv.value, **(value or {})}
        return self._append(type_, inv.f, inv.process, merged, inv.index, error)

    def ok(self, f: str, process: str, value: dict[str, Any]) -> Op:
        """An operation observed only when it succeeded (a consumed record)."""
        inv = self.invoke(f, process, value)
        return self.complete(inv, OK)

    def completions(self, f: str) -> list[tuple[Op, Op]]:
        """(invoke, completion) pairs of kind `f`; invokes never completed count as info."""
        with self._lock:
            ops = list(self.ops)
        done: dict[int, Op] = {op.invoke: op for op in ops if op.type != INVOKE}
        out = []
        for op in ops:
            if op.type == INVOKE and op.f == f:
                comp = done.get(op.index)
                if comp is None:
                    never = float("inf")
                    comp = Op(-1, INFO, f, op.process, op.value, never, op.index, "no outcome")
                out.append((op, comp))
        return out

    def counts(self) -> dict[str, int]:
        """Completions by type, for summaries."""
        with self._lock:
            ops = list(self.ops)
        out = {OK: 0, FAIL: 0, INFO: 0}
        for op in ops:
            if op.type != INVOKE:
                out[op.type] += 1
        return out
