"""A transaction marker whose .txnindex write fails (ENOSPC on a full disk).

On a full disk the small marker batch can still fit in the .log's last page while the
.txnindex (a new file on the first abort, or a new page) cannot be written. The abort must then
take the log dir offline, as Kafka's UnifiedLog.append does with any IOException, and must not
move the last stable offset past the aborted records with no index entry naming them: a
read_committed fetch would return them (an aborted read, G1a).
"""

from __future__ import annotations

import errno
import time
import uuid
from collections.abc import Iterator
from typing import IO, Any

import pytest

from odradek.broker.partitions.partition import Partition
from odradek.broker.transactions.markers import append_marker
from odradek.log import txn_index
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.log.manager import LogManager
from odradek.wire.batch import iter_batches
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

PID = 4000
TOPIC_ID = uuid.UUID(int=9)


def txn_batch(seq: int) -> bytearray:
    t = int(time.time() * 1000)
    return bytearray(
        build_batch(
            [(b"k", b"v%d" % (seq + i), (), t) for i in range(2)],
            producer_id=PID,
            producer_epoch=0,
            base_sequence=seq,
            transactional=True,
        )
    )


@pytest.fixture
def open_txn(tmp_path) -> Iterator[tuple[Log, Partition, int]]:
    """A leader partition holding one open transaction: (its log, the partition, the
    transaction's first offset)."""
    cfg = LogConfig(segment_bytes=1 << 20)
    mgr = LogManager([str(tmp_path)])
    mgr.load_all(lambda _topic: cfg)
    try:
        lg = mgr.get_or_create("t", 0, TOPIC_ID, cfg)
        part = Partition("t", 0, TOPIC_ID, lg, 1, [1], 1, 0, [1])
        data = txn_batch(0)
        first = lg.append_as_leader(data, list(iter_batches(data)), 0, False).first_offset
        yield lg, part, first
    finally:
        mgr.close()


def test_abort_marker_whose_txn_index_write_fails_keeps_the_lso(open_txn, monkeypatch) -> None:
    lg, part, first = open_txn
    part.high_watermark = lg.log_end_offset
    assert part.last_stable_offset == first  # the open transaction holds it back

    def full_disk(path: str, mode: str = "r", *args: Any, **kw: Any) -> IO[Any]:
        if "a" in mode or "w" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return open(path, mode, *args, **kw)

    monkeypatch.setattr(txn_index, "open", full_disk, raising=False)
    error = append_marker(part, PID, 0, 3, commit=False)

    assert error == ErrorCode.KAFKA_STORAGE_ERROR
    assert part.offline  # the log dir went offline: no fetch is served from it
    # the aborted records stay above the LSO: nothing lets a read_committed fetch see them
    part.high_watermark = lg.log_end_offset
    assert part.last_stable_offset == first
    assert [e for seg in lg.segments for e in seg.txn_index.entries] == []


@pytest.mark.parametrize("commit", [True, False])
def test_marker_ends_the_transaction_and_indexes_an_abort(open_txn, commit) -> None:
    lg, part, _first = open_txn
    assert append_marker(part, PID, 0, 3, commit=commit) == ErrorCode.NONE
    part.high_watermark = lg.log_end_offset
    assert part.last_stable_offset == lg.log_end_offset
    indexed = [(e.producer_id, e.first_offset, e.last_offset) for e in lg.active.txn_index.entries]
    assert indexed == ([] if commit else [(PID, 0, 2)])
