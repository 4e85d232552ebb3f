"""Live protocol fuzzing of an in-process broker: `python -m bench.fuzz --seconds 600 --seed N`.

Runs `odradek.testing.fuzz.LiveFuzzer` rounds (mutated requests for every advertised API over
several connections) against an in-process `odradek.testing.Broker` until the time is up, with
the checks of tests/broker/test_live_fuzz.py after every round (a real client still produces and
consumes, no traceback logged, RssAnon under the limit) plus a stall probe: an ApiVersions
request every 10 ms on its own connection, whose worst round trip is how long the broker kept a
bystander waiting (reported, not asserted). Prints a markdown table; exit status 1 when a check
failed. A failing round replays alone with `--seed N --first-round R --rounds 1`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from odradek.testing import Broker
from odradek.testing.fuzz import (
    CHECK_TOPIC,
    FUZZ_TOPIC,
    LiveFuzzer,
    StallProbe,
    TracebackCatcher,
    rss_anon_bytes,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0, help="fuzz for this long")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first-round", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--requests", type=int, default=150, help="requests per round")
    parser.add_argument("--rss-growth-limit-mb", type=int, default=160)
    parser.add_argument(
        "--probe-timeout", type=float, default=5.0, help="s to wait for a connection's probe"
    )
    parser.add_argument("--verbose", action="store_true", help="print each round")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger().handlers[0].setLevel(logging.ERROR)  # count warnings, print errors

    problems: list[str] = []
    rounds = sent = closed = stalled = tracebacks = 0
    rss_before = rss_anon_bytes()
    started = time.monotonic()
    with (
        Broker(topics={FUZZ_TOPIC: 1, CHECK_TOPIC: 1}) as broker,
        TracebackCatcher() as catcher,
        StallProbe(broker.bootstrap) as probe,
    ):
        fuzzer = LiveFuzzer(
            broker.bootstrap,
            args.seed,
            connections=args.connections,
            requests=args.requests,
            rss_growth_limit=args.rss_growth_limit_mb << 20,
            probe_timeout=args.probe_timeout,
        )
        round_no = args.first_round
        while time.monotonic() - started < args.seconds and (
            args.rounds is None or rounds < args.rounds
        ):
            result = fuzzer.run_round(round_no, catcher)
            rounds += 1
            sent += result.sent
            closed += result.closed
            stalled += result.stalled
            tracebacks += result.tracebacks
            if args.verbose or result.problems:
                print(
                    f"round {round_no}: sent {result.sent}, closed {result.closed}, "
                    f"stalled {result.stalled}, RssAnon {result.rss_anon >> 20} MB",
                    file=sys.stderr,
                )
            for line in result.problems:
                print(f"  seed {args.seed}: {line}", file=sys.stderr)
            problems += result.problems
            round_no += 1
        warnings = catcher.warnings
    elapsed = time.monotonic() - started
    print(
        "| seed | rounds | requests | s | connections closed by the broker | stalled "
        "| warnings | tracebacks / errors logged | worst stall ms (probe) | probe failures "
        "| RssAnon start/peak MB | problems |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    print(
        f"| {args.seed} | {rounds} | {sent} | {elapsed:.0f} | {closed} | {stalled} | {warnings} "
        f"| {tracebacks} | {probe.worst * 1000:.0f} | {probe.failures} "
        f"| {rss_before >> 20}/{fuzzer.peak_rss >> 20} | {len(problems)} |"
    )
    suspects = [
        f"round {r}: {label}"
        for at, r, label in fuzzer.sent_log
        if probe.worst_at - 1.0 <= at <= probe.worst_at + probe.worst
    ]
    print(f"\nsent within 1 s before and during the worst stall ({probe.worst * 1000:.0f} ms):")
    for line in suspects[-15:]:
        print(f"- {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
