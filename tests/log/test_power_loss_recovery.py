"""What a partition log keeps through a power loss (a crash losing what was not fsync'd, as
LazyFS does for Jepsen: odradek.log.power_loss), compared with Kafka's LogLoader.

After an unclean shutdown Kafka rebuilds each recovered segment's indexes, `.txnindex`
included, and reloads producer state only from snapshots at or below the recovered segment's
base; a roll flushes the sealed segment (and the roll's snapshot) soon after, so the recovery
point follows the active segment.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from odradek.log import checkpoints, power_loss
from odradek.log.config import LogConfig
from odradek.log.log import Log, read_partition_metadata, write_partition_metadata
from odradek.wire.batch import BatchHeader, iter_batches, parse_header
from odradek.wire.records import build_batch, build_control_batch

PID = 7


def config(segment_bytes: int = 1 << 20) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=64, segment_index_bytes=4096)


def batch(pid: int, seq: int, transactional: bool = False) -> bytearray:
    return bytearray(
        build_batch(
            [(b"k", b"v", (), int(time.time() * 1000))],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            transactional=transactional,
        )
    )


def header(data: bytearray) -> BatchHeader:
    ((_, h),) = iter_batches(data)
    return h


def append(lg: Log, data: bytearray) -> int:
    return lg.append_as_leader(data, list(iter_batches(data)), 0, False).first_offset


def abort(lg: Log, pid: int) -> int:
    buf = bytearray(build_control_batch(pid, 0, False, 3, int(time.time() * 1000)))
    return lg.append_control(buf, parse_header(buf), 0, coordinator_epoch=3, aborted=True)


def crash(lg: Log) -> None:
    """kill -9: let go of every file without a flush, a snapshot or a clean marker."""
    for seg in lg.segments:
        seg.release()


def test_a_snapshot_that_outlived_the_records_below_it_is_not_trusted(tmp_path) -> None:
    """Power loss kept a roll's producer snapshot but not the unsynced records below its offset
    (nothing orders two files' writes): the snapshot claims sequences the log lost, so the
    producer's retry of them would be answered as a duplicate and never written again."""
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, config(400))
    for seq in range(3):
        append(lg, batch(PID, seq))
    lg.flush()  # offsets 0-2 durable: the recovery point
    synced = {seg.path: seg.size for seg in lg.segments}
    retries = [batch(PID, seq) for seq in range(3, 12)]
    for b in retries:
        append(lg, b)
    assert len(lg.segments) > 2 and lg.producer_state.snapshot_offsets()
    crash(lg)
    for seg in lg.segments:  # the disk after the power loss: only what was fsync'd
        os.truncate(seg.path, synced.get(seg.path, 0))
    lg = Log(d, "t", 0, config(400), recovery_point=3, clean_shutdown=False)
    state = lg.producer_state.producers[PID]
    assert state.last_seq == 2, "producer state claims sequences the log lost"
    # the producer's retry of its first unacknowledged batch is new data, not a duplicate
    assert lg.producer_state.check(header(retries[0])) is None
    lg.close()


@pytest.mark.parametrize("lost", ["missing", "shorter"])
def test_a_recovered_segment_gets_back_the_aborts_its_txnindex_lost(tmp_path, lost) -> None:
    """Power loss after an abort marker's .log bytes reached the disk but not its `.txnindex`
    entry (or the whole new file): recovery rebuilds the index from the markers, as Kafka's
    LogSegment.recover does, even when a snapshot past the markers survived; otherwise a
    read_committed consumer gets the aborted records."""
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, config())
    append(lg, batch(1, 0, transactional=True))
    abort(lg, 1)
    append(lg, batch(2, 0, transactional=True))
    abort(lg, 2)
    append(lg, batch(PID, 0))
    lg.close()  # a clean stop: .log synced, snapshot at the log end
    index = lg.segments[0].txn_index.path
    assert len(lg.aborted_transactions(0, lg.log_end_offset)) == 2
    if lost == "missing":
        os.unlink(index)
    else:
        os.truncate(index, os.path.getsize(index) // 2)
    lg = Log(d, "t", 0, config(), recovery_point=0, clean_shutdown=False)
    assert [a.producer_id for a in lg.aborted_transactions(0, lg.log_end_offset)] == [1, 2]
    lg.close()


def test_power_loss_after_a_roll_keeps_the_sealed_segment_and_its_aborts(tmp_path) -> None:
    """With the default flush settings a roll syncs the sealed segment, its `.txnindex` and the
    roll's snapshot soon after (Kafka's UnifiedLog.roll schedules that flush): a power loss
    then loses at most the active segment, and never leaves the log end past a hole of lost
    offsets (a follower would fetch on from there and never get them back)."""
    d = tmp_path / "t-0"
    journal = str(tmp_path / "fsync.journal")
    mp = pytest.MonkeyPatch()
    mp.setattr(power_loss, "_journal", os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    mp.setattr(os, "fsync", power_loss._journaled_fsync)

    async def run() -> tuple[Log, int]:
        lg = Log(str(d), "t", 0, config(600))
        append(lg, batch(1, 0, transactional=True))
        abort(lg, 1)
        seq = 0
        while len(lg.segments) < 3:
            append(lg, batch(PID, seq))
            seq += 1
        active_base = lg.segments[-1].base_offset
        deadline = time.monotonic() + 30
        while lg.recovery_point < active_base:  # the roll's flush round, off the loop
            assert time.monotonic() < deadline, "no flush after the roll"
            await asyncio.sleep(0.01)
        return lg, active_base

    try:
        lg, active_base = asyncio.run(run())
        crash(lg)
        os.close(power_loss._journal)  # type: ignore[arg-type]
    finally:
        mp.undo()
    power_loss.discard_unsynced(tmp_path, journal)
    lg = Log(str(d), "t", 0, config(600), recovery_point=lg.recovery_point, clean_shutdown=False)
    # every offset below the active segment is still there, with no hole before the log end
    spans = [(b.pos.base_offset, b.pos.last_offset) for b in lg.batches()]
    assert spans[0][0] == 0 and spans[-1][1] + 1 == lg.log_end_offset >= active_base
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in zip(spans, spans[1:], strict=False))
    assert [a.producer_id for a in lg.aborted_transactions(0, lg.log_end_offset)] == [1]
    lg.close()


def test_the_partition_metadata_file_outlives_a_power_loss(tmp_path) -> None:
    """The topic id file is fsync'd (off the loop) once written, as Kafka's
    PartitionMetadataFile is: a power loss after that keeps it."""
    d = tmp_path / "t-0"
    journal = str(tmp_path / "fsync.journal")
    topic_id = uuid.uuid4()
    mp = pytest.MonkeyPatch()
    mp.setattr(power_loss, "_journal", os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    mp.setattr(os, "fsync", power_loss._journaled_fsync)
    try:
        lg = Log(str(d), "t", 0, config())
        write_partition_metadata(str(d), topic_id)
        checkpoints.sync_written()
        crash(lg)
        os.close(power_loss._journal)  # type: ignore[arg-type]
    finally:
        mp.undo()
    power_loss.discard_unsynced(tmp_path, journal)
    assert read_partition_metadata(str(d)) == topic_id
