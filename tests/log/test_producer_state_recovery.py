"""Producer state after recovery cut the log (issue 11, chaos finding 3 follow-up): a producer
snapshot taken past the recovered log end is removed at load, so a later start never rebuilds
idempotent-producer state from records that are gone (Kafka: LogLoader /
ProducerStateManager.truncateAndReload). Left in place, it made a retried batch of another
producer look new (a duplicate) once the log had grown past the snapshot's offset again."""

from __future__ import annotations

import os
import time

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch


def idem(pid: int, seq: int) -> bytearray:
    return bytearray(
        build_batch(
            [(b"k", b"v", (), int(time.time() * 1000))],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
        )
    )


def append(lg: Log, data: bytearray) -> int:
    return lg.append_as_leader(data, list(iter_batches(data)), 0, False).first_offset


def config(segment_bytes: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=64, segment_index_bytes=4096)


def test_snapshot_past_a_cut_log_end_is_not_used_later(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, config(400))
    for seq in range(12):  # producer 7, one record per batch; small segments roll
        append(lg, idem(7, seq))
    assert lg.producer_state.snapshot_offsets()
    snap = max(lg.producer_state.snapshot_offsets())
    # a lost tail: every segment after the first gone, as recovery cutting the log back
    cut = lg.segments[1].base_offset
    assert cut < snap
    for seg in lg.segments[1:]:
        os.unlink(seg.path)
    lg = Log(d, "t", 0, config(1 << 20), recovery_point=0, clean_shutdown=False)
    assert lg.log_end_offset == cut
    # producer 8 writes past the old snapshot's offset (one big segment: no new snapshot)
    batches = [idem(8, seq) for seq in range(snap - cut + 2)]
    for b in batches:
        append(lg, b)
    lg = Log(d, "t", 0, config(1 << 20), recovery_point=0, clean_shutdown=False)
    # the last batches of producer 8 are recognised as duplicates if retried
    for b in batches[-5:]:
        ((_, h),) = iter_batches(bytearray(b))
        meta = lg.producer_state.check(h)
        assert meta is not None, f"sequence {h.base_sequence} of producer 8 not known"
