"""The partition log on disk: appends, reads, rolls, recovery, retention, truncation."""

from __future__ import annotations

import os
import time

import pytest

from odradek.log.config import LogConfig
from odradek.log.log import Log, OffsetOutOfRange
from odradek.wire.batch import iter_batches
from odradek.wire.records import decode_records


def batch(n: int, ts: int | None = None, key: bytes = b"k", **kw) -> bytearray:
    from odradek.wire.records import build_batch

    t = int(time.time() * 1000) if ts is None else ts
    return bytearray(build_batch([(key, b"v%d" % i, [("h", b"x")], t + i) for i in range(n)], **kw))


def append(lg: Log, data: bytearray, epoch: int = 0):
    return lg.append_as_leader(data, list(iter_batches(data)), epoch, False)


def read_all(lg: Log, start: int = 0) -> list[tuple[int, bytes | None]]:
    """Every record from `start` to the end, through file regions, as (offset, value)."""
    out = []
    offset = start
    while offset < lg.log_end_offset:
        region = lg.read(offset, 1 << 20, lg.log_end_offset, True)
        assert region is not None
        raw = os.pread(region.file.fileno(), region.length, region.position)
        progressed = False
        for pos, h in iter_batches(raw):
            _h, recs = decode_records(raw, pos)
            for r in recs:
                if r.offset >= offset:
                    out.append((r.offset, r.value))
            offset = h.last_offset + 1
            progressed = True
        assert progressed
    return out


def small(**kw) -> LogConfig:
    return LogConfig(
        segment_bytes=kw.pop("segment_bytes", 1024),
        index_interval_bytes=64,
        segment_index_bytes=4096,
        **kw,
    )


def test_offsets_are_assigned_per_record_and_batches_read_back(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    assert append(lg, batch(3)).first_offset == 0
    assert append(lg, batch(2)).first_offset == 3
    assert lg.log_end_offset == 5
    assert [o for o, _ in read_all(lg)] == [0, 1, 2, 3, 4]
    assert read_all(lg, 4) == [(4, b"v1")]
    with pytest.raises(OffsetOutOfRange):
        lg.read(6, 100, 6, True)
    assert lg.read(5, 100, 5, True) is None


def test_segments_roll_on_size_and_reads_cross_them(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    for _ in range(20):
        append(lg, batch(4))
    assert len(lg.segments) >= 3
    assert [o for o, _ in read_all(lg)] == list(range(80))
    lg.close()
    again = Log(str(tmp_path / "t-0"), "t", 0, small())
    assert again.log_end_offset == 80
    assert [o for o, _ in read_all(again)] == list(range(80))


def test_read_is_bounded_by_max_offset_and_returns_whole_first_batch(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, small(segment_bytes=1 << 20))
    append(lg, batch(5))
    append(lg, batch(5))
    region = lg.read(0, 10, 5, True)  # max_bytes smaller than a batch (KIP-74)
    raw = os.pread(region.file.fileno(), region.length, region.position)
    assert [h.last_offset for _, h in iter_batches(raw)] == [4]
    assert lg.read(5, 1 << 20, 5, True) is None  # high watermark bound


def _torn(path: str, extra: bytes) -> None:
    with open(path, "ab") as f:
        f.write(extra)


def test_torn_tail_is_cut_at_recovery_and_appends_continue(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, small(segment_bytes=1 << 20))
    append(lg, batch(3))
    append(lg, batch(3))
    seg_path = lg.active.path
    lg.close()
    _torn(seg_path, bytes(batch(3))[:40])
    lg = Log(d, "t", 0, small(segment_bytes=1 << 20), clean_shutdown=False)
    assert lg.log_end_offset == 6
    assert append(lg, batch(1)).first_offset == 6
    assert [o for o, _ in read_all(lg)] == list(range(7))


def test_corrupt_batch_in_the_middle_truncates_from_there(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, small(segment_bytes=1 << 20))
    for _ in range(3):
        append(lg, batch(2))
    seg_path = lg.active.path
    second = lg.active.translate(2).position
    lg.close()
    with open(seg_path, "r+b") as f:
        f.seek(second + 70)  # inside the records of the second batch
        byte = f.read(1)
        f.seek(second + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    lg = Log(d, "t", 0, small(segment_bytes=1 << 20), clean_shutdown=False)
    assert lg.log_end_offset == 2
    assert [o for o, _ in read_all(lg)] == [0, 1]


def test_deleted_index_is_rebuilt(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, small())
    for _ in range(30):
        append(lg, batch(3))
    first = lg.segments[0]
    lg.close()
    os.unlink(first.index.path)
    lg = Log(d, "t", 0, small())
    assert lg.segments[0].index.entries > 0
    assert [o for o, _ in read_all(lg, 10)][:3] == [10, 11, 12]


def test_unclean_restart_recovers_segments_after_the_recovery_point(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, small())
    for _ in range(10):
        append(lg, batch(4))
    # simulate a crash: no close(), nothing trimmed or checkpointed
    for seg in lg.segments:
        seg.file.close()
    lg = Log(d, "t", 0, small(), recovery_point=0, clean_shutdown=False)
    assert lg.log_end_offset == 40
    assert [o for o, _ in read_all(lg)] == list(range(40))


def test_unclean_restart_takes_leader_epochs_from_the_batches_when_the_checkpoint_lost_them(
    tmp_path,
):
    """The leader-epoch checkpoint is fsync'd off the event loop (checkpoints.write_soon): a
    power loss can leave an older one. Recovery of the unflushed segments assigns the epochs
    again from the batch headers (as Kafka's LogSegment.recover), so OffsetForLeaderEpoch
    answers as before the crash and a follower truncates where it must."""
    from odradek.log.checkpoints import sync_written
    from odradek.log.leader_epoch import FILE

    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, small())
    for i in range(12):
        append(lg, batch(4), epoch=i // 4 * 2)  # epochs 0, 2, 4 from offsets 0, 16, 32
    assert lg.epochs.entries == [(0, 0), (2, 16), (4, 32)]
    sync_written()
    with open(os.path.join(d, FILE), "w") as f:
        f.write("0\n1\n0 0\n")  # the checkpoint as it was before epochs 2 and 4
    for seg in lg.segments:  # a crash: nothing closed, trimmed or checkpointed
        seg.file.close()
    lg = Log(d, "t", 0, small(), recovery_point=0, clean_shutdown=False)
    assert lg.epochs.entries == [(0, 0), (2, 16), (4, 32)]
    assert lg.epochs.end_offset_for(2, lg.log_end_offset) == (2, 32)
    sync_written()
    with open(os.path.join(d, FILE)) as f:  # and the checkpoint says so again
        assert f.read().split("\n")[1:5] == ["3", "0 0", "2 16", "4 32"]


def test_timestamp_lookup_and_max_timestamp(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    base = 1_700_000_000_000
    for i in range(10):
        append(lg, batch(3, ts=base + i * 1000))
    assert lg.offset_for_timestamp(base) == (0, base)
    assert lg.offset_for_timestamp(base + 5001) == (16, base + 5001)
    assert lg.offset_for_timestamp(base + 4500) == (15, base + 5000)
    assert lg.offset_for_timestamp(base + 10_000) is None
    assert lg.max_timestamp_offset() == (29, base + 9002)


def test_retention_by_time_and_size_deletes_whole_segments(tmp_path):
    old = int(time.time() * 1000) - 10 * 86_400_000
    lg = Log(str(tmp_path / "t-0"), "t", 0, small(retention_ms=86_400_000))
    for _ in range(10):
        append(lg, batch(4, ts=old))
    for _ in range(10):
        append(lg, batch(4))
    deleted = lg.apply_retention(int(time.time() * 1000))
    assert deleted > 0
    assert lg.log_start_offset >= 40 - 4
    assert all(o >= lg.log_start_offset for o, _ in read_all(lg, lg.log_start_offset))
    with pytest.raises(OffsetOutOfRange):
        lg.read(0, 100, lg.log_end_offset, True)

    lg2 = Log(str(tmp_path / "u-0"), "u", 0, small(retention_bytes=2048))
    for _ in range(30):
        append(lg2, batch(4))
    lg2.apply_retention(int(time.time() * 1000))
    assert lg2.size_bytes - lg2.active.size <= 2048
    assert lg2.log_end_offset == 120


def test_delete_records_moves_log_start(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    for _ in range(20):
        append(lg, batch(4))
    lg.advance_log_start(50)
    assert lg.log_start_offset == 50
    assert read_all(lg, 50)[0][0] == 50
    assert lg.segments[0].base_offset <= 50


def test_truncate_to_drops_the_tail_and_appends_resume(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, small())
    for i in range(20):
        append(lg, batch(4), epoch=i // 10)
    lg.truncate_to(40)
    assert lg.log_end_offset == 40
    assert lg.epochs.entries == [(0, 0)]
    assert append(lg, batch(2), epoch=2).first_offset == 40
    assert lg.epochs.entries == [(0, 0), (2, 40)]
    assert [o for o, _ in read_all(lg)] == list(range(42))


def test_idempotent_state_survives_restart(tmp_path):
    from odradek.log.producer_state import SequenceError

    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, small())
    first = batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    append(lg, first)
    lg.close()
    lg = Log(d, "t", 0, small())
    dup = bytearray(first)
    ((_, h),) = iter_batches(dup)
    assert lg.producer_state.check(h).first_offset == 0
    gap = batch(1, producer_id=7, producer_epoch=0, base_sequence=5)
    ((_, hg),) = iter_batches(gap)
    with pytest.raises(SequenceError):
        lg.producer_state.check(hg)
