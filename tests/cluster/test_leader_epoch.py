"""OffsetForLeaderEpoch answers (as Kafka's LeaderEpochFileCache.endOffsetFor) and the
follower's batch splitting."""

from __future__ import annotations

import pytest

from odradek.broker.handlers.leader_epoch import end_offset_for
from odradek.broker.replication.fetcher import whole_batches
from odradek.wire.batch import CorruptRecordError
from odradek.wire.records import build_batch

ENTRIES = [(1, 0), (3, 10), (4, 25)]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (4, (4, 40)),  # the latest epoch ends at the log end offset
        (3, (3, 25)),
        (2, (1, 10)),  # unknown epoch between two known ones: the one below it
        (0, (0, 0)),  # older than anything known: ends where the first epoch starts
        (5, (-1, -1)),  # newer than anything known
        (-1, (-1, -1)),
    ],
)
def test_end_offset_for(requested: int, expected: tuple[int, int]) -> None:
    assert end_offset_for(ENTRIES, requested, 40) == expected


def test_end_offset_for_an_empty_cache() -> None:
    assert end_offset_for([], 3, 0) == (-1, -1)


def _batch(base: int, n: int) -> bytes:
    data = bytearray(
        build_batch([(None, b"v%d" % i, [], 1000) for i in range(n)], base_offset=base)
    )
    return bytes(data)


def test_whole_batches_leaves_a_cut_batch_for_later() -> None:
    a, b = _batch(0, 2), _batch(2, 3)
    used, batches = whole_batches(a + b[:20])
    assert used == len(a) and [h.base_offset for _, h in batches] == [0]
    used, batches = whole_batches(a + b)
    assert used == len(a) + len(b) and [h.last_offset for _, h in batches] == [1, 4]


def test_whole_batches_rejects_a_corrupt_batch() -> None:
    bad = bytearray(_batch(0, 2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        whole_batches(bytes(bad))
