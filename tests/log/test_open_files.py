"""Bounded open files (issue 17): with the process's LRU of open segments set to a few, logs of
many partitions and segments are written, read, cleaned, trimmed by retention, truncated and
reopened correctly, never holding more segment descriptors than the limit, and a region handed
out before its segment was let go of (or deleted) still reads its bytes."""

from __future__ import annotations

import os
import time

import pytest

from odradek.log import open_files
from odradek.log.cleaner import LogCleaner
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch, decode_records

LIMIT = 2
PARTITIONS = 4
MAX_FDS = LIMIT * open_files.FDS_PER_SEGMENT  # a .log each (indexes hold no descriptor)
T0 = 1_700_000_000_000


@pytest.fixture
def few_open():
    """The process-wide LRU limited to LIMIT segments for the test."""
    before = open_files.CACHE.limit
    open_files.CACHE.set_limit(LIMIT)
    try:
        yield open_files.CACHE
    finally:
        open_files.CACHE.set_limit(before)


def config(**kw) -> LogConfig:
    return LogConfig(segment_bytes=400, index_interval_bytes=64, segment_index_bytes=4096, **kw)


def append(lg: Log, key: str, value: str | None, ts: int = T0) -> int:
    data = bytearray(
        build_batch([(key.encode(), None if value is None else value.encode(), (), ts)])
    )
    return lg.append_as_leader(data, list(iter_batches(data)), 0, False).first_offset


def read_all(lg: Log) -> list[tuple[int, str, str | None]]:
    """Every record from the log start, read region by region as a fetch does."""
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        region = lg.read(offset, 1 << 20, lg.log_end_offset, True)
        if region is None:
            break
        data = os.pread(region.file.fileno(), region.length, region.position)
        last = offset - 1
        for pos, h in iter_batches(data):
            for r in decode_records(data, pos)[1]:
                if r.offset >= offset:
                    value = None if r.value is None else r.value.decode()
                    out.append((r.offset, r.key.decode(), value))
            last = h.last_offset
        assert last >= offset, "no progress"
        offset = last + 1
    return out


def segment_fds(root: str) -> int:
    """Descriptors of this process open on a `.log` or index file under `root`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root) and target.endswith((".log", ".index", ".timeindex")):
            count += 1
    return count


def test_many_partitions_and_segments_through_a_small_lru(tmp_path, few_open):
    root = str(tmp_path)
    logs = [Log(os.path.join(root, f"t-{p}"), "t", p, config()) for p in range(PARTITIONS)]
    expected: dict[int, list[tuple[int, str, str | None]]] = {p: [] for p in range(PARTITIONS)}
    for i in range(16):  # interleaved: every append lands on a segment let go of meanwhile
        for p, lg in enumerate(logs):
            value = f"v{i}-{p}" * 3
            offset = append(lg, f"k{i % 7}", value)
            expected[p].append((offset, f"k{i % 7}", value))
        assert segment_fds(root) <= MAX_FDS
    assert all(len(lg.segments) > 3 for lg in logs)
    assert len(few_open) <= LIMIT and few_open.evictions > 0
    for p, lg in enumerate(logs):
        assert read_all(lg) == expected[p]
        # timestamp lookups read the time indexes of segments let go of
        assert lg.offset_for_timestamp(T0) == (0, T0)
    assert segment_fds(root) <= MAX_FDS

    # compaction across every segment of each log (but the first), then reads are still right
    for p, lg in enumerate(logs[1:], start=1):
        LogCleaner().clean(lg, 0, lg.log_end_offset)
        latest = {}
        for offset, key, value in expected[p]:
            latest[key] = (offset, key, value)
        kept = read_all(lg)
        assert {r[1]: r for r in kept} == latest
        # the active segment is never cleaned: its records are all there
        tail = [r for r in expected[p] if r[0] >= lg.active.base_offset]
        assert kept[-len(tail) :] == tail
        assert segment_fds(root) <= MAX_FDS

    # truncation and deletion (DeleteRecords) on segments let go of, then a clean reopen
    lg = logs[0]
    cut = lg.segments[len(lg.segments) // 2].base_offset + 1
    lg.truncate_to(cut)
    start = lg.segments[1].base_offset
    lg.advance_log_start(start)
    survivors = read_all(lg)
    assert survivors == [r for r in expected[0] if start <= r[0] < cut]
    before_close = [read_all(other) for other in logs]
    for other in logs:
        other.close()
    starts = [start] + [0] * (PARTITIONS - 1)  # (the manager's checkpoint would give them)
    reopened = [
        Log(os.path.join(root, f"t-{p}"), "t", p, config(), log_start_offset=starts[p])
        for p in range(PARTITIONS)
    ]
    assert [read_all(lg) for lg in reopened] == before_close
    assert segment_fds(root) <= MAX_FDS


def test_retention_and_recovery_with_segments_let_go_of(tmp_path, few_open):
    root = str(tmp_path)
    old = int(time.time() * 1000) - 10 * 86_400_000
    logs = [
        Log(os.path.join(root, f"r-{p}"), "r", p, config(retention_ms=86_400_000))
        for p in range(PARTITIONS)
    ]
    for i in range(10):
        for lg in logs:
            append(lg, "k", f"old-{i}" * 4, ts=old)
    for i in range(5):
        for lg in logs:
            append(lg, "k", f"new-{i}" * 4, ts=int(time.time() * 1000))
    for lg in logs:
        assert lg.apply_retention(int(time.time() * 1000)) > 0
        assert [r[2] for r in read_all(lg)][-5:] == [f"new-{i}" * 4 for i in range(5)]
    # a crash: nothing closed or trimmed; recovery scans every segment through the LRU
    for lg in logs:
        for seg in lg.segments:
            seg.release()
    recovered = [
        Log(
            os.path.join(root, f"r-{p}"),
            "r",
            p,
            config(retention_ms=86_400_000),
            recovery_point=0,
            log_start_offset=logs[p].log_start_offset,
            clean_shutdown=False,
        )
        for p in range(PARTITIONS)
    ]
    for before, after in zip(logs, recovered, strict=True):
        assert after.log_end_offset == before.log_end_offset
        assert read_all(after)[-5:] == [
            (before.log_end_offset - 5 + i, "k", f"new-{i}" * 4) for i in range(5)
        ]
    assert segment_fds(root) <= MAX_FDS


def test_a_region_outlives_its_segment_being_let_go_of_or_deleted(tmp_path, few_open):
    root = str(tmp_path)
    lg = Log(os.path.join(root, "f-0"), "f", 0, config())
    for i in range(12):
        append(lg, "k", f"value-{i}" * 3)
    first = lg.read(0, 1 << 20, lg.log_end_offset, True)
    assert first is not None
    want = os.pread(first.file.fileno(), first.length, first.position)
    # other logs' segments push the first segment out of the LRU
    others = [Log(os.path.join(root, f"o-{p}"), "o", p, config()) for p in range(LIMIT + 2)]
    for other in others:
        append(other, "x", "y")
    assert lg.segments[0]._file is None, "the LRU let go of the first segment"
    assert os.pread(first.file.fileno(), first.length, first.position) == want
    # retention removes the segment's files: the region still reads what it was handed
    lg.advance_log_start(lg.segments[1].base_offset)
    assert not os.path.exists(os.path.join(root, "f-0", f"{0:020d}.log"))
    assert os.pread(first.file.fileno(), first.length, first.position) == want
    del first
    assert segment_fds(root) <= MAX_FDS
