"""`odradek leader-election`, as kafka-leader-election.sh: ElectLeaders (key 43, KIP-460).

`--election-type preferred` moves leadership back to each partition's first replica (when it is
in the ISR); `unclean` elects a live replica outside the ISR for partitions that have no leader
(data may be lost). Partitions: `--topic T --partition P`, `--all-topic-partitions`, or
`--path-to-json-file` with `{"partitions": [{"topic": "foo", "partition": 1}]}`. Prints, as
Kafka's tool, the partitions elected, those whose leader was already the right one, and each
failure; the status is 1 when any partition could not be elected.
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

ELECTION_TYPES = {"preferred": 0, "unclean": 1}
ELECTION_NOT_NEEDED = 84


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leader-election",
        help="run preferred or unclean leader elections (kafka-leader-election)",
        description="Elect partition leaders (ElectLeaders).",
    )
    add_client_options(p)
    p.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=sorted(ELECTION_TYPES),
        help="preferred: the first replica when in the ISR; unclean: any live replica",
    )
    p.add_argument("--topic", metavar="NAME", help="topic of the partition (with --partition)")
    p.add_argument("--partition", type=int, metavar="P", help="partition of --topic")
    p.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    p.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='partitions as {"partitions": [{"topic": "t", "partition": 0}]}',
    )
    p.set_defaults(func=run_command(cmd_leader_election))


def _read_json(path: str) -> dict[str, list[int]]:
    doc = read_json_file(path)
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list) or not parts:
        raise CliError(f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ...}}]}}')
    out: dict[str, list[int]] = {}
    seen: set[tuple[str, int]] = set()
    for item in parts:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int):
            raise CliError(f"{path}: every entry needs a topic and a partition, got {item!r}")
        if (topic, partition) in seen:
            raise CliError(f"{path}: duplicate partition {topic}-{partition}")
        seen.add((topic, partition))
        out.setdefault(topic, []).append(partition)
    return out


def _wanted(args: argparse.Namespace, admin: Any) -> dict[str, list[int]]:
    chosen = [bool(args.topic), args.all_topic_partitions, bool(args.path_to_json_file)]
    if sum(chosen) != 1:
        raise CliError(
            "give exactly one of --topic (with --partition), --all-topic-partitions "
            "or --path-to-json-file"
        )
    if args.partition is not None and not args.topic:
        raise CliError("--partition needs --topic")
    if args.topic:
        if args.partition is None:
            raise CliError("--topic needs --partition")
        return {args.topic: [args.partition]}
    if args.path_to_json_file:
        return _read_json(args.path_to_json_file)
    return {
        t["name"]: sorted(p["partition_index"] for p in t["partitions"])
        for t in admin.describe_topics()
        if not t["error_code"]
    }


def cmd_leader_election(args: argparse.Namespace) -> int:
    election = ELECTION_TYPES[args.election_type]
    label = args.election_type.upper()
    with Closing(admin_client(args)) as admin:
        wanted = _wanted(args, admin)
        response = admin.elect_leaders(election, wanted, raise_errors=False)
    top = getattr(response, "error_code", 0)
    if top:
        raise CliError(f"leader election failed: {error_name(top)}")
    elected: list[str] = []
    not_needed: list[str] = []
    failed: list[dict[str, Any]] = []
    for topic in response.replica_election_results:
        for part in topic.partition_result:
            name = f"{topic.topic}-{part.partition_id}"
            if part.error_code == 0:
                elected.append(name)
            elif part.error_code == ELECTION_NOT_NEEDED:
                not_needed.append(name)
            else:
                failed.append(
                    {
                        "partition": name,
                        "error": error_name(part.error_code),
                        "message": part.error_message,
                    }
                )
    if args.all_topic_partitions:
        not_needed = []  # as Kafka's broker answers a null partition list: only what changed
    if want_json(args):
        print_json(
            {
                "election_type": label,
                "elected": elected,
                "not_needed": not_needed,
                "failed": failed,
            }
        )
    else:
        if elected:
            print(
                f"Successfully completed leader election ({label}) for partitions "
                + ", ".join(elected)
            )
        if not_needed:
            print("Valid replica already elected for partitions " + ", ".join(not_needed))
        if not elected and not not_needed and not failed:
            print(f"No partition needed a {label.lower()} leader election.")
        for f in failed:
            detail = f": {f['message']}" if f["message"] else ""
            print(
                f"Error completing leader election ({label}) for partition: "
                f"{f['partition']}: {f['error']}{detail}"
            )
    if failed:
        raise CliError(f"{len(failed)} replica(s) could not be elected")
    return 0
