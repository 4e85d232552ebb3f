"""Delayed transaction messages (KAFKA-17754, Jepsen's Bufstream 0.1.0 analysis): what odradek
and Apache Kafka 4.4 do when a request of a producer's transaction T1 reaches the broker only
after the producer ended T1 and began T2, as raw requests, so that the "delay" is deterministic:
the stale request is sent by hand at the moment the delayed copy would have arrived (its retry,
on another connection, having already been answered).

Two protocols, on brokers that finalized transaction.version 2 (both fixtures do):

- transactions v1 (librdkafka, Java before 4.0): AddPartitionsToTxn v3, Produce v9, EndTxn v3.
  The producer keeps its epoch from one transaction to the next, so a stale EndTxn or Produce
  of T1 carries exactly what one of T2 would.
- transactions v2 (KIP-890 part 2, the Java 4.x producer): Produce v12 adds its partitions
  itself (no AddPartitionsToTxn from the client), EndTxn v5 bumps the epoch on every
  transaction and answers the epoch of the next one (sequences start again at 0).

Scenarios, each on a fresh topic of two partitions (p0, p1) and a fresh transactional id:

- a: T1 wrote "t1" to p0 and committed; T2 wrote "t2" to p0; T1's commit arrives again; the
  producer then commits T2.
- a+: as a, then the producer goes on with T2 on p1 ("t2-b") and aborts it (its own choice).
- b: T1 wrote "t1" to p0 and aborted; T2 wrote "t2" to p0; T1's abort arrives again; the
  producer then commits T2.
- b+: as b, then T2 goes on with p1 ("t2-b") and the producer commits.
- c-in: T1 wrote "t1" to p0 and committed; T2 wrote "t2" to p0; T1's Produce (same id, epoch
  and sequence) arrives again.
- c-out: the same, T2 on p1 only (KIP-890 part 1 verification: p0 is not in T2).
- c-lost: T1's Produce of "t1" to p0 is delayed (its only copy; T1 wrote "t1-b" to p1) and the
  producer aborts T1; T2 adds p0 (v2: writes to p1 only) and the delayed "t1" arrives.

Each scenario records every answer (error codes; produce offsets; EndTxn v5's epoch step) and
reads every partition at the moments that matter with raw Fetch requests (read_committed with
the aborted-transactions index applied as the Java consumer does, and read_uncommitted), with
the high watermark and last stable offset (fetching on from the last batch, as a fetch answers
from one segment only). After each EndTxn the scenario waits until DescribeTransactions no
longer shows PrepareCommit/PrepareAbort (the markers are written), so the reads do not depend
on timing. docs/jepsen.md ("Delayed transaction messages")
has the table of what each broker does.
"""

from __future__ import annotations

import functools
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from compat_tests.reference.raw_requests import send, until_settled
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS, NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
# UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS (a v2 produce while the last markers go out)
RETRY = (14, 15, 16, 51, 6, 5, 3, 19)
PENDING = ("PrepareCommit", "PrepareAbort")


def _name(code: int) -> str:
    return ErrorCode(code).name


def _until(call: Callable[[], Any], error: Callable[[Any], int]) -> Any:
    return until_settled(call, error, RETRY)


@dataclass(slots=True)
class Producer:
    """A transactional producer as raw requests: transactions v1 or v2."""

    bootstrap: str
    topic: str
    txn: str
    v2: bool
    pid: int = -1
    epoch: int = -1
    seq: dict[int, int] = field(default_factory=dict)  # partition -> next sequence
    added: set[int] = field(default_factory=set)  # partitions of the current transaction

    def init(self) -> None:
        key = {"key": self.txn, "key_type": 1}
        found = _until(
            lambda: send(self.bootstrap, protocol._REQUESTS[10], key, 2), lambda r: r.error_code
        )
        assert found.error_code == 0, found
        spec = {"transactional_id": self.txn, "transaction_timeout_ms": 60_000}
        init = _until(
            lambda: send(self.bootstrap, protocol._REQUESTS[22], spec, 3), lambda r: r.error_code
        )
        assert init.error_code == 0, init
        self.pid, self.epoch = init.producer_id, init.producer_epoch

    def add(self, partition: int) -> str:
        """AddPartitionsToTxn v3 (v1 only: a v2 producer's Produce adds the partition)."""
        assert not self.v2
        self.added.add(partition)
        spec = {
            "v3_and_below_transactional_id": self.txn,
            "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": self.topic, "partitions": [partition]}],
        }

        def error(resp: Any) -> int:
            return int(
                resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            )

        return _name(
            error(_until(lambda: send(self.bootstrap, protocol._REQUESTS[24], spec, 3), error))
        )

    def batch(self, partition: int, value: str) -> dict[str, Any]:
        """The Produce request of one record with the partition's next sequence (taken)."""
        if not self.v2 and partition not in self.added:
            self.add(partition)
        seq = self.seq.get(partition, 0)
        self.seq[partition] = seq + 1
        records = build_batch(
            [(None, value.encode(), [], int(time.time() * 1000))],
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=seq,
            transactional=True,
        )
        return {
            "transactional_id": self.txn,
            "acks": -1,
            "timeout_ms": 10_000,
            "topic_data": [
                {"name": self.topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        }

    def produce(self, request: dict[str, Any]) -> str:
        """The error and base offset of a Produce request from `batch` (sent now, or late)."""
        resp = _until(
            lambda: send(self.bootstrap, protocol._REQUESTS[0], request, 12 if self.v2 else 9),
            lambda r: r.responses[0].partition_responses[0].error_code,
        )
        part = resp.responses[0].partition_responses[0]
        offset = "" if part.base_offset < 0 else f" @{part.base_offset}"
        return f"{_name(part.error_code)}{offset}"

    def end_request(self, commit: bool) -> dict[str, Any]:
        return {
            "transactional_id": self.txn,
            "producer_id": self.pid,
            "producer_epoch": self.epoch,
            "committed": commit,
        }

    def end(self, request: dict[str, Any]) -> str:
        """EndTxn (v1: v3, its error; v2: v5, its error and the epoch step it answers, the
        producer moving to that epoch). Returns once the markers are written."""
        resp = _until(
            lambda: send(self.bootstrap, protocol._REQUESTS[26], request, 5 if self.v2 else 3),
            lambda r: r.error_code,
        )
        self.settle()
        if not self.v2 or resp.error_code != 0:
            return _name(resp.error_code)
        step = resp.producer_epoch - request["producer_epoch"]
        if request["producer_epoch"] == self.epoch:
            self.epoch, self.seq = resp.producer_epoch, {}  # the producer's own EndTxn
        return f"NONE, epoch +{step}"

    def commit(self) -> str:
        out = self.end(self.end_request(True))
        self.added.clear()
        return out

    def abort(self) -> str:
        out = self.end(self.end_request(False))
        self.added.clear()
        return out

    def settle(self) -> None:
        """Wait until the coordinator is not writing markers (no Prepare* state)."""
        deadline = time.monotonic() + 30
        while True:
            resp = send(
                self.bootstrap, protocol._REQUESTS[65], {"transactional_ids": [self.txn]}, 0
            )
            assert not isinstance(resp, str), resp
            (state,) = resp.transaction_states
            if state.error_code == 0 and state.transaction_state not in PENDING:
                return
            assert time.monotonic() < deadline, resp
            time.sleep(0.02)


_CONTROL = struct.Struct(">hh")  # a control record's key: version, type (0 abort, 1 commit)


def _fetch(bootstrap: str, topic: str, partition: int, offset: int, committed: bool) -> Any:
    spec = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 1 if committed else 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": 1 << 20,
                        "current_leader_epoch": -1,
                    }
                ],
            }
        ],
    }
    resp = send(bootstrap, protocol._REQUESTS[1], spec, 11)
    assert not isinstance(resp, str), resp
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0, part
    return part


def _visible(part: Any, out: list[tuple[int, str]]) -> int:
    """The records a consumer returns from a fetch answer, added to `out`: control batches
    dropped, and for read_committed the batches of aborted transactions (the answer's
    aborted-transactions list, applied as the Java consumer's Fetcher does). Returns the next
    offset to fetch (-1: the answer held no batch)."""
    from kafka.record import MemoryRecords

    following = -1
    aborted = sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions or [])
    aborting: set[int] = set()
    records = MemoryRecords(bytes(part.records or b""))
    while (batch := records.next_batch()) is not None:
        members = list(batch)
        last = members[-1].offset if members else batch.base_offset
        following = last + 1
        while aborted and aborted[0][0] <= last:
            aborting.add(aborted.pop(0)[1])
        if batch.is_control_batch:
            key = members[0].key if members else None
            if key is not None and _CONTROL.unpack(key[:4])[1] == 0:
                aborting.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborting:
            continue
        out.extend((r.offset, (r.value or b"").decode()) for r in members)
    return following


def _consume(
    bootstrap: str, topic: str, partition: int, committed: bool
) -> tuple[list[tuple[int, str]], int, int]:
    """Fetch from offset 0 up to the high watermark or last stable offset, as a consumer
    does (one segment per answer): what it returns, and the partition's offsets."""
    seen: list[tuple[int, str]] = []
    offset = 0
    while True:
        part = _fetch(bootstrap, topic, partition, offset, committed)
        end = part.last_stable_offset if committed else part.high_watermark
        following = _visible(part, seen) if offset < end else -1
        if following < 0:
            return seen, int(part.high_watermark), int(part.last_stable_offset)
        offset = following


def _records(records: list[tuple[int, str]]) -> str:
    return " ".join(f"{offset}:{value}" for offset, value in records) or "-"


def read(p: Producer) -> dict[str, str]:
    """Each partition written to: what read_committed and read_uncommitted consumers return
    (offset:value), the high watermark and the last stable offset."""
    out: dict[str, str] = {}
    for partition in (0, 1):
        committed, _hw, lso = _consume(p.bootstrap, p.topic, partition, True)
        uncommitted, hw, _lso = _consume(p.bootstrap, p.topic, partition, False)
        if hw == 0:
            continue  # nothing written
        out[f"p{partition}"] = (
            f"committed {_records(committed)} | uncommitted {_records(uncommitted)}"
            f" | hw {hw} lso {lso}"
        )
    return out


def producer(bootstrap: str, v2: bool) -> Producer:
    token = uuid.uuid4().hex[:8]
    topic = f"delayed_{token}"
    created = send(
        bootstrap,
        protocol._REQUESTS[19],
        {"topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}]},
        5,
    )
    assert not isinstance(created, str) and created.topics[0].error_code == 0, created
    p = Producer(bootstrap, topic, f"delayed-{token}", v2)
    p.init()
    return p


# -- the scenarios: each returns what was answered and read, step by step -----------------------


def delayed_end(p: Producer, commit: bool, more: bool) -> dict[str, object]:
    """T1's EndTxn (commit or abort) is sent twice: the first copy is delayed until T2 has
    written to p0. With `more`, T2 then writes to p1 too and ends the other way round from T1's
    delayed end when that was a commit (the torn / aborted-read shape), by committing after an
    abort (the lost-write shape)."""
    word = "commit" if commit else "abort"
    out: dict[str, object] = {}
    out["T1 produce p0"] = p.produce(p.batch(0, "t1"))
    stale = p.end_request(commit)
    out[f"T1 {word}"] = p.commit() if commit else p.abort()
    out["T2 produce p0"] = p.produce(p.batch(0, "t2"))
    out[f"T1 {word} again"] = p.end(stale)
    out["read after"] = read(p)
    if more:
        out["T2 produce p1"] = p.produce(p.batch(1, "t2-b"))
    if commit and more:
        out["T2 abort"] = p.abort()
    else:
        out["T2 commit"] = p.commit()
    out["read at end"] = read(p)
    return out


def delayed_produce(p: Producer, in_t2: bool) -> dict[str, object]:
    out: dict[str, object] = {}
    stale = p.batch(0, "t1")
    out["T1 produce p0"] = p.produce(stale)
    out["T1 commit"] = p.commit()
    out["T2 produce"] = p.produce(p.batch(0 if in_t2 else 1, "t2"))
    out["T1 produce p0 again"] = p.produce(stale)
    out["T2 commit"] = p.commit()
    out["read at end"] = read(p)
    return out


def delayed_only_produce(p: Producer) -> dict[str, object]:
    """T1's produce to p0 never arrived before T1 was aborted; it arrives in T2."""
    out: dict[str, object] = {}
    if not p.v2:
        out["T1 add p0"] = p.add(0)
    stale = p.batch(0, "t1")  # sent, then delayed
    out["T1 produce p1"] = p.produce(p.batch(1, "t1-b"))
    out["T1 abort"] = p.abort()
    if not p.v2:
        out["T2 add p0"] = p.add(0)
    out["T2 produce p1"] = p.produce(p.batch(1, "t2"))
    out["T1 produce p0 arrives"] = p.produce(stale)
    out["T2 commit"] = p.commit()
    out["read at end"] = read(p)
    return out


SCENARIOS: dict[str, Callable[[Producer], dict[str, object]]] = {
    "a": lambda p: delayed_end(p, commit=True, more=False),
    "a+": lambda p: delayed_end(p, commit=True, more=True),
    "b": lambda p: delayed_end(p, commit=False, more=False),
    "b+": lambda p: delayed_end(p, commit=False, more=True),
    "c-in": lambda p: delayed_produce(p, in_t2=True),
    "c-out": lambda p: delayed_produce(p, in_t2=False),
    "c-lost": delayed_only_produce,
}


# What both brokers answer and what readers read (Kafka 4.4 and odradek alike). v1: a delayed
# EndTxn ends T2 (a, a+: committed before its producer ends it, b, b+: aborted), a delayed
# Produce whose original was written is a duplicate (c-in), one whose only copy was delayed
# lands in T2 (c-lost). v2: every delayed message is fenced and T2 is untouched.
EXPECTED: dict[str, dict[str, object]] = {
    "v1 a": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE",
        "T2 produce p0": "NONE @2",
        "T1 commit again": "NONE",
        "read after": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
        "T2 commit": "NONE",
        "read at end": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
    },
    "v1 a+": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE",
        "T2 produce p0": "NONE @2",
        "T1 commit again": "NONE",
        "read after": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
        "T2 produce p1": "NONE @0",
        "T2 abort": "NONE",
        "read at end": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
            "p1": "committed - | uncommitted 0:t2-b | hw 2 lso 2",
        },
    },
    "v1 b": {
        "T1 produce p0": "NONE @0",
        "T1 abort": "NONE",
        "T2 produce p0": "NONE @2",
        "T1 abort again": "NONE",
        "read after": {
            "p0": "committed - | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
        "T2 commit": "INVALID_TXN_STATE",
        "read at end": {
            "p0": "committed - | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
    },
    "v1 b+": {
        "T1 produce p0": "NONE @0",
        "T1 abort": "NONE",
        "T2 produce p0": "NONE @2",
        "T1 abort again": "NONE",
        "read after": {
            "p0": "committed - | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
        "T2 produce p1": "NONE @0",
        "T2 commit": "NONE",
        "read at end": {
            "p0": "committed - | uncommitted 0:t1 2:t2 | hw 4 lso 4",
            "p1": "committed 0:t2-b | uncommitted 0:t2-b | hw 2 lso 2",
        },
    },
    "v1 c-in": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE",
        "T2 produce": "NONE @2",
        "T1 produce p0 again": "NONE @0",
        "T2 commit": "NONE",
        "read at end": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
    },
    "v1 c-out": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE",
        "T2 produce": "NONE @0",
        "T1 produce p0 again": "INVALID_TXN_STATE",
        "T2 commit": "NONE",
        "read at end": {
            "p0": "committed 0:t1 | uncommitted 0:t1 | hw 2 lso 2",
            "p1": "committed 0:t2 | uncommitted 0:t2 | hw 2 lso 2",
        },
    },
    "v1 c-lost": {
        "T1 add p0": "NONE",
        "T1 produce p1": "NONE @0",
        "T1 abort": "NONE",
        "T2 add p0": "NONE",
        "T2 produce p1": "NONE @2",
        "T1 produce p0 arrives": "NONE @1",
        "T2 commit": "NONE",
        "read at end": {
            "p0": "committed 1:t1 | uncommitted 1:t1 | hw 3 lso 3",
            "p1": "committed 2:t2 | uncommitted 0:t1-b 2:t2 | hw 4 lso 4",
        },
    },
    "v2 a": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE, epoch +1",
        "T2 produce p0": "NONE @2",
        "T1 commit again": "PRODUCER_FENCED",
        "read after": {
            "p0": "committed 0:t1 | uncommitted 0:t1 2:t2 | hw 3 lso 2",
        },
        "T2 commit": "NONE, epoch +1",
        "read at end": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
    },
    "v2 a+": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE, epoch +1",
        "T2 produce p0": "NONE @2",
        "T1 commit again": "PRODUCER_FENCED",
        "read after": {
            "p0": "committed 0:t1 | uncommitted 0:t1 2:t2 | hw 3 lso 2",
        },
        "T2 produce p1": "NONE @0",
        "T2 abort": "NONE, epoch +1",
        "read at end": {
            "p0": "committed 0:t1 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
            "p1": "committed - | uncommitted 0:t2-b | hw 2 lso 2",
        },
    },
    "v2 b": {
        "T1 produce p0": "NONE @0",
        "T1 abort": "NONE, epoch +1",
        "T2 produce p0": "NONE @2",
        "T1 abort again": "PRODUCER_FENCED",
        "read after": {
            "p0": "committed - | uncommitted 0:t1 2:t2 | hw 3 lso 2",
        },
        "T2 commit": "NONE, epoch +1",
        "read at end": {
            "p0": "committed 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
    },
    "v2 b+": {
        "T1 produce p0": "NONE @0",
        "T1 abort": "NONE, epoch +1",
        "T2 produce p0": "NONE @2",
        "T1 abort again": "PRODUCER_FENCED",
        "read after": {
            "p0": "committed - | uncommitted 0:t1 2:t2 | hw 3 lso 2",
        },
        "T2 produce p1": "NONE @0",
        "T2 commit": "NONE, epoch +1",
        "read at end": {
            "p0": "committed 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
            "p1": "committed 0:t2-b | uncommitted 0:t2-b | hw 2 lso 2",
        },
    },
    "v2 c-in": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE, epoch +1",
        "T2 produce": "NONE @2",
        "T1 produce p0 again": "INVALID_PRODUCER_EPOCH",
        "T2 commit": "NONE, epoch +1",
        "read at end": {
            "p0": "committed 0:t1 2:t2 | uncommitted 0:t1 2:t2 | hw 4 lso 4",
        },
    },
    "v2 c-out": {
        "T1 produce p0": "NONE @0",
        "T1 commit": "NONE, epoch +1",
        "T2 produce": "NONE @0",
        "T1 produce p0 again": "INVALID_PRODUCER_EPOCH",
        "T2 commit": "NONE, epoch +1",
        "read at end": {
            "p0": "committed 0:t1 | uncommitted 0:t1 | hw 2 lso 2",
            "p1": "committed 0:t2 | uncommitted 0:t2 | hw 2 lso 2",
        },
    },
    "v2 c-lost": {
        "T1 produce p1": "NONE @0",
        "T1 abort": "NONE, epoch +1",
        "T2 produce p1": "NONE @2",
        "T1 produce p0 arrives": "INVALID_PRODUCER_EPOCH",
        "T2 commit": "NONE, epoch +1",
        "read at end": {
            "p1": "committed 2:t2 | uncommitted 0:t1-b 2:t2 | hw 4 lso 4",
        },
    },
}


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_delayed_transaction_message(either_broker: str, v2: bool, name: str) -> None:
    observed = SCENARIOS[name](producer(either_broker, v2))
    assert observed == EXPECTED[f"{'v2' if v2 else 'v1'} {name}"]


def test_produce_outside_the_transaction_by_version(either_broker: str) -> None:
    """KIP-890 part 1's refusal of a partition the ongoing transaction does not have (never
    added), by Produce version: Kafka 4.4 answers TRANSACTION_ABORTABLE from v11 on."""
    p = producer(either_broker, False)
    p.added.add(0)  # as if added: no AddPartitionsToTxn
    answers = {}
    for version in (3, 9, 10, 11):
        request = p.batch(0, "x")
        p.seq[0] = 0
        resp = _until(
            functools.partial(send, either_broker, protocol._REQUESTS[0], request, version),
            lambda r: r.responses[0].partition_responses[0].error_code,
        )
        answers[version] = _name(resp.responses[0].partition_responses[0].error_code)
    assert answers == {
        3: "INVALID_TXN_STATE",
        9: "INVALID_TXN_STATE",
        10: "INVALID_TXN_STATE",
        11: "TRANSACTION_ABORTABLE",
    }
