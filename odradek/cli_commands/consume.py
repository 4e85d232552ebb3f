"""`odradek consume TOPIC`: print record values, one line each, as kafka-console-consumer.sh.

Without `--group` the consumer assigns itself every partition (or `--partition P`) and starts at
the end, or at the start with `--from-beginning`; nothing is committed. With `--group G` it joins
the group (JoinGroup/SyncGroup through the group coordinator), starts from the committed offsets
(`--from-beginning` applies when there are none, like auto.offset.reset=earliest) and commits
what it printed when it stops. `--max N` stops after N records, `--timeout-ms T` after T ms
without a record; Ctrl-C or SIGTERM stop it cleanly. Kafka's layout with `--print-headers`
and `--print-key`: `h1:v1,h2:v2<TAB>key<TAB>value` (NO_HEADERS, null for a missing key or value).
`--json` prints one JSON object per record instead.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from odradek.cli_commands.common import (
    REQUEST_TIMEOUT_MS,
    Closing,
    add_client_options,
    bootstrap,
    connect_timeout_ms,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, Progress, print_json_line, text

POLL_MS = 200
TOPIC_WAIT_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consume", help="print records of a topic, one line per record")
    add_client_options(p)
    p.add_argument("topic")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (with --group: when nothing is committed)",
    )
    p.add_argument("--group", metavar="G", help="consume as a member of this consumer group")
    p.add_argument("--partition", type=int, help="read only this partition (not with --group)")
    p.add_argument("--max", type=int, metavar="N", help="stop after N records")
    p.add_argument(
        "--timeout-ms", type=int, metavar="T", help="stop when no record arrives for T milliseconds"
    )
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    p.add_argument("--print-headers", action="store_true", help="print HEADERS<TAB>... first")
    p.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="print a progress line on stderr every second (default: on a TTY)",
    )
    p.set_defaults(func=run_command(cmd_consume))


def _consumer(args: argparse.Namespace) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap(args),
        client_id="odradek-cli-consumer",
        group_id=args.group,
        enable_auto_commit=args.group is not None,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        isolation_level=args.isolation_level,
        allow_auto_create_topics=False,
        request_timeout_ms=REQUEST_TIMEOUT_MS + 5000,
        bootstrap_timeout_ms=connect_timeout_ms(args),
    )


def _start(consumer: Any, args: argparse.Namespace) -> None:
    from kafka import TopicPartition

    consumer.bootstrap(timeout_ms=connect_timeout_ms(args))
    partitions = consumer.partitions_for_topic(args.topic)
    deadline = time.monotonic() + TOPIC_WAIT_S
    while not partitions and time.monotonic() < deadline:  # a topic created a moment ago
        time.sleep(0.2)
        partitions = consumer.partitions_for_topic(args.topic)
    if not partitions:
        raise CliError(f"topic {args.topic!r} does not exist")
    if args.group is not None:
        consumer.subscribe([args.topic])
        return
    if args.partition is not None:
        if args.partition not in partitions:
            raise CliError(f"topic {args.topic!r} has no partition {args.partition}")
        partitions = {args.partition}
    tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
    consumer.assign(tps)
    if args.from_beginning:
        consumer.seek_to_beginning(*tps)
    else:
        consumer.seek_to_end(*tps)


def _format(record: Any, args: argparse.Namespace) -> bytes:
    parts = []
    if args.print_headers:
        headers = record.headers or []
        parts.append(
            b",".join(k.encode() + b":" + (v if v is not None else b"null") for k, v in headers)
            if headers
            else b"NO_HEADERS"
        )
    if args.print_key:
        parts.append(record.key if record.key is not None else b"null")
    parts.append(record.value if record.value is not None else b"null")
    return b"\t".join(parts) + b"\n"


def _as_json(record: Any) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": text(record.key),
        "value": text(record.value),
        "headers": [[k, text(v)] for k, v in record.headers or []],
    }


class _Stop(Exception):
    pass


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise _Stop()


def cmd_consume(args: argparse.Namespace) -> int:
    if args.group is not None and args.partition is not None:
        raise CliError("--partition cannot be used with --group")
    if args.max is not None and args.max < 0:
        raise CliError("--max must be >= 0")
    as_json = want_json(args)
    progress = Progress(f"consume {args.topic}", enabled=True if args.progress else None)
    out = sys.stdout.buffer
    count = 0
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with Closing(_consumer(args)) as consumer:
            _start(consumer, args)
            idle_since = time.monotonic()
            try:
                while args.max is None or count < args.max:
                    wait_ms = POLL_MS
                    if args.timeout_ms is not None:
                        left = args.timeout_ms - (time.monotonic() - idle_since) * 1000
                        if left <= 0:
                            break
                        wait_ms = int(min(POLL_MS, max(left, 1)))
                    remaining = None if args.max is None else args.max - count
                    batches = consumer.poll(timeout_ms=wait_ms, max_records=remaining)
                    got = 0
                    for records in batches.values():
                        for record in records:
                            if as_json:
                                print_json_line(_as_json(record))
                            else:
                                out.write(_format(record, args))
                            got += 1
                    if got:
                        (sys.stdout if as_json else out).flush()
                        count += got
                        progress.add(got)
                        idle_since = time.monotonic()
            except (KeyboardInterrupt, _Stop):
                pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        progress.done()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
