"""A consume-transform-produce loop with confluent-kafka, for the exactly-once copy test.

    python -m compat_tests.eos_copy_worker --bootstrap HOST:PORT --input IN --output OUT \
        --group G --transactional-id TID [--batch 25] [--hold-after N]

It copies every record of IN to the same partition of OUT (value prefixed "copy:"), one
transaction per batch, committing the input offsets inside the transaction
(send_offsets_to_transaction). It fences any previous incarnation first (init_transactions
aborts its open transaction), then resumes from the group's committed offsets. Progress is one
JSON object per line, flushed, so a test can kill it at chosen moments:

    {"e": "started", "from": {partition: offset}}
    {"e": "produced", "n": records}        inside an open transaction
    {"e": "holding"}                        --hold-after N: after N commits, the next
                                            transaction's records are flushed and the worker
                                            waits (for its SIGKILL) with the transaction open
    {"e": "committed", "n": records}
    {"e": "idle", "position": total}        nothing to copy right now; total input consumed
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--hold-after", type=int, default=-1)
    args = ap.parse_args(argv)

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": 30000,
            "retry.backoff.ms": 20,
        }
    )
    producer.init_transactions(60)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
    )
    meta = consumer.list_topics(args.input, timeout=30).topics[args.input]
    parts = [TopicPartition(args.input, p) for p in sorted(meta.partitions)]
    start = consumer.committed(parts, timeout=60)
    consumer.assign(
        [
            TopicPartition(
                args.input, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            )
            for tp in start
        ]
    )
    emit(e="started", **{"from": {tp.partition: tp.offset for tp in start}})
    commits = 0
    while True:
        msgs = [
            m for m in consumer.consume(num_messages=args.batch, timeout=0.2) if m.error() is None
        ]
        if not msgs:
            positions = consumer.position(parts)
            emit(e="idle", position=sum(max(tp.offset, 0) for tp in positions))
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(
                args.output, key=m.key(), value=b"copy:" + m.value(), partition=m.partition()
            )
        producer.poll(0)
        emit(e="produced", n=len(msgs))
        if commits == args.hold_after:
            producer.flush(30)
            emit(e="holding")
            sys.stdin.readline()  # never answered: the test kills us here
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
        )
        producer.commit_transaction(60)
        commits += 1
        emit(e="committed", n=len(msgs))


if __name__ == "__main__":
    sys.exit(main())
