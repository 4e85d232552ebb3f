"""`python -m bench.chaos`: the long chaos soak (odradek.testing.chaos) over many seeds.

    python -m bench.chaos --seeds 1000              # seeds 0..999, a summary table at the end
    python -m bench.chaos --seed 17                 # one seed again, with its schedule
    python -m bench.chaos --seeds 50 --start 1000 --duration 6

Each seed starts a fresh three-broker in-process cluster, runs its fault schedule under an
idempotent producer, a transactional producer, group consumers and a monitor, and checks the
history. Every failing seed is printed with its schedule and anomalies as it happens (and
appended to `--failures FILE` when given). Exit status: 0 every seed valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter

from odradek.testing.chaos import Options, Result, run_seed
from odradek.testing.chaos.checker import summarize


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=20, help="how many seeds (default 20)")
    p.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--seed", type=int, action="append", help="run this seed (repeatable)")
    p.add_argument("--duration", type=float, default=Options.duration, help="seconds of faults")
    p.add_argument("--max-fault", type=float, default=Options.max_fault_s, help="longest fault")
    p.add_argument("--failures", help="append failing seeds' explanations to this file")
    p.add_argument("--stop-on-failure", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true", help="print every seed's schedule")
    return p.parse_args(argv)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.CRITICAL)  # the brokers' own logs would drown the table
    seeds = args.seed or list(range(args.start, args.start + args.seeds))
    opts = Options(duration=args.duration, max_fault_s=args.max_fault)
    results: list[Result] = []
    failing: list[Result] = []
    crashed: list[tuple[int, str]] = []
    began = time.monotonic()
    for seed in seeds:
        try:
            result = run_seed(seed, opts)
        except Exception as exc:  # a harness failure: report it with the seed, keep going
            crashed.append((seed, f"{type(exc).__name__}: {exc}"))
            print(f"seed {seed}: harness error {exc!r}", flush=True)
            if args.stop_on_failure:
                break
            continue
        results.append(result)
        status = "ok" if result.valid else "FAIL"
        print(f"seed {seed}: {status} in {result.elapsed:.1f}s", flush=True)
        if args.verbose or not result.valid:
            print(result.explain(), flush=True)
        if not result.valid:
            failing.append(result)
            if args.failures:
                with open(args.failures, "a") as fh:
                    fh.write(result.explain() + "\n\n")
            if args.stop_on_failure:
                break
    print(_summary(results, failing, crashed, time.monotonic() - began))
    return 0 if not failing and not crashed else 1


def _summary(
    results: list[Result], failing: list[Result], crashed: list[tuple[int, str]], wall: float
) -> str:
    faults: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    anomalies: Counter[str] = Counter()
    known: Counter[str] = Counter()  # client behaviour (checker.epochs): counted, never hidden
    for r in results:
        faults.update(f.kind for f in r.schedule.faults)
        for op in r.history.ops:
            if op.type != "invoke" and op.f not in ("nemesis", "final"):
                ops[op.f] += 1
                outcomes[op.type] += 1
        anomalies.update(summarize(r.report.anomalies))
        known.update(summarize(r.report.known))
    lines = [
        "",
        "## chaos soak",
        "",
        _row(["seeds", "valid", "failing", "harness errors", "wall s", "s/seed"]),
        _row(["---"] * 6),
        _row(
            [
                str(len(results) + len(crashed)),
                str(len(results) - len(failing)),
                str(len(failing)),
                str(len(crashed)),
                f"{wall:.0f}",
                f"{wall / max(1, len(results) + len(crashed)):.1f}",
            ]
        ),
        "",
        _row(["faults", *sorted(faults)]),
        _row(["---"] * (len(faults) + 1)),
        _row(["count", *(str(faults[k]) for k in sorted(faults))]),
        "",
        _row(["operations", *sorted(ops), "ok", "fail", "info"]),
        _row(["---"] * (len(ops) + 4)),
        _row(
            ["count", *(str(ops[k]) for k in sorted(ops))]
            + [str(outcomes[k]) for k in ("ok", "fail", "info")]
        ),
    ]
    lines += ["", _row(["known client behaviour", "count"]), _row(["---", "---"])]
    lines += [_row([k, str(v)]) for k, v in sorted(known.items())] or [_row(["none", "0"])]
    if anomalies:
        lines += ["", _row(["anomaly", "count"]), _row(["---", "---"])]
        lines += [_row([k, str(v)]) for k, v in sorted(anomalies.items())]
    if failing or crashed:
        lines += ["", "failing seeds: " + " ".join(str(r.seed) for r in failing)]
        lines += [f"harness error, seed {s}: {e}" for s, e in crashed]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
