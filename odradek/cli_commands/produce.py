"""`odradek produce TOPIC`: one record per stdin line, as kafka-console-producer.sh.

Lines are sent with kafka-python's KafkaProducer (Produce, key 0). `--key-separator SEP` splits
each line into key and value at the first SEP (a line without it is an error, as in Kafka's
tool); `--header k=v` adds the same header to every record; `--partition` pins the partition;
`--acks` is the producer's acks (all, 1 or 0). Line terminators (\\n, \\r\\n) are not part of the
value; an empty line is a record with an empty value.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from odradek.cli_commands.common import (
    REQUEST_TIMEOUT_MS,
    Closing,
    add_client_options,
    bootstrap,
    connect_timeout_ms,
    error_message,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, Progress, print_json

FLUSH_TIMEOUT_S = 60.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("produce", help="send stdin lines to a topic, one record per line")
    add_client_options(p)
    p.add_argument("topic")
    p.add_argument(
        "--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE at the first SEP"
    )
    p.add_argument(
        "--header",
        action="append",
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument(
        "--acks",
        choices=["all", "-1", "1", "0"],
        default="all",
        help="acknowledgements to wait for (default all)",
    )
    p.add_argument("--linger-ms", type=int, default=5, help="batching delay (default 5)")
    p.add_argument(
        "--compression",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        default="none",
        help="compression codec (default none)",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="print a progress line on stderr every second (default: on a TTY)",
    )
    p.set_defaults(func=run_command(cmd_produce))


def _headers(items: list[str] | None) -> list[tuple[str, bytes]]:
    out = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--header needs key=value, got {item!r}")
        out.append((key, value.encode()))
    return out


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    for raw in stream:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        yield line


class _Outcome:
    """Delivery results, counted from the producer's callbacks."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def ok(self, _metadata: Any) -> None:
        self.delivered += 1
        self.progress.add()

    def error(self, exc: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = error_message(exc)


def _producer(args: argparse.Namespace) -> Any:
    from kafka import KafkaProducer

    acks: Any = "all" if args.acks in ("all", "-1") else int(args.acks)
    return KafkaProducer(
        bootstrap_servers=bootstrap(args),
        client_id="odradek-cli-producer",
        acks=acks,
        linger_ms=args.linger_ms,
        compression_type=None if args.compression == "none" else args.compression,
        max_block_ms=connect_timeout_ms(args),
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        bootstrap_timeout_ms=connect_timeout_ms(args),
    )


def cmd_produce(args: argparse.Namespace) -> int:
    headers = _headers(args.header)
    sep = args.key_separator.encode() if args.key_separator else None
    if args.key_separator == "":
        raise CliError("--key-separator must not be empty")
    progress = Progress(f"produce {args.topic}", enabled=True if args.progress else None)
    outcome = _Outcome(progress)
    sent = 0
    with Closing(_producer(args)) as producer:
        for number, line in enumerate(_lines(sys.stdin.buffer), 1):
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found:
                    producer.flush(FLUSH_TIMEOUT_S)
                    raise CliError(f"line {number} has no key separator {args.key_separator!r}")
            else:
                value = line
            future = producer.send(
                args.topic, value=value, key=key, headers=headers or None, partition=args.partition
            )
            future.add_callback(outcome.ok)
            future.add_errback(outcome.error)
            sent += 1
        producer.flush(FLUSH_TIMEOUT_S)
    progress.done()
    if want_json(args):
        print_json(
            {
                "topic": args.topic,
                "records": sent,
                "delivered": outcome.delivered,
                "failed": outcome.failed,
                "error": outcome.first_error,
            }
        )
    elif not outcome.failed and outcome.delivered == sent:
        print(f"Produced {outcome.delivered} records to {args.topic}.")
    if outcome.failed or outcome.delivered < sent:
        missing = sent - outcome.delivered
        raise CliError(
            f"{missing} of {sent} records were not delivered"
            + (f": {outcome.first_error}" if outcome.first_error else "")
        )
    return 0
