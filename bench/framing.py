"""Produce-time record framing micro-benchmark: `python -m bench.framing` prints a markdown table.

Times `odradek.wire.records.check_framing` (run by the log validator, as Kafka's LogValidator,
for every produced batch) per record, over the records section of a batch of typical shape:
librdkafka's (no key, no headers, 100 B or 1 KiB values), keyed records with a header, and tiny
records where the walk itself is all the cost. Each implementation available is timed: the
pure-Python walk (`check_framing_py`) and the C accelerator (`odradek.wire._framing`) when it
was built. Results are the best of `--repeat` runs of `--number` calls.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable

from odradek.wire.batch import HEADER_SIZE
from odradek.wire.records import build_batch, check_framing_py, framing_implementations

BASE_TS = 1_700_000_000_000


def cases() -> list[tuple[str, bytes, int]]:
    """(label, batch bytes, record count) for each workload."""
    out: list[tuple[str, bytes, int]] = []

    def add(label: str, records: list) -> None:
        out.append((label, build_batch(records), len(records)))

    add("1000 x 100 B, no key", [(None, b"v" * 100, (), BASE_TS + i) for i in range(1000)])
    add("1000 x 1 KiB, no key", [(None, b"v" * 1024, (), BASE_TS + i) for i in range(1000)])
    add(
        "1000 x 100 B, key + 1 header",
        [(b"key-%d" % i, b"v" * 100, [("trace", b"abc")], BASE_TS + i) for i in range(1000)],
    )
    add("10000 x 10 B, no key", [(None, b"v" * 10, (), BASE_TS + i) for i in range(10000)])
    add("10 x 100 B, no key", [(None, b"v" * 100, (), BASE_TS + i) for i in range(10)])
    return out


def _best_ns_per_record(run: Callable[[], object], records: int, number: int, repeat: int) -> float:
    run()
    return min(timeit.repeat(run, number=number, repeat=repeat)) / number / records * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.framing", description=__doc__)
    parser.add_argument("--number", type=int, default=200, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs; the best is kept")
    args = parser.parse_args(argv)
    impls = framing_implementations()
    names = list(impls)
    print("| batch | bytes | " + " | ".join(f"{n} ns/record" for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for label, data, count in cases():
        cells = []
        for name in names:
            fn = impls[name]
            number = args.number if fn is not check_framing_py else max(1, args.number // 10)

            def run(fn=fn, data=data, count=count) -> None:
                fn(data, HEADER_SIZE, len(data), count)

            cells.append(f"{_best_ns_per_record(run, count, number, args.repeat):.1f}")
        print(f"| {label} | {len(data)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
