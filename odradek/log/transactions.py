"""Transaction markers in a partition log (KIP-98): ending a producer's transaction.

Whenever a COMMIT or ABORT marker lands in a log (written as leader, replicated as a follower,
or replayed when the log loads), the producer's open transaction in that partition ends: its
first offset stops holding back the last stable offset, and an abort is recorded in the
`.txnindex` of the segment holding the marker, with the LSO just after it (as Kafka's
ProducerStateManager.lastStableOffset(completedTxn)). read_committed fetches then collect the
aborted transactions overlapping their range (Kafka's UnifiedLog.collectAbortedTransactions).

A marker batch holds one control record (parsed by `odradek.wire.records.end_txn_marker`):

    key    int16 version (0)   int16 type (0 abort, 1 commit)
    value  int16 version (0)   int32 coordinator_epoch
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from odradek.log.txn_index import AbortedTxn
from odradek.wire.batch import BatchHeader, CorruptRecordError
from odradek.wire.records import ABORT, decode_records, end_txn_marker

if TYPE_CHECKING:
    from odradek.log.producer_state import ProducerStateManager
    from odradek.log.segment import LogSegment

# a marker batch holds one record of a few bytes; a control batch inflating past this is not one
_MARKER_MAX_DECOMPRESSED = 1 << 20


class TxnLog(Protocol):
    """A partition's log as transaction markers change it (`log/log.py` Log)."""

    @property
    def producer_state(self) -> ProducerStateManager: ...
    def segments_from(self, offset: int) -> list[LogSegment]: ...


def marker_info(buf: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(type, coordinator epoch) of a control batch holding a transaction marker, else None."""
    try:
        _h, records = decode_records(buf, max_size=_MARKER_MAX_DECOMPRESSED)
    except CorruptRecordError:
        return None
    return end_txn_marker(records)


def complete_transaction(
    log: TxnLog,
    seg: LogSegment,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    marker_offset: int,
    aborted: bool,
) -> AbortedTxn | None:
    """End the producer's transaction at `marker_offset`; an abort goes into seg's txn index.

    A marker for a producer with no data in this partition ends an empty transaction spanning
    only the marker itself, as Kafka does.
    """
    state = log.producer_state
    entry = None
    if aborted:
        # the index entry is written before the transaction stops holding back the LSO (as
        # Kafka's UnifiedLog.append: updateTxnIndex, then completeTxn): a write that fails
        # (ENOSPC) must not leave the aborted records below the LSO with no entry telling
        # read_committed fetches to drop them
        current = state.producers.get(producer_id)
        first = current.txn_first_offset if current is not None else -1
        others = [o for o in state.ongoing if o != first]
        lso = min(others) if others else marker_offset + 1
        entry = AbortedTxn(producer_id, first if first >= 0 else marker_offset, marker_offset, lso)
        seg.txn_index.append(entry)
    state.complete_txn(producer_id, producer_epoch, coordinator_epoch)
    return entry


def replay_marker(
    log: TxnLog, seg: LogSegment, header: BatchHeader, buf: bytes | bytearray | memoryview
) -> None:
    """Apply a control batch found in the log (loading, or appended as a follower)."""
    info = marker_info(buf)
    if info is None:
        return
    ctype, coordinator_epoch = info
    complete_transaction(
        log,
        seg,
        header.producer_id,
        header.producer_epoch,
        coordinator_epoch,
        header.base_offset,
        ctype == ABORT,
    )


def collect_aborted(log: TxnLog, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions with a marker at or after `fetch_offset` that began before
    `upper_bound`, from the segment holding `fetch_offset` onwards."""
    out: list[AbortedTxn] = []
    for seg in log.segments_from(fetch_offset):
        found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out
