"""The transaction state machine: legal transitions, epoch bumps (KIP-360), pending guard."""

from __future__ import annotations

import pytest

from odradek.coordinator.txn.state import (
    MAX_EPOCH,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    epoch_exhausted,
)
from odradek.wire.errors import ErrorCode


def fresh() -> TxnMetadata:
    return TxnMetadata("tx", 7, 60000, 0)


def ongoing(epoch: int = 3) -> TxnMetadata:
    md = TxnMetadata("tx", 7, 60000, 0, producer_epoch=epoch)
    md.complete(md.prepare_add_partitions({("t", 0)}, 100))
    return md


def test_full_commit_cycle() -> None:
    md = fresh()
    md.complete(md.prepare_increment_epoch(30000, None, 10))
    assert (md.state, md.producer_epoch, md.timeout_ms) == (TxnState.EMPTY, 0, 30000)
    md.complete(md.prepare_add_partitions({("t", 0)}, 20))
    assert md.state == TxnState.ONGOING and md.start_ms == 20
    md.complete(md.prepare_add_partitions({("t", 1)}, 30))
    assert md.partitions == {("t", 0), ("t", 1)} and md.start_ms == 20
    md.complete(md.prepare_end(True, 40))
    assert md.state == TxnState.PREPARE_COMMIT and md.partitions
    md.complete(md.prepare_complete(50))
    assert md.state == TxnState.COMPLETE_COMMIT and not md.partitions
    md.complete(md.prepare_add_partitions({("t", 2)}, 60))
    assert md.state == TxnState.ONGOING and md.start_ms == 60


def test_abort_cycle_ends_in_complete_abort() -> None:
    md = ongoing()
    md.complete(md.prepare_end(False, 40))
    md.complete(md.prepare_complete(50))
    assert md.state == TxnState.COMPLETE_ABORT


@pytest.mark.parametrize(
    "action",
    [
        lambda md: md.prepare_end(True, 1),
        lambda md: md.prepare_complete(1),
    ],
)
def test_empty_cannot_end(action) -> None:
    with pytest.raises(IllegalTransition):
        action(fresh())


def test_pending_blocks_another_transition() -> None:
    md = ongoing()
    transit = md.prepare_end(True, 1)
    with pytest.raises(IllegalTransition):
        md.prepare_end(False, 1)
    md.abandon()
    assert md.state == TxnState.ONGOING and md.pending is None
    with pytest.raises(IllegalTransition):
        md.complete(transit)  # abandoned: nothing pending to complete


def test_abandon_leaves_metadata_unchanged() -> None:
    md = ongoing()
    before = (md.state, set(md.partitions), md.producer_epoch)
    md.prepare_end(True, 1)
    md.abandon()
    assert (md.state, md.partitions, md.producer_epoch) == before


def test_increment_with_expected_epoch_kip360() -> None:
    md = ongoing(epoch=3)
    md.complete(md.prepare_end(False, 1))
    md.complete(md.prepare_complete(2))
    t = md.prepare_increment_epoch(1000, 3, 3)
    md.complete(t)
    assert (md.producer_epoch, md.last_producer_epoch) == (4, 3)
    # a retry of that bump (the answer was lost) gets the same epoch back
    t = md.prepare_increment_epoch(1000, 3, 4)
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    md.abandon()
    # an epoch that is neither current nor last is fenced
    assert md.prepare_increment_epoch(1000, 1, 5) == ErrorCode.PRODUCER_FENCED


def test_fence_bumps_once_even_after_failed_write() -> None:
    md = ongoing(epoch=3)
    md.bump_epoch_for_fence()
    assert md.producer_epoch == 4
    md.failed_fence = True
    md.bump_epoch_for_fence()
    assert md.producer_epoch == 4
    md.complete(md.prepare_end(False, 1))
    md.complete(md.prepare_complete(2))
    assert not md.failed_fence


def test_rotation_gives_new_producer_id_at_epoch_zero() -> None:
    md = TxnMetadata("tx", 7, 60000, 0, producer_epoch=MAX_EPOCH - 1)
    assert epoch_exhausted(md.producer_epoch)
    md.complete(md.prepare_rotate_producer_id(8, 1000, 5, record_last_epoch=True))
    assert (md.producer_id, md.producer_epoch, md.last_producer_id) == (8, 0, 7)
    assert md.last_producer_epoch == MAX_EPOCH - 1


def test_dead_only_from_ended_states() -> None:
    with pytest.raises(IllegalTransition):
        ongoing().prepare_dead()
    md = fresh()
    md.complete(md.prepare_dead())
    assert md.state == TxnState.DEAD


def test_transit_value_has_null_partitions_only_when_empty() -> None:
    md = ongoing()
    assert md.prepare_end(True, 1).to_value().partitions == {"t": [0]}
    md.abandon()
    md2 = fresh()
    assert md2.prepare_increment_epoch(1, None, 1).to_value().partitions is None
