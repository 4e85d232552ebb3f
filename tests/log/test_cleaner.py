"""Log compaction checked record by record on real segment files."""

from __future__ import annotations

import asyncio
import os

import pytest

from odradek.log.cleaner import CHECKPOINT, LogCleaner, LogCleanerService, encode_batch
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.log.transactions import complete_transaction
from odradek.wire.batch import iter_batches, parse_header
from odradek.wire.records import build_batch, build_control_batch, decode_records

T0 = 1_700_000_000_000
RETENTION = 60_000


def make_log(tmp_path, **overrides) -> Log:
    settings = {
        "cleanup_policy": "compact",
        "segment_bytes": 400,
        "delete_retention_ms": RETENTION,
        "min_cleanable_dirty_ratio": 0.0,
        **overrides,
    }
    cfg = LogConfig(**settings)
    return Log(str(tmp_path / "topic-0"), "topic", 0, cfg)


def append(lg: Log, records, **kw) -> int:
    """Append one batch of (key, value) records; returns its base offset."""
    ts = kw.pop("ts", T0)
    batch = bytearray(
        build_batch(
            [
                (None if k is None else k.encode(), None if v is None else v.encode(), (), ts)
                for k, v in records
            ],
            **kw,
        )
    )
    info = lg.append_as_leader(batch, list(iter_batches(batch)), 0, False)
    return info.first_offset


def read_all(lg: Log) -> list[tuple[int, str | None, str | None]]:
    """Every record, read the way a fetch does: region by region from the log start."""
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        region = lg.read(offset, 1 << 20, lg.log_end_offset, True)
        if region is None:
            break
        data = os.pread(region.file.fileno(), region.length, region.position)
        pos = 0
        last = offset
        for bpos, h in iter_batches(data):
            _h, recs = decode_records(data, bpos)
            for r in recs:
                if r.offset >= offset:
                    out.append(
                        (
                            r.offset,
                            None if r.key is None else r.key.decode(),
                            None if r.value is None else r.value.decode(),
                        )
                    )
            last = h.last_offset
            pos = bpos + h.size
        assert pos > 0
        offset = last + 1
    return out


def headers(lg: Log):
    out = []
    for seg in lg.segments:
        for bp in seg.batches_from(0):
            out.append(seg.read_header(bp.position))
    return out


def fill(lg: Log) -> dict[str, tuple[int, str]]:
    """Ten keys written three times each, across several segments; returns key -> latest."""
    latest = {}
    for round_ in range(3):
        for k in range(10):
            off = append(lg, [(f"k{k}", f"v{k}-{round_}")])
            latest[f"k{k}"] = (off, f"v{k}-{round_}")
    lg.roll()
    return latest


def test_keeps_last_value_per_key_and_offsets(tmp_path):
    lg = make_log(tmp_path)
    latest = fill(lg)
    before = read_all(lg)
    assert len(before) == 30 and len(lg.segments) > 3
    plan, stats = LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    assert stats is not None and stats.records_read == 30 and stats.records_kept == 10
    after = read_all(lg)
    assert after == sorted((off, k, v) for k, (off, v) in latest.items())
    # every kept record has the offset it was written at
    assert all(rec in before for rec in after)
    assert lg.log_end_offset == 30
    assert plan.end == lg.active.base_offset


def test_fetch_across_gaps_from_any_offset(tmp_path):
    lg = make_log(tmp_path)
    latest = fill(lg)
    LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    kept = sorted(off for off, _v in latest.values())
    for start in range(0, 30):
        region = lg.read(start, 1 << 20, lg.log_end_offset, True)
        assert region is not None, start
        data = os.pread(region.file.fileno(), region.length, region.position)
        first = parse_header(data)
        # the first batch returned is the first one with records at or after `start`
        assert first.last_offset >= start
        assert first.base_offset == min(o for o in kept if o >= start)


def test_tombstones_kept_then_removed_after_delete_retention(tmp_path):
    lg = make_log(tmp_path)
    fill(lg)
    tomb_offset = append(lg, [("k3", None)])
    lg.roll()
    cleaner = LogCleaner()
    plan, _ = cleaner.clean(lg, 0, lg.log_end_offset, T0)
    records = read_all(lg)
    assert (tomb_offset, "k3", None) in records
    assert not [r for r in records if r[1] == "k3" and r[2] is not None]
    (h,) = [h for h in headers(lg) if h.base_offset == tomb_offset]
    assert h.has_delete_horizon and h.base_timestamp == T0 + RETENTION
    assert plan.horizon == T0 + RETENTION
    # the record timestamp survives the re-basing on the horizon
    _h, recs = decode_records(
        lg.segments[
            [s.base_offset <= tomb_offset < s.next_offset for s in lg.segments].index(True)
        ].read_bytes(*_position(lg, tomb_offset))
    )
    assert recs[0].timestamp == T0
    # before the horizon a cleaning keeps it, after it the tombstone goes
    cleaner.clean(lg, plan.end, lg.log_end_offset, T0 + RETENTION - 1)
    assert (tomb_offset, "k3", None) in read_all(lg)
    cleaner.clean(lg, plan.end, lg.log_end_offset, T0 + RETENTION)
    assert not [r for r in read_all(lg) if r[1] == "k3"]
    assert len(read_all(lg)) == 9


def _position(lg: Log, offset: int) -> tuple[int, int]:
    for seg in lg.segments:
        for bp in seg.batches_from(0):
            if bp.base_offset <= offset <= bp.last_offset:
                return bp.position, bp.size
    raise KeyError(offset)


def test_active_segment_and_uncleanable_tail_untouched(tmp_path):
    lg = make_log(tmp_path)
    fill(lg)
    tail = [append(lg, [("k1", "in-active")])]
    LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    assert (tail[0], "k1", "in-active") in read_all(lg)
    # the older k1 in the cleaned part is superseded only when the tail becomes cleanable
    assert [r for r in read_all(lg) if r[1] == "k1"][0][2] == "v1-2"
    # max_offset (the last stable offset) bounds the cleaning as well
    lg2 = make_log(tmp_path / "b")
    fill(lg2)
    plan = LogCleaner().plan(lg2, 0, 5, T0)
    assert plan is None or plan.end <= 5


def test_min_compaction_lag(tmp_path):
    lg = make_log(tmp_path, min_compaction_lag_ms=10_000)
    fill(lg)
    assert LogCleaner().plan(lg, 0, lg.log_end_offset, T0 + 5_000) is None
    plan, stats = LogCleaner().clean(lg, 0, lg.log_end_offset, T0 + 20_000)
    assert stats is not None and stats.records_kept == 10


def test_aborted_transactions_removed_markers_kept(tmp_path):
    lg = make_log(tmp_path, segment_bytes=10_000)
    append(lg, [("a", "1")])
    aborted = append(
        lg,
        [("a", "aborted"), ("b", "aborted")],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    marker = bytearray(build_control_batch(7, 0, False, 0, T0))
    abort_offset = lg.append_as_leader(marker, list(iter_batches(marker)), 0, False).first_offset
    committed = append(
        lg,
        [("b", "committed")],
        producer_id=8,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    marker = bytearray(build_control_batch(8, 0, True, 0, T0))
    lg.append_as_leader(marker, list(iter_batches(marker)), 0, False)
    lg.roll()
    LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    values = [(o, k, v) for o, k, v in read_all(lg)]
    assert (0, "a", "1") in values  # the aborted "a" did not supersede the first one
    assert all(v != "aborted" for _o, _k, v in values)
    assert (committed, "b", "committed") in values
    controls = [h for h in headers(lg) if h.is_control]
    assert [h.base_offset for h in controls][0] == abort_offset and len(controls) == 2
    # the producer's emptied last batch keeps its header (its sequence must survive)
    assert [h.records_count for h in headers(lg) if h.base_offset == aborted] == [0]


def test_cleaned_log_reloads(tmp_path):
    lg = make_log(tmp_path)
    latest = fill(lg)
    LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    expected = read_all(lg)
    lg.close()
    again = Log(lg.dir, "topic", 0, lg.config)
    assert read_all(again) == expected
    assert again.log_end_offset == 30
    # offsets resolve through the rebuilt indexes
    off, value = latest["k7"]
    region = again.read(off, 1 << 20, again.log_end_offset, True)
    data = os.pread(region.file.fileno(), region.length, region.position)
    _h, recs = decode_records(data)
    assert (recs[0].offset, recs[0].value.decode()) == (off, value)
    assert not os.path.exists(os.path.join(lg.dir, "cleaner-work"))


def test_compressed_batches_keep_their_codec(tmp_path):
    lg = make_log(tmp_path, segment_bytes=10_000)
    append(lg, [("x", "1"), ("y", "1"), ("x", "2")], compression=1)
    lg.roll()
    LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    (h,) = headers(lg)
    assert h.compression == 1 and h.records_count == 2 and h.last_offset_delta == 2
    assert read_all(lg) == [(1, "y", "1"), (2, "x", "2")]


def test_encode_batch_round_trip():
    raw = build_batch(
        [(b"k", b"v", (("h", b"1"),), T0), (b"k2", None, (), T0 + 5)],
        base_offset=100,
        producer_id=3,
        producer_epoch=1,
        base_sequence=9,
    )
    h, recs = decode_records(raw)
    again = encode_batch(h, recs, None)
    assert again == raw
    horizon = encode_batch(h, recs, T0 + 99)
    h2, recs2 = decode_records(horizon)
    assert h2.has_delete_horizon and h2.base_timestamp == T0 + 99
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs2] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs
    ]


def test_service_cleans_by_dirty_ratio_and_checkpoints(tmp_path):
    lg = make_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    fill(lg)
    service = LogCleanerService(lambda: [(lg, lg.log_end_offset)], clock=lambda: T0)
    assert asyncio.run(service.run_once()) == 1
    assert len(read_all(lg)) == 10
    path = os.path.join(os.path.dirname(lg.dir), CHECKPOINT)
    assert os.path.exists(path)
    # nothing new is dirty: no second cleaning
    assert asyncio.run(service.run_once()) == 0
    # a little new data is not enough to reach the ratio
    append(lg, [("k0", None)])
    lg.roll()
    assert asyncio.run(service.run_once()) == 0
    for k in range(1, 10):
        append(lg, [(f"k{k}", "again")])
    lg.roll()
    assert asyncio.run(service.run_once()) == 1
    # the kept tombstone is cleaned again once its horizon passes
    assert asyncio.run(service.run_once(now=T0 + RETENTION + 1)) == 1
    assert not [r for r in read_all(lg) if r[1] == "k0"]
    # a new service reads the checkpoint
    fresh = LogCleanerService(lambda: [(lg, lg.log_end_offset)], clock=lambda: T0)
    assert asyncio.run(fresh.run_once()) == 0


def test_swap_abandoned_when_segments_change(tmp_path):
    lg = make_log(tmp_path)
    fill(lg)
    cleaner = LogCleaner()
    plan = cleaner.plan(lg, 0, lg.log_end_offset, T0)
    cleaner.build(plan)
    lg.advance_log_start(lg.segments[2].base_offset)  # retention removed segments meanwhile
    assert cleaner.swap(plan) is None
    assert len(read_all(lg)) == 30 - lg.segments[0].base_offset


@pytest.mark.parametrize("policy", ["delete", "compact,delete"])
def test_service_only_cleans_compacted_logs(tmp_path, policy):
    cfg = LogConfig(cleanup_policy=policy, segment_bytes=400, min_cleanable_dirty_ratio=0.0)
    lg = Log(str(tmp_path / "t-0"), "t", 0, cfg)
    fill(lg)
    service = LogCleanerService(lambda: [(lg, lg.log_end_offset)], clock=lambda: T0)
    assert asyncio.run(service.run_once()) == (1 if "compact" in policy else 0)


def test_abort_marker_past_the_cleaned_range(tmp_path):
    """The txn index knows the abort even when its marker is still in the active segment."""
    lg = make_log(tmp_path, segment_bytes=10_000)
    append(lg, [("k", "committed")])
    append(
        lg, [("k", "aborted")], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    lg.roll()
    marker = bytearray(build_control_batch(5, 0, False, 0, T0))
    offset = lg.append_control(marker, parse_header(marker), 0)
    complete_transaction(lg, lg.active, 5, 0, 0, offset, True)  # as a leader writes markers
    assert lg.active.txn_index.entries
    LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
    values = [v for _o, k, v in read_all(lg) if k == "k"]
    assert values == ["committed"]
