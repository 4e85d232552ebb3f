"""`odradek log-dirs`, as kafka-log-dirs.sh: the data dirs of each broker and the replicas in
them (DescribeLogDirs, key 35), and `odradek log-dirs move` (AlterReplicaLogDirs, key 34).

`odradek log-dirs [--describe] [--topic-list a,b] [--broker-list 1,2]` prints one row per replica
(broker, dir, partition, size, offset lag, whether it is a future replica still being copied) and
a row for an empty dir; `--json` prints Kafka's tool's document
(`{"version": 1, "brokers": [{"broker": 1, "logDirs": [{"logDir", "error", "partitions":
[{"partition": "t-0", "size", "offsetLag", "isFuture"}]}]}]}`).

`odradek log-dirs move --topic T --partition P --dir D [--broker N] [--wait]` moves that replica
to dir D of broker N (default: the partition's leader); the broker copies it in the background
while the partition keeps serving. `--wait` returns once the copy has swapped in.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json, print_table

WAIT_POLL_S = 0.2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "log-dirs",
        help="describe brokers' data dirs, move a replica between them (kafka-log-dirs)",
        description="Describe log dirs (DescribeLogDirs); `move` moves a replica to another "
        "dir of its broker (AlterReplicaLogDirs).",
    )
    add_client_options(p)
    p.add_argument(
        "action",
        nargs="?",
        choices=["describe", "move"],
        default="describe",
        help="default: describe",
    )
    p.add_argument("--describe", action="store_true", help="describe (kafka-log-dirs.sh's flag)")
    p.add_argument("--topic-list", metavar="T1,T2", help="only these topics (describe)")
    p.add_argument("--broker-list", metavar="ID1,ID2", help="only these brokers (describe)")
    p.add_argument("--topic", metavar="NAME", help="topic of the replica to move")
    p.add_argument("--partition", type=int, metavar="P", help="partition of the replica to move")
    p.add_argument("--dir", metavar="PATH", help="destination dir (absolute, one of log.dirs)")
    p.add_argument("--broker", type=int, metavar="ID", help="broker hosting the replica")
    p.add_argument(
        "--wait", action="store_true", help="return once the move is done (no future replica)"
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="give up --wait after S seconds"
    )
    p.set_defaults(func=run_command(cmd_log_dirs))


def _ints(text: str | None, option: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"{option} takes comma-separated broker ids, got {text!r}") from None


def _describe(admin: Any, topics: list[str] | None, brokers: list[int] | None) -> list[Any]:
    answers: list[Any] = admin.describe_log_dirs(topics, brokers=brokers)
    return answers


def _document(answers: list[Any]) -> dict[str, Any]:
    brokers = []
    for answer in answers:
        dirs = []
        for d in answer.get("log_dirs") or []:
            code = d.get("error_code", 0)
            dirs.append(
                {
                    "logDir": d["log_dir"],
                    "error": error_name(code) if code else None,
                    "partitions": [
                        {
                            "partition": f"{t['name']}-{p['partition_index']}",
                            "size": p["partition_size"],
                            "offsetLag": p["offset_lag"],
                            "isFuture": p["is_future_key"],
                        }
                        for t in d.get("topics") or []
                        for p in t["partitions"]
                    ],
                }
            )
        brokers.append({"broker": answer["broker"], "logDirs": dirs})
    return {"version": 1, "brokers": brokers}


def cmd_log_dirs(args: argparse.Namespace) -> int:
    if args.action == "move":
        return _move(args)
    topics = [t for t in (args.topic_list or "").split(",") if t] or None
    brokers = _ints(args.broker_list, "--broker-list")
    with Closing(admin_client(args)) as admin:
        doc = _document(_describe(admin, topics, brokers))
    if want_json(args):
        print_json(doc)
        return 0
    rows = []
    for b in doc["brokers"]:
        for d in b["logDirs"]:
            if not d["partitions"]:
                rows.append([b["broker"], d["logDir"], d["error"] or "-", "", "", ""])
            for p in d["partitions"]:
                rows.append(
                    [
                        b["broker"],
                        d["logDir"],
                        p["partition"],
                        p["size"],
                        p["offsetLag"],
                        "yes" if p["isFuture"] else "no",
                    ]
                )
    print_table(["BROKER", "LOG-DIR", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"], rows)
    return 0


def _move(args: argparse.Namespace) -> int:
    if not args.topic or args.partition is None or not args.dir:
        raise CliError("log-dirs move needs --topic, --partition and --dir")
    with Closing(admin_client(args)) as admin:
        broker = args.broker
        if broker is None:
            described = [t for t in admin.describe_topics([args.topic]) if t["name"] == args.topic]
            parts = [
                p
                for t in described
                for p in t.get("partitions") or []
                if p["partition_index"] == args.partition
            ]
            if not parts:
                raise CliError(f"no partition {args.topic}-{args.partition}")
            broker = parts[0]["leader_id"]
        result = admin.alter_replica_log_dirs({(args.topic, args.partition, broker): args.dir})
        for tpr, err in result.items():
            if err.errno:
                raise CliError(
                    f"moving {tpr.topic}-{tpr.partition} on broker {tpr.broker_id} to "
                    f"{args.dir}: {err.__name__}"
                )
        name = f"{args.topic}-{args.partition}"
        if args.wait:
            deadline = time.monotonic() + args.timeout
            while not _moved(admin, args.topic, args.partition, broker, args.dir):
                if time.monotonic() > deadline:
                    raise CliError(f"{name} still moving after {args.timeout:g}s")
                time.sleep(WAIT_POLL_S)
            print(f"Moved {name} on broker {broker} to {args.dir}")
        else:
            print(f"Moving {name} on broker {broker} to {args.dir}")
    return 0


def _moved(admin: Any, topic: str, partition: int, broker: int, path: str) -> bool:
    doc = _document(_describe(admin, [topic], [broker]))
    for b in doc["brokers"]:
        for d in b["logDirs"]:
            for p in d["partitions"]:
                if p["partition"] == f"{topic}-{partition}":
                    if p["isFuture"] or d["logDir"] != path:
                        return False
    return True
