"""Share-partition state (KIP-932): acquisition, acknowledgement, locks, delivery counts, the
start offset, the persisted form and the simple assignor."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator

from odradek.coordinator.share import records as rec
from odradek.coordinator.share.group import ShareGroup, ShareMember, simple_assign
from odradek.coordinator.share.state import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    INVALID_RECORD_STATE,
    REJECT,
    RELEASE,
    Acquired,
    SharePartition,
    StateBatch,
)

LOG = [(0, 4, False, 100), (5, 9, False, 100)]  # two batches of five records, 100 bytes each


def test_acquire_gives_each_record_to_one_member() -> None:
    sp = SharePartition(0, lock_ms=1000)
    assert sp.acquire("a", LOG, 3, now_ms=0, record_limit=True) == [Acquired(0, 2, 1)]
    assert sp.acquire("b", LOG, 100, now_ms=0, record_limit=True) == [Acquired(3, 9, 1)]
    assert sp.acquire("c", LOG, 100, now_ms=0, record_limit=True) == []
    assert sp.start_offset == 0 and sp.end_offset == 10 and sp.in_flight() == 10


def test_accept_moves_the_start_offset() -> None:
    sp = SharePartition(0)
    sp.acquire("a", LOG, 10, 0, record_limit=True)
    assert sp.acknowledge("a", 0, 3, [ACCEPT]) == 0
    assert sp.start_offset == 4
    assert sp.acknowledge("a", 5, 9, [ACCEPT]) == 0
    assert sp.start_offset == 4  # offset 4 still in flight
    assert sp.acknowledge("a", 4, 4, [ACCEPT]) == 0
    assert sp.start_offset == 10 and sp.records == {}


def test_release_redelivers_with_a_higher_count_reject_does_not() -> None:
    sp = SharePartition(0)
    sp.acquire("a", LOG, 10, 0, record_limit=True)
    assert sp.acknowledge("a", 0, 4, [RELEASE, REJECT, ACCEPT, RELEASE, GAP]) == 0
    assert sp.acquire("b", LOG, 10, 0, record_limit=True) == [Acquired(0, 0, 2), Acquired(3, 3, 2)]
    assert sp.records[1].state == ARCHIVED and sp.start_offset == 0


def test_only_the_holder_may_acknowledge_and_all_or_nothing() -> None:
    sp = SharePartition(0)
    sp.acquire("a", LOG, 5, 0, record_limit=True)
    assert sp.acknowledge("b", 0, 0, [ACCEPT]) == INVALID_RECORD_STATE
    assert sp.acknowledge("a", 3, 6, [ACCEPT]) == INVALID_RECORD_STATE  # 5, 6 not acquired
    assert sp.records[3].state != ACKNOWLEDGED
    assert sp.acknowledge("a", 0, 0, [ACCEPT]) == 0
    assert sp.acknowledge("a", 0, 0, [ACCEPT]) != 0  # not twice


def test_lock_expiry_and_member_release() -> None:
    sp = SharePartition(0, lock_ms=100)
    sp.acquire("a", LOG, 2, now_ms=0, record_limit=True)
    sp.acquire("b", LOG, 2, now_ms=50, record_limit=True)
    assert sp.next_deadline() == 100
    assert sp.expire(99) == 0
    assert sp.expire(100) == 2
    assert sp.acquire("c", LOG, 2, now_ms=100, record_limit=True) == [Acquired(0, 1, 2)]
    assert sp.release_member("b") == 2
    assert sp.acquire("c", LOG, 10, now_ms=100, record_limit=True) == [
        Acquired(2, 3, 2),
        Acquired(4, 9, 1),
    ]


def test_delivery_count_limit_archives() -> None:
    sp = SharePartition(0, lock_ms=10, delivery_limit=2)
    sp.acquire("a", LOG, 1, 0, record_limit=True)
    sp.acknowledge("a", 0, 0, [RELEASE])
    assert sp.acquire("a", LOG, 1, 0, record_limit=True) == [Acquired(0, 0, 2)]
    sp.expire(1000)
    assert sp.start_offset == 1  # archived after its second delivery
    assert sp.acquire("a", LOG, 1, 2000, record_limit=True) == [Acquired(1, 1, 1)]


def test_control_records_are_archived_not_delivered() -> None:
    sp = SharePartition(0)
    got = sp.acquire(
        "a", [(0, 1, False, 80), (2, 2, True, 70), (3, 3, False, 70)], 10, 0, record_limit=True
    )
    assert got == [Acquired(0, 1, 1), Acquired(3, 3, 1)]
    sp.acknowledge("a", 0, 1, [ACCEPT])
    assert sp.start_offset == 3


def test_state_batches_round_trip_through_the_records() -> None:
    sp = SharePartition(0)
    sp.acquire("a", LOG, 10, 0, record_limit=True)
    sp.acknowledge("a", 1, 2, [ACCEPT])
    sp.acknowledge("a", 3, 3, [REJECT])
    sp.acknowledge("a", 4, 4, [RELEASE])
    batches = sp.state_batches()
    assert batches == [
        StateBatch(0, 0, AVAILABLE, 1),  # acquired is persisted as available
        StateBatch(1, 2, ACKNOWLEDGED, 1),
        StateBatch(3, 3, ARCHIVED, 1),
        StateBatch(4, 9, AVAILABLE, 1),
    ]
    key = rec.ShareKey("g", uuid.uuid4(), 3)
    value = rec.ShareValue(7, 1, 0, sp.start_offset, tuple(batches), 1000, 2000)
    assert rec.decode_key(rec.encode_key(key)) == key
    assert rec.decode_value(rec.encode_value(value)) == value
    back = SharePartition.restore(value.start_offset, value.batches)
    assert back.acquire("b", LOG, 10, 0, record_limit=True) == [
        Acquired(0, 0, 2),
        Acquired(4, 9, 2),
    ]


def test_key_layout_is_kafkas() -> None:
    tid = uuid.UUID(int=1)
    raw = rec.encode_key(rec.ShareKey("g", tid, 2))
    assert raw == b"\x00\x00" + b"\x00\x01g" + tid.bytes + b"\x00\x00\x00\x02"
    assert rec.encode_key(rec.ShareKey("g", tid, 2, is_update=True))[:2] == b"\x00\x01"
    assert rec.coordinator_key("g", tid, 2) == "g:AAAAAAAAAAAAAAAAAAAAAQ:2"
    value = rec.ShareValue(3, 1, 7, 10, (StateBatch(10, 11, ACKNOWLEDGED, 1),), 100, 200)
    packed = struct.pack(">hHiiqqq", 0, 3, 1, 7, 10, 100, 200)
    packed += b"\x02" + struct.pack(">qqbh", 10, 11, 2, 1) + b"\x00" + b"\x00"
    assert rec.encode_value(value) == packed
    update = rec.ShareValue(4, -1, 7, 12, ())  # no StateEpoch nor timestamps in an update
    packed = struct.pack(">hHiq", 0, 4, 7, 12) + b"\x01\x00"
    assert rec.encode_value(update, is_update=True) == packed


def test_simple_assignor() -> None:
    t = uuid.uuid4()
    members = {m: ShareMember(m, "", "", topics=["t"]) for m in ("a", "b", "c")}
    three = simple_assign(members, {"t": (t, 3)})
    assert sorted(p for a in three.values() for p in a[t]) == [0, 1, 2]
    one = simple_assign(members, {"t": (t, 1)})
    assert all(a == {t: [0]} for a in one.values())  # more members than partitions: shared


def test_group_heartbeat_epochs() -> None:
    t = uuid.uuid4()
    g = ShareGroup("g")
    meta = {"t": (t, 2)}
    a = g.heartbeat("", 0, None, ["t"], "c", "/h", meta, 0, 1000, 10)
    assert a.error == 0 and a.member_id and a.epoch == 1 and a.assignment == {t: [0, 1]}
    b = g.heartbeat("B", 0, None, ["t"], "c", "/h", meta, 0, 1000, 10)
    assert b.epoch == 2 and b.assignment is not None and len(b.assignment[t]) == 1
    again = g.heartbeat(a.member_id, 1, None, None, "c", "/h", meta, 0, 1000, 10)
    assert again.epoch == 2 and again.assignment is not None and len(again.assignment[t]) == 1
    assert g.heartbeat(a.member_id, 1, None, None, "c", "/h", meta, 0, 1000, 10).error == 110
    assert g.heartbeat("nobody", 3, None, None, "c", "/h", meta, 0, 1000, 10).error == 25
    assert g.expired(1000) == [a.member_id, "B"]


def test_no_more_than_max_record_locks_in_flight() -> None:
    sp = SharePartition(0, max_in_flight=4)
    assert sp.acquire("a", LOG, 100, 0, record_limit=True) == [Acquired(0, 3, 1)]
    assert sp.acquire("b", LOG, 100, 0, record_limit=True) == []
    sp.acknowledge("a", 0, 1, [ACCEPT])  # the start moves: two more may come
    assert sp.acquire("b", LOG, 100, 0, record_limit=True) == [Acquired(4, 5, 1)]


def test_acquisition_reads_the_log_only_as_far_as_it_needs() -> None:
    read: list[int] = []

    def batches() -> Iterator[tuple[int, int, bool, int]]:
        for first in range(0, 1000, 10):
            read.append(first)
            yield first, first + 9, False, 500

    sp = SharePartition(0)
    assert sp.acquire("a", batches(), 15, 0, record_limit=True) == [Acquired(0, 14, 1)]
    assert read == [0, 10]


def test_acquisition_keeps_the_batches_it_answers_within_max_bytes() -> None:
    log = [(0, 4, False, 100), (5, 9, False, 100), (10, 14, False, 100)]
    sp = SharePartition(0)
    # a Fetch's max_bytes: the first batch goes whole, no further batch past the bound
    assert sp.acquire("a", log, 100, 0, max_bytes=50, record_limit=True) == [Acquired(0, 4, 1)]
    assert sp.acquire("b", log, 100, 0, max_bytes=250, record_limit=True) == [Acquired(5, 14, 1)]
    sp.acknowledge("a", 0, 4, [ACCEPT])
    sp.acknowledge("b", 5, 14, [RELEASE])
    # another partition filled the answer already: nothing that does not fit
    assert sp.acquire("c", log, 100, 0, max_bytes=50, whole_first=False, record_limit=True) == []
    # batches already settled cost nothing
    assert sp.acquire("c", log, 100, 0, max_bytes=100, whole_first=False, record_limit=True) == [
        Acquired(5, 9, 2)
    ]


def test_unacquire_gives_records_back_with_their_delivery_counts() -> None:
    sp = SharePartition(0)
    first = sp.acquire("a", LOG, 10, 0, record_limit=True)
    sp.acknowledge("a", 0, 1, [RELEASE])
    again = sp.acquire("a", LOG, 2, 0, record_limit=True)
    assert again == [Acquired(0, 1, 2)]
    sp.unacquire("a", again)
    sp.unacquire("b", first)  # not b's: nothing changes
    assert sp.acquire("b", LOG, 10, 0, record_limit=True) == [Acquired(0, 1, 2)]
    assert sp.in_flight() == 10


def test_batch_optimized_acquisition_takes_the_whole_batch_past_max_records() -> None:
    """Kafka 4.2's default acquire mode: MaxRecords 3 of a five-record batch acquires all five
    (the client gets whole batches); record-limit mode (KIP-1206) stops at three."""
    sp = SharePartition(0)
    assert sp.acquire("a", LOG, 3, 0) == [Acquired(0, 4, 1)]
    assert sp.acquire("b", LOG, 3, 0, record_limit=True) == [Acquired(5, 7, 1)]
    assert sp.acquire("c", LOG, 1, 0) == [Acquired(8, 9, 1)]  # what is left of the batch


def test_renew_keeps_records_acquired_under_a_new_lock() -> None:
    """KIP-1222: a Renew acknowledgement restarts the acquisition lock; without renewal allowed
    (v1, or share.renew.acknowledge.enable=false) it is an invalid request."""
    sp = SharePartition(0, lock_ms=1000)
    sp.acquire("a", LOG, 5, 0, record_limit=True)
    assert sp.acknowledge("a", 0, 4, [4]) == 42  # INVALID_REQUEST
    assert sp.acknowledge("a", 0, 4, [4], renew_at_ms=900) == 0
    assert sp.expire(1500) == 0  # the first lock would have ended at 1000
    assert sp.acquire("b", LOG, 5, 1500, record_limit=True) == [Acquired(5, 9, 1)]
    assert sp.expire(1900) == 5  # the renewed one ends at 1900
