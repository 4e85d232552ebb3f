"""Bounded, seeded live fuzzing of an in-process broker (issue 11, "a fuzz harness").

Rounds of mutated requests for every advertised API (bit flips, wrong lengths, -1 and huge
counts, unknown versions, truncated and slow partial frames) over several connections, for
ODRADEK_FUZZ_SECONDS (default 30; `python -m bench.fuzz` soaks longer) with seed
ODRADEK_FUZZ_SEED (default 20261124). After every round: a real client (confluent-kafka) still
produces and reads back a record, nothing was logged with a traceback or at ERROR, and the
process's anonymous memory (the broker is in-process) stayed under 200 MB. Timings are not
asserted; `python -m bench.fuzz` reports the worst stall. A failure names its seed and round,
which `python -m bench.fuzz --seed S --first-round R --rounds 1` replays.
"""

from __future__ import annotations

import os
import time

import pytest

from odradek.testing import Broker
from odradek.testing.fuzz import CHECK_TOPIC, FUZZ_TOPIC, LiveFuzzer, TracebackCatcher

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("ODRADEK_FUZZ_SECONDS", "30"))
SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "20261124"))


def test_live_fuzz_keeps_the_broker_serving() -> None:
    problems: list[str] = []
    rounds = 0
    with Broker(topics={FUZZ_TOPIC: 1, CHECK_TOPIC: 1}) as broker, TracebackCatcher() as catcher:
        fuzzer = LiveFuzzer(broker.bootstrap, SEED, probe_timeout=5.0)
        started = time.monotonic()
        while rounds == 0 or time.monotonic() - started < SECONDS:
            result = fuzzer.run_round(rounds, catcher)
            problems += result.problems
            rounds += 1
            if problems:
                break
    assert not problems, f"seed {SEED}, {rounds} rounds:\n" + "\n".join(problems)
