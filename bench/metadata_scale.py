"""`python -m bench.metadata_scale`: the full Metadata round trip with many partitions, alone.

The Metadata row of `python -m bench --against kafka --scale` without the rest of that run (no
records, no restart, no idle connections): one spawned `odradek serve`, `--topics` x
`--partitions` (default 1,000 x 10) created with CreateTopics, then `--runs` Metadata v12
requests for every topic on one connection (bench.scale's raw request). Printed: the round
trip's median and max, the response size, and the broker's CPU milliseconds per request
(utime + stime over the runs: what the loaded machine's wall clock hides). `--profile FILE`
runs the broker under cProfile (its stats are written when it stops).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from bench import scale
from bench.broker_proc import OdradekProcess
from bench.procstat import cpu_seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.metadata_scale", description=__doc__)
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=10)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--profile", type=Path, default=None, help="cProfile the broker into FILE")
    opts = p.parse_args(argv)
    names = [f"scale-{i:05d}" for i in range(opts.topics)]
    with OdradekProcess(profile_to=opts.profile) as broker:
        broker.start()
        scale.create_topics(broker.bootstrap, names, opts.partitions, batch=100)
        scale.metadata_times(broker.port, 3)  # warm: first answers, imports
        cpu0 = cpu_seconds(broker.pid)
        times, size = scale.metadata_times(broker.port, opts.runs)
        cpu_ms = (cpu_seconds(broker.pid) - cpu0) * 1000 / opts.runs
    print(
        f"Metadata v12, {opts.topics:,} topics x {opts.partitions} partitions, {opts.runs} runs: "
        f"p50 {statistics.median(times):.2f} ms, max {max(times):.2f} ms, {size / 1e3:,.1f} KB, "
        f"broker CPU {cpu_ms:.2f} ms a request (load {os.getloadavg()[0]:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
