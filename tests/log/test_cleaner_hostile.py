"""The log cleaner and timestamp lookups facing hostile batches, topic deletion and shutdown
(issue 11, defects 2, 3 and 8)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

from odradek.log.cleaner import WORK_DIR, LogCleaner, LogCleanerService
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.testing.hostile_batches import bomb_batch, bomb_section, raw_batch
from odradek.wire.batch import iter_batches
from odradek.wire.compression import ZSTD
from odradek.wire.records import build_batch

T0 = 1_700_000_000_000
WAIT_S = 10.0


def make_log(tmp_path, **overrides) -> Log:
    settings = {"cleanup_policy": "compact", "segment_bytes": 400, **overrides}
    settings.setdefault("min_cleanable_dirty_ratio", 0.0)
    return Log(str(tmp_path / "topic-0"), "topic", 0, LogConfig(**settings))


def append_raw(lg: Log, data: bytes) -> None:
    batch = bytearray(data)
    lg.append_as_leader(batch, list(iter_batches(batch)), 0, False)


def append(lg: Log, key: str, value: str, ts: int = T0) -> None:
    append_raw(lg, build_batch([(key.encode(), value.encode(), (), ts)]))


def fill(lg: Log, rounds: int = 3) -> None:
    for r in range(rounds):
        for k in range(10):
            append(lg, f"k{k}", f"v{k}-{r}")
    lg.roll()


def stored(lg: Log) -> list[bytes]:
    return [
        seg.read_bytes(bp.position, bp.size) for seg in lg.segments for bp in seg.batches_from(0)
    ]


def errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# -- decompression bombs and unreadable batches already in a log ----------------------------


def test_cleaner_keeps_a_bomb_batch_as_is_and_survives_restarts(tmp_path, caplog) -> None:
    lg = make_log(tmp_path, segment_bytes=100_000)
    bomb = bomb_batch(ZSTD, 1024)  # 35 KB declaring 1 GiB
    append(lg, "a", "old")
    append_raw(lg, bomb)
    append(lg, "a", "new")
    lg.roll()
    caplog.set_level(logging.WARNING)
    for _restart in range(2):  # the same batch at every cleaning, as after each restart
        _plan, stats = LogCleaner().clean(lg, 0, lg.log_end_offset, T0)
        assert stats is not None
    kept = stored(lg)
    assert bomb[16:] in [b[16:] for b in kept]  # byte for byte past offset, length, epoch
    assert len(kept) == 2  # "a" -> "old" is gone, the bomb and "a" -> "new" stay
    warnings = [r.getMessage() for r in caplog.records if "kept as is" in r.getMessage()]
    assert len(warnings) == 2 and "exceed" in warnings[0]
    assert not errors(caplog)


def test_timestamp_lookup_skips_a_bomb_and_bad_framing(tmp_path, caplog) -> None:
    lg = make_log(tmp_path, cleanup_policy="delete", segment_bytes=100_000)
    append(lg, "a", "1", ts=T0)
    append_raw(lg, raw_batch(bomb_section(ZSTD, 1024), 1, codec=ZSTD, timestamp=T0 + 3))
    broken = raw_batch(b"\xfe\xff\xff\xff\x0f" + bytes(52), 1, timestamp=T0 + 5)
    append_raw(lg, broken)
    append(lg, "b", "2", ts=T0 + 10)
    caplog.set_level(logging.WARNING)
    assert lg.offset_for_timestamp(T0 + 1) == (3, T0 + 10)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 2


# -- topic deletion while cleaning (defect 8) ---------------------------------------------------


def paused_cleaner(service: LogCleanerService, resume) -> threading.Event:
    """Make the worker stop at its first batch until resume() says go; returns 'reached'."""
    reached = threading.Event()
    cleaner = service.cleaner
    original = cleaner._filter_batch

    def hook(plan, seg, position, data):
        if not reached.is_set():
            reached.set()
            deadline = time.monotonic() + WAIT_S
            while not resume() and time.monotonic() < deadline:
                time.sleep(0.005)
        return original(plan, seg, position, data)

    cleaner._filter_batch = hook  # type: ignore[method-assign]
    return reached


def test_deleting_the_log_while_it_is_cleaned_aborts_quietly(tmp_path, caplog) -> None:
    lg = make_log(tmp_path)
    fill(lg)
    deleted = threading.Event()
    service = LogCleanerService(lambda: [(lg, lg.log_end_offset)], clock=lambda: T0)
    reached = paused_cleaner(service, deleted.is_set)
    caplog.set_level(logging.INFO)

    async def run() -> int:
        cleaning = asyncio.create_task(service.run_once())
        assert await asyncio.to_thread(reached.wait, WAIT_S)
        lg.delete()  # what DeleteTopics does, on the event loop
        deleted.set()
        return await cleaning

    assert asyncio.run(run()) == 0
    assert not errors(caplog)
    assert not os.path.exists(lg.dir)  # not brought back by the cleaner's work directory
    assert service.cleanings == 0


def test_a_deleted_log_is_skipped_by_the_next_round(tmp_path, caplog) -> None:
    lg = make_log(tmp_path)
    fill(lg)
    end = lg.log_end_offset
    lg.delete()  # after the round took its list of logs
    service = LogCleanerService(lambda: [(lg, end)], clock=lambda: T0)
    caplog.set_level(logging.INFO)
    assert asyncio.run(service.run_once()) == 0
    assert not errors(caplog)
    assert not os.path.exists(lg.dir)


# -- stopping while cleaning (defect 8) -------------------------------------------------------


def test_stop_during_cleaning_waits_for_the_worker_and_nothing_cleans_after(
    tmp_path, caplog
) -> None:
    lg = make_log(tmp_path)
    fill(lg)
    before = stored(lg)
    stop_returned = threading.Event()
    batches_after_stop: list[int] = []
    service = LogCleanerService(lambda: [(lg, lg.log_end_offset)], backoff_ms=10, clock=lambda: T0)
    stopping = getattr(service.cleaner, "stopping", threading.Event())
    reached = paused_cleaner(service, lambda: stop_returned.is_set() or stopping.is_set())
    original = service.cleaner._filter_batch

    def counting(plan, seg, position, data):
        if stop_returned.is_set():
            batches_after_stop.append(position)
        return original(plan, seg, position, data)

    service.cleaner._filter_batch = counting  # type: ignore[method-assign]
    caplog.set_level(logging.INFO)

    async def run() -> None:
        await service.start()
        assert await asyncio.to_thread(reached.wait, WAIT_S)
        await service.stop()
        stop_returned.set()
        # the default executor is shut down here: any worker still running finishes first
        await asyncio.get_running_loop().shutdown_default_executor()

    asyncio.run(run())
    assert not batches_after_stop  # the worker did nothing once stop() had returned
    assert service.cleanings == 0
    assert stored(lg) == before  # the cleaning under way was given up, not swapped in
    assert not os.path.exists(os.path.join(lg.dir, WORK_DIR))
    assert not errors(caplog)
