"""A transaction marker under a newer producer epoch starts that epoch's sequences afresh.

With transactions v2 (KIP-890 part 2) every EndTxn bumps the epoch, and the markers carry the
new one; the producer's next transaction then writes under that epoch from sequence 0. The
partition must not mistake that first batch for a retry of the old epoch's batch with the same
sequence numbers (Kafka's ProducerStateEntry.maybeUpdateProducerEpoch clears the batch metadata):
answered as a duplicate, the records would be acknowledged and never written."""

from __future__ import annotations

from odradek.log.producer_state import ProducerStateManager
from odradek.wire.batch import TRANSACTIONAL_MASK, BatchHeader


def header(epoch: int, seq: int) -> BatchHeader:
    return BatchHeader(
        base_offset=0,
        batch_length=70,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=TRANSACTIONAL_MASK,
        last_offset_delta=0,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=5,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=1,
    )


def test_first_batch_after_a_marker_epoch_bump_is_not_a_duplicate(tmp_path) -> None:
    state = ProducerStateManager(str(tmp_path))
    state.apply(header(0, 0), 0, 0)
    assert state.check(header(0, 0)) is not None  # a real retry is still recognised
    assert state.complete_txn(5, 1, 0) == 0  # the commit marker, under epoch 1
    assert state.check(header(1, 0)) is None  # a new batch: appended, not answered as old
    state.apply(header(1, 0), 2, 2)
    assert state.check(header(1, 0)) is not None
