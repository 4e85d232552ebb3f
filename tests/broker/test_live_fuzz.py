"""Bounded, seeded live fuzzing of an in-process broker.

Rounds of mutated requests for every advertised API (bit flips, wrong lengths, -1 and huge
counts, unknown versions, truncated and slow partial frames) and of well-formed requests full of
hostile values (odradek.testing.hostile) over several connections: ODRADEK_FUZZ_ROUNDS rounds
(default 40), and more while ODRADEK_FUZZ_SECONDS (default 0) have not passed (`python -m
bench.fuzz` soaks longer), with seed ODRADEK_FUZZ_SEED (default 20261124). A connection that
does not answer its end-of-round probe within a second (a long-poll Fetch or a JoinGroup waiting
out its rebalance delay holds it, as on Kafka) is counted as stalled and closed, not asserted on.
After every round: a real client (confluent-kafka) still produces and reads back a record,
nothing was logged with a traceback or at ERROR and no thread or finalizer failed
(`TracebackCatcher`), and the process's anonymous memory (the broker is in-process) grew by at
most 160 MB since the fuzzing began (a bound on growth: the test session holds whatever its
earlier tests loaded, 200 MB and more by this test in a full run). Timings are not asserted;
`python -m bench.fuzz` reports the worst stall. A failure names its seed and round, which
`python -m bench.fuzz --seed S --first-round R --rounds 1` replays.

The catcher itself is tested first: a handler's exception, a traceback logged under a quiet
root logger or formatted into a warning, a thread's exception and an unraisable one all count.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import struct
import threading
import time
import traceback
from collections.abc import Iterator

import pytest

from odradek.broker.network.registry import REGISTRY
from odradek.testing import Broker
from odradek.testing.fuzz import (
    CHECK_TOPIC,
    FUZZ_TOPIC,
    LiveFuzzer,
    TracebackCatcher,
    frame_gap,
)
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

ROUNDS = int(os.environ.get("ODRADEK_FUZZ_ROUNDS", "40"))
SECONDS = float(os.environ.get("ODRADEK_FUZZ_SECONDS", "0"))
SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "20261124"))
log = logging.getLogger("odradek.broker.handlers.test")


@pytest.mark.slow
def test_live_fuzz_keeps_the_broker_serving() -> None:
    problems: list[str] = []
    rounds = 0
    with Broker(topics={FUZZ_TOPIC: 1, CHECK_TOPIC: 1}) as broker, TracebackCatcher() as catcher:
        fuzzer = LiveFuzzer(broker.bootstrap, SEED, probe_timeout=1.0)
        started = time.monotonic()
        while rounds < ROUNDS or time.monotonic() - started < SECONDS:
            result = fuzzer.run_round(rounds, catcher)
            problems += result.problems
            rounds += 1
            if problems:
                break
    assert not problems, f"seed {SEED}, {rounds} rounds:\n" + "\n".join(problems)


# -- the catcher ---------------------------------------------------------------------------------


@pytest.fixture
def broken_handler() -> Iterator[ApiKey]:
    """DescribeCluster's handler replaced by one that raises, as a handler bug would."""
    key = ApiKey.DESCRIBE_CLUSTER
    saved = REGISTRY[key]

    async def broken(ctx: object, req: object) -> object:
        raise AttributeError("'NoneType' object has no attribute 'bytes'")

    REGISTRY[key] = dataclasses.replace(saved, handler=broken)
    try:
        yield key
    finally:
        REGISTRY[key] = saved


def test_a_round_reports_a_handler_that_raised(broken_handler: ApiKey) -> None:
    with Broker() as broker, TracebackCatcher() as catcher:
        with RawClient(broker.bootstrap) as client:
            client.send(client.encode(protocol.DescribeClusterRequest(), 0)[1])
            assert client.outcome() == "closed"
        fuzzer = LiveFuzzer(
            broker.bootstrap, SEED, requests=0, check_client=lambda _bootstrap, _round: None
        )
        result = fuzzer.run_round(0, catcher)
    assert any("AttributeError" in p for p in result.problems), result.problems


def test_the_catcher_sees_an_exception_logged_under_a_quiet_root_logger() -> None:
    root = logging.getLogger()
    saved = root.level
    root.setLevel(logging.CRITICAL)
    try:
        with TracebackCatcher() as catcher:
            try:
                raise KeyError("handler")
            except KeyError:
                log.exception("closing connection after an internal error")
        assert [r.getMessage() for r in catcher.bad] == [
            "closing connection after an internal error"
        ]
        assert root.level == logging.CRITICAL  # put back, not only while catching
    finally:
        root.setLevel(saved)


def test_the_catcher_sees_a_traceback_formatted_into_a_warning() -> None:
    with TracebackCatcher() as catcher:
        try:
            raise ValueError("bad")
        except ValueError:
            log.warning("request failed:\n%s", traceback.format_exc())
    assert len(catcher.bad) == 1


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_catcher_sees_a_thread_that_died() -> None:
    def fail() -> None:
        raise RuntimeError("in a thread")

    hook = threading.excepthook
    with TracebackCatcher() as catcher:
        thread = threading.Thread(target=fail, name="fsync-worker")
        thread.start()
        thread.join()
    assert [r.getMessage() for r in catcher.bad] == ["exception in thread fsync-worker"]
    assert threading.excepthook is hook


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_catcher_sees_an_unraisable_exception() -> None:
    class Finalizer:
        def __del__(self) -> None:
            raise RuntimeError("in a finalizer")

    with TracebackCatcher() as catcher:
        Finalizer()
        gc.collect()
    assert len(catcher.bad) == 1 and catcher.bad[0].exc_info is not None
    assert isinstance(catcher.bad[0].exc_info[1], RuntimeError)


def test_frame_gap_completes_the_frame_a_lying_size_left_open() -> None:
    frame = struct.pack(">i", 3) + b"abc"
    assert frame_gap(frame) == 0
    assert frame_gap(frame + struct.pack(">i", 10) + b"xy") == 8  # a size that claims more
    assert frame_gap(frame + b"\x00\x00") == 2 + 0  # half a size prefix, completed as size 0
    assert frame_gap(frame + b"\x00\x00\x01") == 1 + 256
    assert frame_gap(struct.pack(">i", -1) + b"abc") is None  # the broker closes
    assert frame_gap(struct.pack(">i", 1 << 30)) is None  # too much to send
