"""`python -m bench.logappend`: the log layer alone, no network: microseconds (wall and CPU) per
appended 16 KiB batch (16 records of 1,000 B, timestamps growing so each batch adds an offset
and a time index entry), over 1 and over 100 partitions appended to in turn. For before/after
numbers of log-layer changes (issue 17: index entries written per 64, not per entry); run it
interleaved with the other version under the same load and note `uptime`."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import BatchHeader, iter_batches
from odradek.wire.records import build_batch

DISTINCT = 512  # batches built up front (the build is not measured)


def _batches() -> list[tuple[bytes, list[tuple[int, BatchHeader]]]]:
    t0 = int(time.time() * 1000)  # now: an old timestamp would make every append roll
    value = b"x" * 1000
    out = []
    for i in range(DISTINCT):
        b = bytes(build_batch([(None, value, (), t0 + i * 16 + j) for j in range(16)]))
        out.append((b, list(iter_batches(b))))
    return out


def run(partitions: int, count: int, directory: str | None = None) -> tuple[float, float]:
    """(wall us, CPU us) per batch appended to `partitions` logs in turn."""
    batches = _batches()
    root = tempfile.mkdtemp(prefix="logappend-", dir=directory)
    try:
        logs = [Log(os.path.join(root, f"t-{p}"), "t", p, LogConfig()) for p in range(partitions)]
        for k in range(partitions * 2):  # each log's first segment and index are created
            b, parsed = batches[k % DISTINCT]
            logs[k % partitions].append_as_leader(b, parsed, 0, False)
        wall, cpu = time.perf_counter(), time.process_time()
        for k in range(count):
            b, parsed = batches[k % DISTINCT]
            logs[k % partitions].append_as_leader(b, parsed, 0, False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        for lg in logs:
            lg.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return wall / count * 1e6, cpu / count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batches", type=int, default=10_000, help="batches appended per row")
    ap.add_argument("--partitions", default="1,100", help="comma-separated partition counts")
    ap.add_argument("--dir", default=None, help="where the logs go (default: the temp dir)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    for p in (int(x) for x in args.partitions.split(",")):
        wall, cpu = run(p, args.batches, args.dir)
        print(f"append 16 KiB batch, {p} partition(s): {wall:.1f} us wall, {cpu:.1f} us CPU")


if __name__ == "__main__":
    main()
