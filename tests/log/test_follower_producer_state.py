"""Idempotent-producer state on a follower, as Kafka's ProducerStateManager on followers: the
batches a replica appends by replication enter its producer state, so when it becomes leader a
producer's retry of one of them (same producer id, epoch and sequences) is answered as a
duplicate with the original offset, not written again; and a replica that crashed without a
clean stop (power loss: no producer snapshot) rebuilds that state from its log at recovery."""

from __future__ import annotations

import time

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import iter_batches, set_base_offset, set_partition_leader_epoch
from odradek.wire.records import build_batch

PID = 15001


def _batch(seq: int, epoch: int = 0) -> bytearray:
    return bytearray(
        build_batch(
            [(None, f"p0-{seq}".encode(), (), int(time.time() * 1000))],
            producer_id=PID,
            producer_epoch=epoch,
            base_sequence=seq,
        )
    )


def _replicate(follower: Log, seq: int, offset: int) -> None:
    """Append a batch as the leader had written it at `offset` (leader epoch 0)."""
    data = _batch(seq)
    set_base_offset(data, 0, offset)
    set_partition_leader_epoch(data, 0, 0)
    follower.append_as_follower(data, list(iter_batches(data)))


def _retry_meta(lg: Log, seq: int) -> tuple[int, int] | None:
    ((_, h),) = iter_batches(_batch(seq))
    meta = lg.producer_state.check(h)
    return None if meta is None else (meta.first_offset, meta.last_offset)


def _config() -> LogConfig:
    return LogConfig(segment_bytes=1 << 20, index_interval_bytes=64, segment_index_bytes=4096)


def test_a_retry_of_a_replicated_batch_is_a_duplicate_on_the_new_leader(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    follower = Log(d, "t", 0, _config())
    for seq in range(10):
        _replicate(follower, seq, offset=seq)
    # leadership moves here; the producer retries its last batch (sequence 9, epoch 0)
    assert _retry_meta(follower, 9) == (9, 9)
    assert _retry_meta(follower, 5) == (5, 5)  # any of the last five
    # the next sequence is new data, in order
    assert _retry_meta(follower, 10) is None


def test_a_power_lost_replica_rebuilds_the_state_from_its_log(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    follower = Log(d, "t", 0, _config())
    for seq in range(10):
        _replicate(follower, seq, offset=seq)
    follower.flush()
    # no close: no producer snapshot, as after a power loss; recovery replays the log
    reopened = Log(d, "t", 0, _config(), recovery_point=0, clean_shutdown=False)
    assert reopened.log_end_offset == 10
    assert not reopened.producer_state.snapshot_offsets()
    assert _retry_meta(reopened, 9) == (9, 9)
    assert _retry_meta(reopened, 10) is None
