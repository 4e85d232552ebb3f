"""Fill the examples' input topics: page views, and transactions to commit or abort.

    python -m spark_examples.generate --bootstrap localhost:9092 page-views \
        --topic page-views --count 600 --partitions 3
    python -m spark_examples.generate --bootstrap localhost:9092 transactions \
        --topic payments --committed 3 --aborted 2 --per-txn 5

Page views are deterministic: view `i` is by `user-(i % users)` of `/page/(i % pages)`, at
`start + i * step` ms. The key is the user, the value JSON
`{"seq": i, "user": ..., "page": ..., "ts": ...}`, and the record timestamp (CreateTime) is
`ts`, so the event time Spark and Flink window on is the Kafka timestamp. `start` defaults to
the whole minute an hour ago: recent enough for the broker's retention, and windows line up.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from spark_examples import kafka_io
from spark_examples.session import base_parser

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class PageView:
    seq: int
    user: str
    page: str
    ts: int  # epoch milliseconds, also the Kafka record timestamp

    def key(self) -> bytes:
        return self.user.encode()

    def partition(self, partitions: int) -> int:
        return int(self.user.rsplit("-", 1)[1]) % partitions

    def value(self) -> bytes:
        return json.dumps(
            {"seq": self.seq, "user": self.user, "page": self.page, "ts": self.ts},
            separators=(",", ":"),
        ).encode()


def default_start() -> int:
    """The start of the minute one hour ago, in epoch ms."""
    now = int(time.time() * 1000)
    return (now - 60 * MINUTE_MS) // MINUTE_MS * MINUTE_MS


def page_views(
    count: int,
    *,
    start: int | None = None,
    users: int = 5,
    pages: int = 4,
    step_ms: int = 7_000,
    first_seq: int = 0,
) -> list[PageView]:
    start = default_start() if start is None else start
    return [
        PageView(i, f"user-{i % users}", f"/page/{i % pages}", start + i * step_ms)
        for i in range(first_seq, first_seq + count)
    ]


def views_per_minute(views: Sequence[PageView]) -> dict[tuple[int, str], int]:
    """What the windowed aggregation must produce: (minute start ms, user) -> views."""
    return dict(Counter((v.ts // MINUTE_MS * MINUTE_MS, v.user) for v in views))


def produce_page_views(
    bootstrap: str, topic: str, views: Sequence[PageView], *, partitions: int = 3
) -> list[kafka_io.Record]:
    """Create the topic if needed and send the views, keyed by user, to partition
    (user number % partitions): one user's views stay in order in one partition, and which
    partition holds what does not depend on a client's hash. Returns the acks."""
    kafka_io.create_topic(bootstrap, topic, partitions)
    return kafka_io.produce(
        bootstrap, topic, ((v.key(), v.value(), v.ts, v.partition(partitions)) for v in views)
    )


@dataclass(frozen=True, slots=True)
class Payment:
    txn: int
    n: int
    committed: bool

    def value(self) -> bytes:
        return json.dumps(
            {"txn": self.txn, "n": self.n, "committed": self.committed}, separators=(",", ":")
        ).encode()


def payments(committed: int, aborted: int, per_txn: int) -> list[list[Payment]]:
    """Transactions in send order: committed and aborted ones interleaved, committed first."""
    # C A C A ...: aborted records sit between committed ones in the log.
    order: list[bool] = []
    left_c, left_a = committed, aborted
    while left_c or left_a:
        if left_c:
            order.append(True)
            left_c -= 1
        if left_a:
            order.append(False)
            left_a -= 1
    return [[Payment(t, n, commit) for n in range(per_txn)] for t, commit in enumerate(order)]


def produce_payments(
    bootstrap: str, topic: str, txns: Sequence[Sequence[Payment]], transactional_id: str
) -> None:
    kafka_io.create_topic(bootstrap, topic, 1)
    kafka_io.produce_transactions(
        bootstrap,
        topic,
        [(txn[0].committed, [(f"txn-{p.txn}".encode(), p.value()) for p in txn]) for txn in txns],
        transactional_id,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    pv = sub.add_parser("page-views", help="page views keyed by user, timestamped")
    pv.add_argument("--topic", default="page-views")
    pv.add_argument("--count", type=int, default=600)
    pv.add_argument("--partitions", type=int, default=3)
    pv.add_argument("--users", type=int, default=5)
    pv.add_argument("--start-ms", type=int, default=None, help="first view's timestamp")
    pv.add_argument("--first-seq", type=int, default=0, help="seq of the first view")
    tx = sub.add_parser("transactions", help="committed and aborted transactions")
    tx.add_argument("--topic", default="payments")
    tx.add_argument("--committed", type=int, default=3)
    tx.add_argument("--aborted", type=int, default=2)
    tx.add_argument("--per-txn", type=int, default=5)
    tx.add_argument("--transactional-id", default="spark-examples-payments")
    args = parser.parse_args(argv)

    if args.what == "page-views":
        views = page_views(
            args.count, start=args.start_ms, users=args.users, first_seq=args.first_seq
        )
        acks = produce_page_views(args.bootstrap, args.topic, views, partitions=args.partitions)
        print(f"sent {len(acks)} page views to {args.topic}: ts {views[0].ts}..{views[-1].ts}")
    else:
        txns = payments(args.committed, args.aborted, args.per_txn)
        produce_payments(args.bootstrap, args.topic, txns, args.transactional_id)
        print(
            f"sent {args.committed} committed and {args.aborted} aborted transactions of "
            f"{args.per_txn} records to {args.topic}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
