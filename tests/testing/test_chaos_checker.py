"""The chaos checker on synthetic histories: each guarantee's violation is detected, and the
indeterminate (info) outcomes never prove an anomaly by themselves. Also: schedules are a pure
function of the seed."""

from __future__ import annotations

from typing import Any

from odradek.testing.chaos import History, check, generate
from odradek.testing.chaos.eos_log import EosLog
from odradek.testing.chaos.history import FAIL, INFO, OK

IDEM, TXN = "idem", "txn"


class Build:
    """A small history writer: sends, transactions, reads and the two final reads."""

    def __init__(self) -> None:
        self.h = History()
        self.seq = 0
        self.idem_final: list[tuple[int, int, str]] = []
        self.txn_final: list[tuple[int, int, str]] = []

    def send(self, partition: int, offset: int | None, outcome: str = OK, proc: str = "p") -> str:
        value = f"{proc}-{self.seq}"
        inv = self.h.invoke(
            "produce",
            proc,
            {"process": proc, "seq": self.seq, "partition": partition, "value": value},
        )
        self.seq += 1
        extra = {"offset": offset} if outcome == OK else {}
        self.h.complete(inv, outcome, extra)
        return value

    def txn(self, n: int, values: list[tuple[int, str]], decision: str, outcome: str = OK) -> None:
        inv = self.h.invoke("txn", "tx", {"txn": n, "values": values, "decision": decision})
        self.h.complete(inv, outcome)

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        inv = self.h.invoke("commit", "m", {"offsets": {}})
        self.h.complete(inv, OK, {"offsets": offsets})

    def read(self, f: str, values: dict[tuple[str, int], int]) -> None:
        field = "offsets" if f == "committed" else "hw"
        inv = self.h.invoke(f, "monitor", {field: {}})
        self.h.complete(inv, OK, {field: values})

    def poll(self, topic: str, partition: int, offset: int, value: str) -> None:
        self.h.ok(
            "poll",
            "m",
            {
                "process": "m",
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "value": value,
            },
        )

    def finish(self) -> Any:
        for topic, iso, recs in (
            (IDEM, "read_uncommitted", self.idem_final),
            (TXN, "read_committed", self.txn_final),
        ):
            inv = self.h.invoke(
                "final", "reader", {"topic": topic, "isolation": iso, "records": []}
            )
            self.h.complete(inv, OK, {"records": recs})
        return check(self.h, IDEM, TXN)


def healthy() -> Build:
    b = Build()
    a = b.send(0, 0)
    c = b.send(0, 1)
    d = b.send(1, 0)
    b.idem_final = [(0, 0, a), (0, 1, c), (1, 0, d)]
    b.txn(0, [(0, "t0-0"), (1, "t0-1")], "commit")
    b.txn(1, [(0, "t1-0")], "abort")
    b.txn_final = [(0, 0, "t0-0"), (1, 0, "t0-1")]
    b.commit({(IDEM, 0): 2})
    b.read("committed", {(IDEM, 0): 2})
    b.read("hw", {(IDEM, 0): 2, (IDEM, 1): 1})
    return b


def test_a_healthy_history_is_valid() -> None:
    report = healthy().finish()
    assert report.valid, report.anomalies


def test_a_lost_acknowledged_write_is_detected() -> None:
    b = healthy()
    b.idem_final = b.idem_final[:-1]
    assert b.finish().kinds() == {"lost"}


def test_an_acknowledged_offset_holding_another_record_is_detected() -> None:
    b = healthy()
    e = b.send(1, 1)
    b.idem_final.append((1, 2, e))  # acknowledged at 1, read at 2
    assert b.finish().kinds() == {"lost"}


def test_a_lost_committed_transaction_is_detected() -> None:
    b = healthy()
    b.txn_final = b.txn_final[:1]
    assert b.finish().kinds() == {"lost"}


def test_a_duplicate_from_the_idempotent_producer_is_detected() -> None:
    b = healthy()
    b.idem_final.append((0, 2, b.idem_final[0][2]))
    assert b.finish().kinds() == {"duplicate"}


def batches(b: Build, partition: int, rows: list[tuple[int, int, int, int, int]]) -> None:
    """The runner's record of the idempotent topic's batch headers (base, last, pid, epoch,
    base sequence) in one partition."""
    inv = b.h.invoke("batches", "observer", {"topic": IDEM})
    b.h.complete(inv, OK, {"batches": {partition: rows}})


def eos(b: Build, *events: dict[str, Any]) -> None:
    """The idempotent producer's own log of sends, answers and epoch bumps (eos_log)."""
    inv = b.h.invoke("eos", "p.0", {"topic": IDEM})
    b.h.complete(inv, OK, {"events": list(events)})


def error(seq: int, name: str, epoch: int = 0, partition: int = 2) -> dict[str, Any]:
    event = {"kind": "error", "partition": partition, "pid": 7, "epoch": epoch, "seq": seq}
    return event | {"count": 1, "error": name}


def bump(reason: str, epoch: int = 0) -> dict[str, Any]:
    return {"kind": "bump", "pid": 7, "epoch": epoch, "to": epoch + 1, "reason": reason}


TIMED_OUT = "1 message(s) timed out on idem [2]"


def resent_under_next_epoch(*events: dict[str, Any]) -> Any:
    """A record written at sequence 26 of producer 7's epoch 0 and again as sequence 0 of
    epoch 1 (its batch's answer never came, or came as the events say)."""
    b = healthy()
    v = b.send(2, 1, OK)
    b.idem_final += [(2, 0, v), (2, 1, v)]
    batches(b, 2, [(0, 0, 7, 0, 26), (1, 1, 7, 1, 0)])
    eos(b, *events)
    return b.finish()


def test_a_copy_resent_after_the_clients_own_timeout_is_known_client_behaviour() -> None:
    """librdkafka's own epoch bump (issue 4953) after its request timed out resends a possibly
    written record as sequence 0 of the next epoch, which no broker can recognise: known, the
    run stays valid, and the report counts it."""
    report = resent_under_next_epoch(error(26, "_TIMED_OUT"), bump(TIMED_OUT))
    assert report.valid, report.anomalies
    assert [a.kind for a in report.known] == ["epoch-bump duplicate"]
    assert report.stats["known"] == 1
    assert TIMED_OUT in report.known[0].detail


def test_a_bump_after_answers_kafka_gives_is_known_client_behaviour() -> None:
    for events in (
        # Kafka had no state for the producer on another partition: UNKNOWN_PRODUCER_ID
        (
            error(26, "_TIMED_OUT"),
            error(3, "UNKNOWN_PRODUCER_ID", partition=0),
            bump("unknown producer id"),
        ),
        # the batch after next was refused: the one between (sequence 27) is not in the log
        (
            error(26, "_TIMED_OUT"),
            error(28, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
            bump("skipped sequence numbers"),
        ),
    ):
        report = resent_under_next_epoch(*events)
        assert report.valid, (events, report.anomalies)
        assert report.stats["known"] == 1


def test_a_bump_after_the_broker_refused_a_batch_it_had_written_is_a_duplicate() -> None:
    """OUT_OF_ORDER_SEQUENCE_NUMBER where Kafka deduplicates (a resend of a batch in the log)
    or where Kafka appends (the batch right after one in the log): the broker's doing."""
    for events in (
        (error(26, "OUT_OF_ORDER_SEQUENCE_NUMBER"), bump("skipped sequence numbers")),
        (error(26, "UNKNOWN_PRODUCER_ID"), bump("unknown producer id")),
        (error(26, "OUT_OF_ORDER_SEQUENCE_NUMBER"), bump(TIMED_OUT)),
        (
            error(26, "_TIMED_OUT"),
            error(27, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
            bump("skipped sequence numbers"),
        ),
    ):
        report = resent_under_next_epoch(*events)
        assert report.kinds() == {"duplicate"}, events
        assert not report.known and report.stats["known"] == 0


def test_a_bump_without_its_cause_is_a_duplicate() -> None:
    for events in (
        (),  # no producer log: nothing shows the client bumped on its own
        (error(26, "_TIMED_OUT"),),  # no bump recorded
        (error(26, "_TIMED_OUT"), bump("unknown producer id")),  # no such answer
        (error(26, "_TIMED_OUT"), bump("skipped sequence numbers")),  # no such answer
        (error(26, "_TIMED_OUT"), bump("a reason librdkafka never gives")),
        (error(26, "_TIMED_OUT"), bump(TIMED_OUT, epoch=1)),  # a later epoch's bump
    ):
        report = resent_under_next_epoch(*events)
        assert report.kinds() == {"duplicate"}, events


def test_copies_within_one_epoch_or_from_two_producers_stay_duplicates() -> None:
    for rows in (
        [(0, 0, 7, 0, 26), (1, 1, 7, 0, 27)],  # one epoch: the broker had to deduplicate
        [(0, 0, 7, 0, 26), (1, 1, 8, 1, 0)],  # another producer id
        [(0, 0, 7, 1, 26), (1, 1, 7, 0, 0)],  # the later copy under an older epoch
    ):
        b = healthy()
        v = b.send(2, 1, OK)
        b.idem_final += [(2, 0, v), (2, 1, v)]
        batches(b, 2, rows)
        assert b.finish().kinds() == {"duplicate"}, rows


def test_a_retried_send_of_unknown_outcome_may_appear_once_but_not_twice() -> None:
    b = healthy()
    v = b.send(2, None, INFO)
    b.idem_final.append((2, 0, v))
    assert b.finish().valid
    b.idem_final.append((2, 1, v))
    assert b.finish().kinds() == {"duplicate"}


def test_unknown_sends_may_be_missing_and_failed_ones_must_be() -> None:
    b = healthy()
    b.send(2, None, INFO)
    assert b.finish().valid
    v = b.send(2, None, FAIL)
    b.idem_final.append((2, 0, v))
    assert b.finish().kinds() == {"lost"}


def test_reordering_within_a_partition_is_detected() -> None:
    b = healthy()
    (p0, o0, first), (_, o1, second) = b.idem_final[0], b.idem_final[1]
    b.idem_final[0], b.idem_final[1] = (p0, o0, second), (p0, o1, first)
    kinds = b.finish().kinds()
    assert "order" in kinds  # (and the acknowledged offsets no longer match: lost)


def test_reordering_is_per_producer_and_per_partition() -> None:
    b = Build()
    x = b.send(0, 1, proc="a")
    y = b.send(0, 0, proc="b")  # another producer's later send lands earlier: fine
    b.idem_final = [(0, 0, y), (0, 1, x)]
    b.txn_final = []
    assert b.finish().valid


def test_a_late_unknown_send_landing_out_of_order_is_detected() -> None:
    b = healthy()
    late = b.send(0, None, INFO)
    after = b.send(0, 2)
    b.idem_final += [(0, 2, after), (0, 3, late)]
    assert b.finish().kinds() == {"order"}


def test_an_aborted_transaction_seen_by_read_committed_final_read_is_detected() -> None:
    b = healthy()
    b.txn_final.append((0, 2, "t1-0"))
    assert b.finish().kinds() == {"aborted-read"}


def test_an_aborted_transaction_seen_by_a_group_member_is_detected() -> None:
    b = healthy()
    b.poll(TXN, 0, 2, "t1-0")
    assert b.finish().kinds() == {"aborted-read"}


def test_part_of_a_transaction_of_unknown_outcome_is_detected() -> None:
    b = healthy()
    b.txn(2, [(0, "t2-0"), (1, "t2-1")], "commit", INFO)
    assert b.finish().valid  # none of it: it aborted
    b.txn_final += [(0, 2, "t2-0"), (1, 2, "t2-1")]
    assert b.finish().valid  # all of it: it committed
    b.txn_final.pop()
    assert b.finish().kinds() == {"aborted-read"}


def test_a_failed_transaction_must_not_be_visible() -> None:
    b = healthy()
    b.txn(2, [(0, "t2-0")], "commit", FAIL)
    b.txn_final.append((0, 2, "t2-0"))
    assert b.finish().kinds() == {"aborted-read"}


def test_a_committed_offset_moving_back_is_detected() -> None:
    b = healthy()
    b.read("committed", {(IDEM, 0): 1})
    report = b.finish()
    assert report.kinds() == {"offset-back"}
    assert "a read of 2" in report.anomalies[0].detail or "commit of 2" in str(report.anomalies)


def test_a_committed_offset_below_an_acknowledged_commit_is_detected() -> None:
    b = Build()
    b.commit({(IDEM, 0): 5})
    b.read("committed", {(IDEM, 0): 3})
    assert b.finish().kinds() == {"offset-back"}


def test_a_read_concurrent_with_a_commit_may_see_either_value() -> None:
    b = Build()
    b.commit({(IDEM, 0): 3})
    read = b.h.invoke("committed", "monitor", {"offsets": {}})
    commit = b.h.invoke("commit", "m", {"offsets": {}})
    b.h.complete(commit, OK, {"offsets": {(IDEM, 0): 5}})
    b.h.complete(read, OK, {"offsets": {(IDEM, 0): 3}})  # began before the commit's ack
    assert b.finish().valid
    b.read("committed", {(IDEM, 0): 3})  # began after it: must see 5
    assert b.finish().kinds() == {"offset-back"}


def test_a_high_watermark_moving_back_is_detected() -> None:
    b = healthy()
    b.read("hw", {(IDEM, 1): 0})
    assert b.finish().kinds() == {"hw-back"}


def test_a_high_watermark_behind_an_acknowledged_send_is_detected() -> None:
    b = Build()
    b.send(0, 7)
    b.read("hw", {(IDEM, 0): 7})  # acks=all at offset 7: the high watermark is past it
    b.idem_final = [(0, 7, "p-0")]
    assert b.finish().kinds() == {"hw-back"}


def test_a_missing_final_read_is_reported() -> None:
    b = healthy()
    h = b.h
    assert check(h, IDEM, TXN).kinds() == {"unavailable"}


def test_schedules_are_a_function_of_the_seed() -> None:
    assert generate(5) == generate(5)
    assert generate(5) != generate(6)
    for seed in range(30):
        s = generate(seed, duration=4.0, kinds=("kill", "pause"))
        assert s.faults and {f.kind for f in s.faults} <= {"kill", "pause"}
        assert all(f.at + f.duration <= 4.0 for f in s.faults)
        for i, a in enumerate(s.faults):
            during = [b for b in s.faults[i + 1 :] if b.at < a.at + a.duration]
            assert len(during) <= 1  # at most two faults at once, on two brokers
            assert all(b.node != a.node for b in during)
    assert any(
        b.at < a.at + a.duration
        for seed in range(30)
        for a, b in zip(generate(seed).faults, generate(seed).faults[1:], strict=False)
    )  # overlaps happen
    assert "seed 11" in str(generate(11))


def test_a_partition_with_fewer_replicas_than_its_replication_factor_is_detected() -> None:
    b = healthy()
    inv = b.h.invoke("replicas", "observer", {"expected": 3, "replicas": {}})
    b.h.complete(inv, OK, {"replicas": {("t", 0): 3, ("__transaction_state", 1): 2}})
    report = b.finish()
    assert report.kinds() == {"under-replicated"}
    assert "__transaction_state-1" in report.anomalies[0].detail


def test_an_acknowledgement_without_an_offset_still_counts_as_acknowledged() -> None:
    b = healthy()
    v = b.send(2, None, OK)  # librdkafka reports no offset
    assert b.finish().kinds() == {"lost"}
    b.idem_final.append((2, 0, v))
    assert b.finish().valid


def test_the_producers_log_is_read_into_sends_answers_and_bumps() -> None:
    """Lines as librdkafka 2.x writes them with debug=eos,msg (from a run against odradek)."""
    log = EosLog("t")
    b = "127.0.0.1:55373/0: "
    for fac, text in (
        (
            "PRODUCE",
            b + "t [0]: Produce MessageSet with 9 message(s) (900168 bytes, ApiVersion "
            "10, MsgVersion 2, MsgId 162, BaseSeq 0, PID{Id:0,Epoch:1}, uncompressed)",
        ),
        (
            "PRODUCE",
            b + "other [0]: Produce MessageSet with 1 message(s) (100 bytes, ApiVersion "
            "10, MsgVersion 2, MsgId 1, BaseSeq 0, PID{Id:0,Epoch:1}, uncompressed)",
        ),
        (
            "MSGSET",
            b + "t [0]: MessageSet with 9 message(s) (MsgId 162, BaseSeq 0) encountered "
            "error: Local: Timed out (actions Retry,MsgPossiblyPersisted)",
        ),
        (
            "MSGSET",
            b + "t [0]: MessageSet with 9 message(s) (MsgId 162, BaseSeq 0) encountered "
            "error: Broker: Broker received an out of order sequence number (actions Permanent)",
        ),
        (
            "DRAIN",
            "Beginning partition drain in state Assigned for PID{Id:0,Epoch:1} epoch bump "
            "for 0 partition(s) with in-flight requests: 1 message(s) timed out on t [0]",
        ),
        ("DRAIN", "All partitions drained, bumped epoch to PID{Id:0,Epoch:2}"),
    ):
        log.log(7, "%s [%s] %s", fac, "rdkafka#producer-1", text)
    sent = {"kind": "send", "partition": 0, "pid": 0, "epoch": 1, "seq": 0, "count": 9}
    failed = {**sent, "kind": "error"}
    assert log.snapshot() == [
        sent,
        {**failed, "error": "_TIMED_OUT"},
        {**failed, "error": "OUT_OF_ORDER_SEQUENCE_NUMBER"},
        {
            "kind": "bump",
            "pid": 0,
            "epoch": 1,
            "to": 2,
            "reason": "1 message(s) timed out on t [0]",
        },
    ]
