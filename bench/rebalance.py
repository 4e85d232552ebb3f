"""The rebalance row: how long a group of three takes to make room for a fourth member, with the
classic protocol and with KIP-848's (`group.protocol=consumer`), both with confluent-kafka.

Three consumers subscribe to one topic (12 partitions by default) and settle; then a fourth
subscribes, and the time runs from its `subscribe()` until the four own disjoint, non-empty
shares covering every partition (as their rebalance callbacks report them through
`assignment()`), all four polled in one thread. Clients keep their defaults: the classic ones
librdkafka's eager `range,roundrobin` with heartbeat.interval.ms 3000 (a rebalance stops every
member and waits for all to rejoin), the KIP-848 ones the broker's assignor and
group.consumer.heartbeat.interval.ms (5000): the others give up partitions one heartbeat after the
newcomer joined and go on consuming the rest meanwhile.

`python -m bench.rebalance` spawns a broker (or uses `--bootstrap`) and prints the table;
`python -m bench --rebalance` adds the rows' summary to the benchmark's notes.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer

from bench.topics import Topics

PROTOCOLS = ("classic", "consumer")
SETTLE_TIMEOUT_S = 90.0


class RebalanceError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class RebalanceResult:
    protocol: str
    partitions: int
    first_three_s: float  # from the first subscribe() to three settled members
    fourth_s: float  # from the fourth subscribe() to four settled members


def _consumer(bootstrap: str, group: str, protocol: str, n: int) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"odradek-bench-rebalance-{n}",
        "enable.auto.commit": False,
        "auto.offset.reset": "latest",
    }
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    return Consumer(conf)


def _settled(consumers: list[Consumer], partitions: int) -> bool:
    shares = [{tp.partition for tp in c.assignment()} for c in consumers]
    union = set().union(*shares)
    return all(shares) and len(union) == partitions == sum(len(s) for s in shares)


def _wait(consumers: list[Consumer], partitions: int, what: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not _settled(consumers, partitions):
        if time.monotonic() > deadline:
            shares = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
            raise RebalanceError(f"{what} not settled in {SETTLE_TIMEOUT_S:.0f} s: {shares}")
        for c in consumers:
            c.poll(0.02)


def fourth_member(bootstrap: str, protocol: str, partitions: int = 12) -> RebalanceResult:
    topics = Topics(bootstrap)
    topic = f"bench-rebalance-{protocol}-{uuid.uuid4().hex[:8]}"
    topics.create(topic, partitions, 1)
    group = topic + "-g"
    consumers: list[Consumer] = []
    try:
        start = time.monotonic()
        for n in range(3):
            consumers.append(_consumer(bootstrap, group, protocol, n))
            consumers[-1].subscribe([topic])
        _wait(consumers, partitions, f"{protocol}: three members")
        first = time.monotonic() - start
        start = time.monotonic()
        consumers.append(_consumer(bootstrap, group, protocol, 3))
        consumers[-1].subscribe([topic])
        _wait(consumers, partitions, f"{protocol}: four members")
        return RebalanceResult(protocol, partitions, first, time.monotonic() - start)
    finally:
        for c in consumers:
            c.close()


def notes(bootstrap: str, partitions: int = 12) -> list[str]:
    """One line per protocol, for `python -m bench --rebalance`."""
    out = []
    for protocol in PROTOCOLS:
        r = fourth_member(bootstrap, protocol, partitions)
        out.append(
            f"rebalance ({protocol} protocol, confluent-kafka defaults): a fourth member joining "
            f"three on {r.partitions} partitions settles in {r.fourth_s:.2f} s "
            f"(the first three: {r.first_three_s:.2f} s)"
        )
    return out


def table(results: list[RebalanceResult]) -> str:
    lines = [
        "| group protocol | partitions | three members settle (s) | fourth member settles (s) |",
        "|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.protocol} | {r.partitions} | {r.first_three_s:.2f} | {r.fourth_s:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.rebalance", description=__doc__)
    p.add_argument("--bootstrap", help="an existing broker (default: spawn odradek serve)")
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument(
        "--broker-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config of the spawned broker (e.g. group.consumer.heartbeat.interval.ms=1000)",
    )
    a = p.parse_args(argv)
    try:
        if a.bootstrap:
            results = [fourth_member(a.bootstrap, pr, a.partitions) for pr in PROTOCOLS]
        else:
            from bench.broker_proc import OdradekProcess

            overrides = dict(kv.split("=", 1) for kv in a.broker_override)
            with OdradekProcess(overrides=overrides) as broker:
                broker.start()
                results = [fourth_member(broker.bootstrap, pr, a.partitions) for pr in PROTOCOLS]
    except RebalanceError as exc:
        print(f"bench.rebalance: {exc}", file=sys.stderr)
        return 1
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
