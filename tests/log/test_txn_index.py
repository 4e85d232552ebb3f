"""The aborted-transaction index (`.txnindex`) and markers in a log: entries written on abort,
the LSO they carry, collection for read_committed fetches, truncation and recovery."""

from __future__ import annotations

import os
import struct
import time

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.log.transactions import collect_aborted, complete_transaction, marker_info
from odradek.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from odradek.wire.batch import iter_batches, parse_header
from odradek.wire.records import ABORT, COMMIT, build_batch, build_control_batch


def small(segment_bytes: int = 1 << 20) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=64, segment_index_bytes=4096)


def txn_data(lg: Log, pid: int, seq: int, n: int = 2, epoch: int = 0) -> int:
    data = bytearray(
        build_batch(
            [(b"k", b"v", (), int(time.time() * 1000))] * n,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=True,
        )
    )
    return lg.append_as_leader(data, list(iter_batches(data)), 0, False).first_offset


def marker(lg: Log, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 3) -> int:
    buf = bytearray(
        build_control_batch(pid, epoch, commit, coordinator_epoch, int(time.time() * 1000))
    )
    offset = lg.append_control(buf, parse_header(buf), 0)
    complete_transaction(lg, lg.active, pid, epoch, coordinator_epoch, offset, not commit)
    return offset


def entries(lg: Log) -> list[AbortedTxn]:
    return [e for seg in lg.segments for e in seg.txn_index.entries]


# -- the index file ----------------------------------------------------------------------------


def test_entry_layout_is_kafkas_34_bytes(tmp_path) -> None:
    idx = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"))
    assert not os.path.exists(idx.path)  # created on the first abort
    idx.append(AbortedTxn(7, 10, 20, 21))
    raw = open(idx.path, "rb").read()
    assert len(raw) == ENTRY_SIZE == 34
    assert struct.unpack(">hqqqq", raw) == (0, 7, 10, 20, 21)


def test_replayed_entries_are_not_duplicated(tmp_path) -> None:
    idx = TransactionIndex(str(tmp_path / "0.txnindex"))
    assert idx.append(AbortedTxn(7, 10, 20, 21))
    assert not idx.append(AbortedTxn(7, 10, 20, 21))
    assert idx.append(AbortedTxn(8, 15, 30, 31))
    assert len(TransactionIndex(idx.path).entries) == 2


def test_torn_tail_is_dropped_on_load(tmp_path) -> None:
    idx = TransactionIndex(str(tmp_path / "0.txnindex"))
    idx.append(AbortedTxn(7, 10, 20, 21))
    idx.append(AbortedTxn(8, 22, 30, 31))
    with open(idx.path, "r+b") as f:
        f.truncate(ENTRY_SIZE + 10)
    again = TransactionIndex(idx.path)
    assert again.entries == [AbortedTxn(7, 10, 20, 21)]
    assert os.path.getsize(idx.path) == ENTRY_SIZE


def test_truncate_drops_markers_at_or_after_offset(tmp_path) -> None:
    idx = TransactionIndex(str(tmp_path / "0.txnindex"))
    idx.append(AbortedTxn(7, 10, 20, 21))
    idx.append(AbortedTxn(8, 22, 30, 31))
    idx.truncate_to(30)
    assert [e.last_offset for e in TransactionIndex(idx.path).entries] == [20]
    idx.truncate_to(0)
    assert not os.path.exists(idx.path)


def test_collect_overlap_and_completeness(tmp_path) -> None:
    idx = TransactionIndex(str(tmp_path / "0.txnindex"))
    a, b, c = AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 15, 16)
    for e in (a, b, c):
        idx.append(e)
    assert idx.collect(6, 12) == ([b], True)  # a ended before 6; c starts at the bound
    assert idx.collect(0, 100) == ([a, b, c], False)


# -- markers in a log --------------------------------------------------------------------------


def test_marker_info_reads_type_and_coordinator_epoch() -> None:
    assert marker_info(build_control_batch(1, 0, True, 9, 0)) == (COMMIT, 9)
    assert marker_info(build_control_batch(1, 0, False, 4, 0)) == (ABORT, 4)
    assert marker_info(build_batch([(b"k", b"v", (), 0)])) is None


def test_abort_is_indexed_with_the_lso_after_it(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    first_a = txn_data(lg, 1, 0)  # 0-1  producer 1
    first_b = txn_data(lg, 2, 0)  # 2-3  producer 2
    assert lg.producer_state.first_unstable_offset() == first_a
    abort_a = marker(lg, 1, commit=False)  # 4
    assert lg.producer_state.first_unstable_offset() == first_b
    assert entries(lg) == [AbortedTxn(1, first_a, abort_a, first_b)]
    commit_b = marker(lg, 2, commit=True)  # 5: commits are not indexed
    assert lg.producer_state.first_unstable_offset() is None
    abort_c = marker(lg, 3, commit=False)  # 6: no data: spans just the marker
    assert entries(lg)[1:] == [AbortedTxn(3, abort_c, abort_c, abort_c + 1)]
    assert commit_b == 5
    assert [(e.producer_id, e.first_offset) for e in collect_aborted(lg, 0, 7)] == [(1, 0), (3, 6)]
    assert collect_aborted(lg, 5, 6) == []


def test_collect_spans_segments(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, small(segment_bytes=300))
    aborted = []
    for pid in range(1, 8):
        first = txn_data(lg, pid, 0, n=3)
        marker(lg, pid, commit=pid % 2 == 0)
        if pid % 2:
            aborted.append((pid, first))
    assert len(lg.segments) > 2
    got = [(e.producer_id, e.first_offset) for e in collect_aborted(lg, 0, lg.log_end_offset)]
    assert got == aborted
    later = [
        (e.producer_id, e.first_offset)
        for e in collect_aborted(lg, aborted[2][1], lg.log_end_offset)
    ]
    assert later == aborted[2:]


def test_index_and_lso_survive_clean_and_unclean_restarts(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    lg = Log(path, "t", 0, small())
    txn_data(lg, 1, 0)
    marker(lg, 1, commit=False)
    open_first = txn_data(lg, 2, 0)  # still open at the "crash"
    expected = entries(lg)
    lg.close()
    again = Log(path, "t", 0, small())
    assert entries(again) == expected
    assert again.producer_state.first_unstable_offset() == open_first
    again.flush()
    for seg in again.segments:
        seg.file.close()
    # unclean: no snapshot and no index; replay rebuilds both from the log
    for name in os.listdir(path):
        if name.endswith((".snapshot", ".txnindex")):
            os.unlink(os.path.join(path, name))
    third = Log(path, "t", 0, small(), clean_shutdown=False)
    assert entries(third) == expected
    assert third.producer_state.first_unstable_offset() == open_first


def test_truncation_removes_aborts_past_the_cut(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    txn_data(lg, 1, 0)
    marker(lg, 1, commit=False)  # 2
    txn_data(lg, 2, 0)  # 3-4
    cut = marker(lg, 2, commit=False)  # 5
    lg.truncate_to(cut)
    assert [e.producer_id for e in entries(lg)] == [1]
    assert lg.producer_state.first_unstable_offset() == 3  # producer 2 is open again


def test_recovery_of_torn_tail_drops_its_abort(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    lg = Log(path, "t", 0, small())
    txn_data(lg, 1, 0)
    marker(lg, 1, commit=False)
    txn_data(lg, 2, 0)
    last = marker(lg, 2, commit=False)
    assert len(entries(lg)) == 2
    seg = lg.active
    size = seg.size
    seg.file.close()
    with open(os.path.join(path, "00000000000000000000.log"), "r+b") as f:
        f.truncate(size - 5)  # the last marker is torn
    again = Log(path, "t", 0, small(), clean_shutdown=False)
    assert again.log_end_offset == last
    assert [e.producer_id for e in entries(again)] == [1]
    assert again.producer_state.first_unstable_offset() == last - 2


def test_a_flush_fsyncs_the_transaction_index_written_since_the_last(tmp_path, monkeypatch) -> None:
    """Kafka's segment flush syncs the .txnindex with the .log and the offset indexes: an abort
    whose entry a crash lost after the producer-state snapshot past it reached the disk would
    never be indexed again, and read_committed readers would get its records."""
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    txn_data(lg, 1, 0)
    marker(lg, 1, commit=False)
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    lg.flush()
    assert [p for p in synced if p.endswith(".txnindex")] == [lg.active.txn_index.path]
    synced.clear()
    lg.flush()  # nothing indexed since: the index is not synced again
    assert not [p for p in synced if p.endswith(".txnindex")]
    lg.close()
