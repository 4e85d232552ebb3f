"""`LoopThread`, the event-loop thread under the in-process `Broker` and `Cluster`."""

from __future__ import annotations

import asyncio
import threading

import pytest

from odradek.testing.loop_thread import LoopThread


def test_call_runs_on_the_loop_thread_and_awaits_coroutines() -> None:
    steps: list[str] = []

    async def boot() -> None:
        steps.append("boot")

    async def teardown() -> None:
        steps.append("teardown")

    thread = LoopThread("test-loop", timeout=10.0)
    thread.start(boot, teardown)
    try:
        assert thread.running
        assert thread.call(lambda: threading.current_thread().name) == "test-loop"

        async def add(a: int, b: int) -> int:
            await asyncio.sleep(0)
            return a + b

        assert thread.call(add, 2, 3) == 5
    finally:
        thread.stop()
    assert not thread.running
    assert steps == ["boot", "teardown"]
    thread.stop()  # stopping twice is harmless


def test_a_failing_boot_is_raised_to_the_caller_after_teardown() -> None:
    torn_down = threading.Event()

    async def boot() -> None:
        raise OSError("address in use")

    async def teardown() -> None:
        torn_down.set()

    thread = LoopThread("test-loop", timeout=10.0)
    with pytest.raises(OSError, match="address in use"):
        thread.start(boot, teardown)
    assert torn_down.is_set()
    assert not thread.running
    thread.stop()


def test_a_stuck_loop_is_reported_with_its_stack(monkeypatch, caplog) -> None:
    """In-process brokers share their loop thread: one blocking call stops them all. The
    watch logs where the loop is stuck, so a test that times out says why."""
    import time

    from odradek.testing import loop_thread

    monkeypatch.setattr(loop_thread, "STALL_S", 1.0)
    thread = LoopThread("stuck-loop", timeout=30.0)

    async def boot() -> None:
        pass

    def blocking_call_in_a_broker() -> None:
        time.sleep(3.0)

    thread.start(boot)
    try:
        with caplog.at_level("WARNING", logger=loop_thread.__name__):
            thread.call(blocking_call_in_a_broker)
    finally:
        thread.stop()
    # (other loops of the process, the shared brokers', are watched too: only this one's count)
    prefix = "stuck-loop: event loop stuck for "
    reports = [r.getMessage() for r in caplog.records if r.getMessage().startswith(prefix)]
    assert reports and "in blocking_call_in_a_broker" in reports[0]
