"""`odradek topics reassign`, as kafka-reassign-partitions.sh: AlterPartitionReassignments
(key 45) and ListPartitionReassignments (46), KIP-455.

The reassignment file is Kafka's: `{"version": 1, "partitions": [{"topic": "foo",
"partition": 0, "replicas": [1, 2]}]}` (a `log_dirs` list is accepted and must be "any").

- `--execute`: prints the current assignment of those partitions (the file to roll back with),
  then starts the moves; the brokers copy the data and drop the old replicas on their own.
- `--verify`: for each partition of the file, completed (the replicas are the target and no
  move is left), still in progress, or finished with other replicas than the file's.
- `--cancel`: cancels the moves of the file's partitions still in progress; the original
  replicas are back.
- `--list`: every reassignment in progress, with its adding and removing replicas.
- `--generate --topics-to-move-json-file F --broker-list 0,1,2`: the current assignment of the
  topics in F (`{"topics": [{"topic": "foo"}], "version": 1}`) and a proposed one spreading
  their replicas round-robin over the brokers listed (same replication factor), to save for
  `--execute`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json

Assignment = dict[tuple[str, int], list[int]]


def register_under(cmds: argparse._SubParsersAction) -> None:
    """Add `reassign` to `odradek topics`."""
    p = cmds.add_parser(
        "reassign",
        help="move partition replicas between brokers (kafka-reassign-partitions)",
        description="Move partition replicas between brokers (AlterPartitionReassignments).",
    )
    add_client_options(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true", help="start the reassignment in the file")
    action.add_argument("--verify", action="store_true", help="report whether it is done")
    action.add_argument("--cancel", action="store_true", help="cancel its moves in progress")
    action.add_argument("--list", action="store_true", help="list reassignments in progress")
    action.add_argument("--generate", action="store_true", help="propose an assignment")
    p.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help='{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}',
    )
    p.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='with --generate: {"topics": [{"topic": "t"}], "version": 1}',
    )
    p.add_argument(
        "--broker-list", metavar="IDS", help="with --generate: brokers to place on, e.g. 0,1,2"
    )
    p.set_defaults(func=run_command(cmd_reassign))


def _load(path: str | None, option: str) -> Any:
    if not path:
        raise CliError(f"{option} is required for this action")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read {option} {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not valid JSON: {exc}") from None


def _read_reassignment(path: str | None) -> Assignment:
    doc = _load(path, "--reassignment-json-file")
    out: Assignment = {}
    try:
        for entry in doc["partitions"]:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
            dirs = entry.get("log_dirs")
            if dirs is not None and any(d != "any" for d in dirs):
                raise CliError(f'{key[0]}-{key[1]}: only "any" log dirs are supported')
            if not replicas:
                raise CliError(f"{key[0]}-{key[1]}: the replica list is empty")
            if key in out:
                raise CliError(f"{key[0]}-{key[1]} appears more than once")
            out[key] = replicas
    except (KeyError, TypeError, ValueError) as exc:
        raise CliError(f"{path}: not a reassignment file ({exc!r})") from None
    if not out:
        raise CliError(f"{path}: no partitions to reassign")
    return out


def _doc(assignment: Assignment) -> dict[str, Any]:
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
            for (t, p), r in sorted(assignment.items())
        ],
    }


def _current(admin: Any, topics: set[str]) -> Assignment:
    out: Assignment = {}
    for topic in admin.describe_topics(sorted(topics)):
        if topic["error_code"]:
            raise CliError(f"topic {topic['name']!r}: {error_name(topic['error_code'])}")
        for part in topic["partitions"]:
            out[(topic["name"], part["partition_index"])] = list(part["replica_nodes"])
    return out


def _ongoing(admin: Any, keys: list[tuple[str, int]] | None = None) -> dict[Any, Any]:
    from kafka import TopicPartition

    wanted = None if keys is None else [TopicPartition(t, p) for t, p in keys]
    return {
        (tp.topic, tp.partition): v for tp, v in admin.list_partition_reassignments(wanted).items()
    }


def _name(key: tuple[str, int]) -> str:
    return f"{key[0]}-{key[1]}"


def _alter(admin: Any, moves: dict[tuple[str, int], list[int] | None]) -> list[str]:
    from kafka import TopicPartition

    result = admin.alter_partition_reassignments(
        {TopicPartition(t, p): r for (t, p), r in moves.items()}
    )
    failed = []
    for tp, err in sorted(result.items()):
        if err is not None:
            failed.append(f"{tp.topic}-{tp.partition}: {error_name(err)}")
    return failed


def cmd_reassign(args: argparse.Namespace) -> int:
    with Closing(admin_client(args)) as admin:
        if args.list:
            return _list(args, admin)
        if args.generate:
            return _generate(args, admin)
        wanted = _read_reassignment(args.reassignment_json_file)
        if args.execute:
            return _execute(args, admin, wanted)
        if args.verify:
            return _verify(args, admin, wanted)
        return _cancel(args, admin, wanted)


def _execute(args: argparse.Namespace, admin: Any, wanted: Assignment) -> int:
    current = _current(admin, {t for t, _ in wanted})
    missing = [k for k in wanted if k not in current]
    if missing:
        raise CliError("unknown partitions: " + ", ".join(map(_name, sorted(missing))))
    rollback = {k: current[k] for k in wanted}
    failed = _alter(admin, dict(wanted))
    if want_json(args):
        print_json({"current": _doc(rollback), "started": [_name(k) for k in sorted(wanted)]})
    else:
        print("Current partition replica assignment\n")
        print(json.dumps(_doc(rollback)))
        print("\nSave this to use as the --reassignment-json-file option during rollback")
        if not failed:
            names = ",".join(_name(k) for k in sorted(wanted))
            print(f"Successfully started partition reassignments for {names}")
    if failed:
        raise CliError("reassignment failed for " + "; ".join(failed))
    return 0


def _verify(args: argparse.Namespace, admin: Any, wanted: Assignment) -> int:
    ongoing = _ongoing(admin, sorted(wanted))
    current = _current(admin, {t for t, _ in wanted})
    states = {}
    for key, target in sorted(wanted.items()):
        if key in ongoing:
            states[key] = "in progress"
        elif current.get(key) == target:
            states[key] = "completed"
        else:
            states[key] = f"other replicas {current.get(key)}"
    if want_json(args):
        print_json([{"partition": _name(k), "status": s} for k, s in states.items()])
    else:
        print("Status of partition reassignment:")
        for key, state in states.items():
            if state == "in progress":
                print(f"Reassignment of partition {_name(key)} is still in progress.")
            elif state == "completed":
                print(f"Reassignment of partition {_name(key)} is completed.")
            else:
                print(
                    f"There is no active reassignment of partition {_name(key)}, but replica "
                    f"set is {current.get(key)} rather than {wanted[key]}."
                )
    return 0 if all(s == "completed" for s in states.values()) else 1


def _cancel(args: argparse.Namespace, admin: Any, wanted: Assignment) -> int:
    ongoing = _ongoing(admin, sorted(wanted))
    active = [k for k in sorted(wanted) if k in ongoing]
    failed = _alter(admin, {k: None for k in active}) if active else []
    if want_json(args):
        print_json({"cancelled": [_name(k) for k in active]})
    elif active:
        print("Successfully cancelled partition reassignments for: " + ",".join(map(_name, active)))
    else:
        print("None of the specified partition reassignments are active.")
    if failed:
        raise CliError("cancelling failed for " + "; ".join(failed))
    return 0


def _list(args: argparse.Namespace, admin: Any) -> int:
    ongoing = _ongoing(admin)
    if want_json(args):
        print_json([{"partition": _name(k), **v} for k, v in sorted(ongoing.items())])
        return 0
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for key, v in sorted(ongoing.items()):
        print(
            f"{_name(key)}: replicas: {','.join(map(str, v['replicas']))}. "
            f"adding: {','.join(map(str, v['adding_replicas']))}. "
            f"removing: {','.join(map(str, v['removing_replicas']))}."
        )
    return 0


def _generate(args: argparse.Namespace, admin: Any) -> int:
    doc = _load(args.topics_to_move_json_file, "--topics-to-move-json-file")
    try:
        topics = {str(t["topic"]) for t in doc["topics"]}
    except (KeyError, TypeError) as exc:
        raise CliError(f"{args.topics_to_move_json_file}: not a topics file ({exc!r})") from None
    if not args.broker_list:
        raise CliError("--broker-list is required with --generate")
    try:
        brokers = sorted({int(b) for b in args.broker_list.split(",") if b.strip()})
    except ValueError:
        raise CliError(f"--broker-list {args.broker_list!r}: give broker ids, e.g. 0,1,2") from None
    current = _current(admin, topics)
    proposed: Assignment = {}
    for i, (key, replicas) in enumerate(sorted(current.items())):
        rf = len(replicas)
        if rf > len(brokers):
            raise CliError(f"{_name(key)} has {rf} replicas but only {len(brokers)} brokers listed")
        proposed[key] = [brokers[(i + r) % len(brokers)] for r in range(rf)]
    if want_json(args):
        print_json({"current": _doc(current), "proposed": _doc(proposed)})
    else:
        print("Current partition replica assignment")
        print(json.dumps(_doc(current)))
        print("\nProposed partition reassignment configuration")
        print(json.dumps(_doc(proposed)))
    return 0
