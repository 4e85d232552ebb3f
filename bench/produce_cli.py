"""`python -m bench.produce_cli`: `odradek produce` against kcat, lines from a file to a topic.

Both tools read the same file of `--lines` lines of `--size` bytes (default 200,000 of 100 B)
and send them to a one-partition topic of a broker started here (`python -m odradek serve`,
stopped at the end) or at `--bootstrap`: kcat as `kcat -P -b B -t T -l FILE`, odradek as
`python -m odradek produce -b B T < FILE`, both with their default settings. Each runs
`--runs` times (default 5, after one warm-up run of each that also writes odradek's bytecode
caches, as a user's second run finds them) alternating, and the table shows the median wall
time, the median CPU seconds of the process (user + system) and odradek's ratio to kcat.
Nothing is asserted; the issue's goal is odradek within 3x of kcat's wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.broker_proc import REPO_ROOT, OdradekProcess

TOPIC = "produce-cli"


def write_lines(path: Path, lines: int, size: int) -> None:
    with open(path, "wb") as f:
        for i in range(lines):
            f.write(b"%08d" % i + b"x" * (size - 8) + b"\n")


def timed(cmd: list[str], stdin_path: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of `cmd` reading `stdin_path`; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(stdin_path, "rb") as stdin:
        proc = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.decode(errors='replace')}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.produce_cli", description=__doc__)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per line, newline included")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bootstrap", help="a running broker instead of a spawned one")
    args = parser.parse_args(argv)
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        print("kcat is not installed", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    with tempfile.TemporaryDirectory(prefix="odradek-bench-produce-") as tmp:
        data = Path(tmp) / "lines.txt"
        write_lines(data, args.lines, args.size - 1)
        broker = None if args.bootstrap else OdradekProcess()
        try:
            if broker is not None:
                broker.start()
            bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "odradek",
                    "topics",
                    "create",
                    "--if-not-exists",
                    "-b",
                    bootstrap,
                    TOPIC,
                    "--partitions",
                    "1",
                ],
                check=True,
                capture_output=True,
                env=env,
                timeout=60,
            )
            commands = {
                "kcat": [kcat, "-P", "-b", bootstrap, "-t", TOPIC, "-l", str(data)],
                "odradek produce": [
                    sys.executable,
                    "-m",
                    "odradek",
                    "produce",
                    "-b",
                    bootstrap,
                    TOPIC,
                ],
            }
            devnull = Path(os.devnull)
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for name, cmd in commands.items():  # warm-up (page cache, bytecode caches)
                timed(cmd, devnull if name == "kcat" else data, env)
            for _ in range(args.runs):
                for name, cmd in commands.items():
                    results[name].append(timed(cmd, devnull if name == "kcat" else data, env))
        finally:
            if broker is not None:
                broker.stop()
    kcat_wall = statistics.median(w for w, _ in results["kcat"])
    print(f"{args.lines:,} lines of {args.size} B, median of {args.runs} runs\n")
    print("| tool | wall s | CPU s | wall / kcat |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"| {name} | {wall:.3f} | {cpu:.3f} | {wall / kcat_wall:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
