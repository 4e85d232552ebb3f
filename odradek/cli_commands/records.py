"""`odradek delete-records`, as kafka-delete-records.sh: DeleteRecords (key 21, KIP-107).

Moves partitions' log start offset (low watermark) up to the given offset; records below it are
gone for every consumer. Partitions come from `--topic T [--partition P ...] --offset N`
(offset -1: the high watermark, i.e. everything) or `--offset-json-file` in Kafka's format:

    {"partitions": [{"topic": "foo", "partition": 1, "offset": 3}], "version": 1}

Prints the new low watermark of each partition, or its error; the status is 1 when any failed.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    read_json_file,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "delete-records",
        help="delete records below an offset (kafka-delete-records)",
        description="Move the log start offset of partitions forward (DeleteRecords).",
    )
    add_client_options(p)
    p.add_argument("--topic", metavar="NAME", help="the topic")
    p.add_argument(
        "--partition",
        type=int,
        action="append",
        metavar="P",
        help="partition (repeatable; default: every partition of --topic)",
    )
    p.add_argument(
        "--offset",
        type=int,
        metavar="N",
        help="delete every record below N (-1: below the high watermark, i.e. all)",
    )
    p.add_argument(
        "--offset-json-file",
        metavar="FILE",
        help='Kafka\'s JSON: {"partitions": [{"topic": "t", "partition": 0, "offset": 3}], '
        '"version": 1}',
    )
    p.set_defaults(func=run_command(cmd_delete_records))


def read_offset_json(path: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) from kafka-delete-records.sh's JSON file."""
    doc = read_json_file(path)
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list):
        raise CliError(f'{path}: expected {{"partitions": [...], "version": 1}}')
    out = []
    for item in parts:
        try:
            topic, partition, offset = item["topic"], item["partition"], item["offset"]
        except (KeyError, TypeError):
            raise CliError(
                f"{path}: every partition needs topic, partition and offset, got {item!r}"
            ) from None
        if not isinstance(topic, str) or not isinstance(partition, int):
            raise CliError(f"{path}: bad topic or partition in {item!r}")
        if not isinstance(offset, int):
            raise CliError(f"{path}: offset must be an integer in {item!r}")
        out.append((topic, partition, offset))
    seen: set[tuple[str, int]] = set()
    dups: set[str] = set()
    for t, p, _ in out:
        if (t, p) in seen:
            dups.add(f"{t}-{p}")
        seen.add((t, p))
    if dups:
        raise CliError(
            f"Offset json file contains duplicate topic partitions: {','.join(sorted(dups))}"
        )
    if not out:
        raise CliError(f"{path} names no partitions")
    return out


def _targets(args: argparse.Namespace, admin: Any) -> list[tuple[str, int, int]]:
    if args.offset_json_file:
        if args.topic or args.partition or args.offset is not None:
            raise CliError("give either --offset-json-file or --topic/--partition/--offset")
        return read_offset_json(args.offset_json_file)
    if not args.topic or args.offset is None:
        raise CliError("give --topic and --offset (or --offset-json-file)")
    partitions = args.partition
    if not partitions:
        (topic,) = admin.describe_topics([args.topic])
        if topic["error_code"] == 3:
            raise CliError(f"topic {args.topic!r} does not exist")
        if topic["error_code"]:
            raise CliError(
                f"cannot describe topic {args.topic!r}: {error_name(topic['error_code'])}"
            )
        partitions = sorted(p["partition_index"] for p in topic["partitions"])
    return [(args.topic, p, args.offset) for p in partitions]


def cmd_delete_records(args: argparse.Namespace) -> int:
    import kafka.errors as errors
    from kafka import TopicPartition

    results = []
    with Closing(admin_client(args)) as admin:
        for topic, partition, offset in _targets(args, admin):
            tp = TopicPartition(topic, partition)
            row: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
            try:
                done = admin.delete_records({tp: offset})
                row["low_watermark"] = done[tp]["low_watermark"]
            except errors.BrokerResponseError as exc:
                row["error"] = error_name(type(exc))
            results.append(row)
    failed = [r for r in results if "error" in r]
    if want_json(args):
        print_json(results)
    else:
        print("Records delete operation completed:")
        for r in results:
            outcome = (
                f"error: {r['error']}" if "error" in r else f"low_watermark: {r['low_watermark']}"
            )
            print(f"partition: {r['topic']}-{r['partition']}\t{outcome}")
    if failed:
        raise CliError(f"deleting records failed for {len(failed)} of {len(results)} partitions")
    return 0
