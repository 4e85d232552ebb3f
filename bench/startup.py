"""`python -m bench.startup`: how fast a broker starts and stops, in-process and as a process.

In-process: `odradek.testing.Broker().start()` (import excluded, a fresh temp data dir each
time) until a raw ApiVersions request is answered, then `stop()` (teardown, temp dir removed).
Process: `python -m odradek serve` spawned until the first ApiVersions answer, then SIGTERM until
it exits. Targets from issue 7 (reported, not asserted): in-process ready < 50 ms, process
< 300 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.broker_proc import OdradekProcess
from bench.probe import api_versions

RUNS = 5


def _ms(seconds: float) -> float:
    return seconds * 1000


def in_process(runs: int) -> tuple[list[float], list[float]]:
    from odradek.testing import Broker

    ready, teardown = [], []
    for _ in range(runs):
        broker = Broker()
        t0 = time.perf_counter()
        broker.start()
        api_versions("127.0.0.1", broker.port)
        ready.append(_ms(time.perf_counter() - t0))
        t1 = time.perf_counter()
        broker.stop()
        teardown.append(_ms(time.perf_counter() - t1))
    return ready, teardown


def as_process(runs: int) -> tuple[list[float], list[float]]:
    ready, teardown = [], []
    for _ in range(runs):
        proc = OdradekProcess()
        try:
            timing = proc.start()
            ready.append(timing.api_versions_ms)
            t1 = time.perf_counter()
            proc.stop()
            teardown.append(_ms(time.perf_counter() - t1))
        finally:
            if proc.alive:
                proc.stop()
    return ready, teardown


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def render(rows: list[tuple[str, list[float], list[float]]]) -> str:
    lines = [
        "| broker | ready ms, median (range) | teardown ms, median (range) |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {_cell(r)} | {_cell(t)} |" for name, r, t in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args(argv)
    rows = [
        ("in-process odradek.testing.Broker", *in_process(args.runs)),
        ("process `odradek serve`", *as_process(args.runs)),
    ]
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
