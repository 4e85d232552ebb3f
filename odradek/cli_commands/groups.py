"""`odradek groups list|describe|delete|reset-offsets`, as kafka-consumer-groups.sh.

ListGroups (key 16) lists, DescribeGroups (15) gives state, protocol and members (their
subscription and assignment decoded from the consumer protocol), OffsetFetch (9) the committed
offsets and ListOffsets (2) the log end offsets, hence the lag. DeleteGroups (42) deletes empty
groups. reset-offsets commits new offsets with OffsetCommit (8) as the admin client does
(generation -1, no member id), which the coordinator only accepts for a group without members:
like Kafka's tool it refuses a group that is not Empty (or Dead, i.e. unknown), and without
`--execute` only shows what it would do.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any, cast

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json, print_table

INACTIVE_STATES = ("Empty", "Dead")


def register(sub: argparse._SubParsersAction) -> None:
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets")
    add_client_options(groups)
    cmds = groups.add_subparsers(dest="groups_command", metavar="COMMAND")
    cmds.required = True

    p = cmds.add_parser("list", help="list consumer groups")
    add_client_options(p)
    p.set_defaults(func=run_command(cmd_list))

    p = cmds.add_parser("describe", help="state, members, committed offsets and lag")
    add_client_options(p)
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(func=run_command(cmd_describe))

    p = cmds.add_parser("delete", help="delete consumer groups (they must be empty)")
    add_client_options(p)
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(func=run_command(cmd_delete))

    p = cmds.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    add_client_options(p)
    p.add_argument("group", metavar="GROUP")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has committed offsets for"
    )
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="first offset at or after this time, e.g. 2024-05-01T12:00:00Z (no zone: local time)",
    )
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offsets by N")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")
    p.set_defaults(func=run_command(cmd_reset_offsets))


# -- describing ---------------------------------------------------------------------------------


def _assignment(member: dict[str, Any]) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a member's decoded consumer-protocol assignment."""
    raw = member.get("member_assignment")
    if raw is None or isinstance(raw, (bytes, bytearray)):
        return []
    if isinstance(raw, dict):
        topics = raw.get("assigned_partitions") or []
    else:
        topics = getattr(raw, "assigned_partitions", None) or []
    out: list[tuple[str, int]] = []
    topic: str  # the shapes below come from kafka-python (untyped)
    for entry in topics:
        if isinstance(entry, dict):
            # kafka-python's decoded ConsumerProtocolAssignment always carries "topic"
            topic, parts = cast(str, entry.get("topic")), entry.get("partitions") or []
        elif isinstance(entry, (list, tuple)):
            topic, parts = entry[0], entry[1]
        else:
            topic, parts = entry.topic, entry.partitions
        out.extend((topic, int(p)) for p in parts)
    return sorted(out)


def _existing_partitions(admin: Any, topics: set[str]) -> dict[str, list[int]]:
    if not topics:
        return {}
    found = admin.describe_topics(sorted(topics))
    return {
        t["name"]: sorted(p["partition_index"] for p in t.get("partitions") or [])
        for t in found
        if not t.get("error_code")
    }


def _end_offsets(admin: Any, tps: list[Any], spec: Any) -> dict[Any, int]:
    if not tps:
        return {}
    return {
        tp: ot.offset for tp, ot in admin.list_partition_offsets({tp: spec for tp in tps}).items()
    }


def _describe_one(admin: Any, group: str, info: dict[str, Any]) -> dict[str, Any]:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    members = []
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    for m in info.get("members") or []:
        assigned = _assignment(m)
        member = {
            "member_id": m.get("member_id"),
            "instance_id": m.get("group_instance_id"),
            "client_id": m.get("client_id"),
            "host": m.get("client_host"),
            "assignment": [{"topic": t, "partition": p} for t, p in assigned],
        }
        members.append(member)
        for tp in assigned:
            owner[tp] = member
    committed = admin.list_group_offsets({group: None}).get(group, {})
    keys = {(tp.topic, tp.partition) for tp in committed} | set(owner)
    existing = _existing_partitions(admin, {t for t, _ in keys})
    live = [TopicPartition(t, p) for t, p in sorted(keys) if p in existing.get(t, ())]
    ends = _end_offsets(admin, live, OffsetSpec.LATEST)
    rows = []
    for topic, partition in sorted(keys):
        tp = TopicPartition(topic, partition)
        done = committed.get(tp)
        current = done.offset if done is not None and done.offset >= 0 else None
        end = ends.get(tp)
        who = owner.get((topic, partition)) or {}
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": end - current if end is not None and current is not None else None,
                "consumer_id": who.get("member_id"),
                "host": who.get("host"),
                "client_id": who.get("client_id"),
            }
        )
    return {
        "group": group,
        "state": info.get("group_state"),
        "protocol_type": info.get("protocol_type"),
        "protocol": info.get("protocol_data"),
        "members": members,
        "partitions": rows,
    }


def _print_group(desc: dict[str, Any]) -> None:
    proto = "/".join(p for p in (desc["protocol_type"], desc["protocol"]) if p) or "-"
    print(
        f"Group: {desc['group']}  State: {desc['state']}  Protocol: {proto}  "
        f"Members: {len(desc['members'])}"
    )
    if desc["members"]:
        print()
        print_table(
            ["MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
            [
                [m["member_id"], m["client_id"], m["host"], _assignment_text(m)]
                for m in desc["members"]
            ],
        )
    print()
    if not desc["partitions"]:
        print("No committed offsets and no assigned partitions.")
        return
    print_table(
        [
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
        [
            [
                r["topic"],
                r["partition"],
                r["current_offset"],
                r["log_end_offset"],
                r["lag"],
                r["consumer_id"],
                r["host"],
                r["client_id"],
            ]
            for r in desc["partitions"]
        ],
    )


def _assignment_text(member: dict[str, Any]) -> str:
    by_topic: dict[str, list[int]] = {}
    for a in member["assignment"]:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


def _group_info(admin: Any, groups: list[str]) -> dict[str, dict[str, Any]]:
    described: dict[str, dict[str, Any]] = admin.describe_groups(groups)
    for group in groups:
        info = described.get(group)
        if info is None:
            raise CliError(f"the broker did not describe group {group!r}")
        if info.get("error"):
            if "GroupIdNotFound" in info["error"]:
                raise CliError(f"consumer group {group!r} does not exist")
            raise CliError(f"cannot describe group {group!r}: {info['error']}")
    return described


# -- commands -----------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        found = admin.list_groups()
    rows = sorted(
        (
            {
                "group": g.get("group_id"),
                "protocol_type": g.get("protocol_type"),
                "state": g.get("group_state"),
            }
            for g in found
        ),
        key=lambda r: r["group"],
    )
    if want_json(args):
        print_json(rows)
        return
    print_table(
        ["GROUP", "PROTOCOL-TYPE", "STATE"],
        [[r["group"], r["protocol_type"] or "-", r["state"]] for r in rows],
    )


def cmd_describe(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        described = _group_info(admin, list(args.groups))
        result = []
        for group in args.groups:
            desc = _describe_one(admin, group, described[group])
            if desc["state"] == "Dead" and not desc["partitions"] and not desc["members"]:
                raise CliError(f"consumer group {group!r} does not exist")
            result.append(desc)
    if want_json(args):
        print_json(result if len(result) > 1 else result[0])
        return
    for i, desc in enumerate(result):
        if i:
            print()
        _print_group(desc)


def cmd_delete(args: argparse.Namespace) -> int:
    with Closing(admin_client(args)) as admin:
        outcome = admin.delete_groups(list(args.groups))
    results = [
        {"group": g, "error": None if outcome.get(g) == "OK" else _error_text(outcome.get(g))}
        for g in args.groups
    ]
    if want_json(args):
        print_json(results)
    else:
        for r in results:
            if not r["error"]:
                print(f"Deleted consumer group {r['group']}.")
    failed = [f"{r['group']!r}: {r['error']}" for r in results if r["error"]]
    if failed:
        raise CliError("deleting groups failed: " + "; ".join(failed))
    return 0


def _error_text(name: str | None) -> str:
    """kafka-python's error class name as Kafka's error name (NON_EMPTY_GROUP, ...)."""
    import kafka.errors as errors

    cls = getattr(errors, name or "", None)
    return getattr(cls, "message", None) or name or "no answer"


# -- reset-offsets ------------------------------------------------------------------------------


def _parse_topics(items: list[str]) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise CliError(f"--topic needs TOPIC[:P,P...], got {item!r}")
        if not sep:
            out[topic] = None
            continue
        try:
            out[topic] = sorted({int(p) for p in parts.split(",") if p.strip()})
        except ValueError:
            raise CliError(f"--topic {item!r}: partitions must be numbers") from None
    return out


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime {text!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as kafka-consumer-groups.sh
    return int(moment.timestamp() * 1000)


def _target_partitions(
    admin: Any, args: argparse.Namespace, committed: dict[Any, Any]
) -> list[Any]:
    from kafka import TopicPartition

    if args.all_topics:
        return sorted(committed, key=lambda tp: (tp.topic, tp.partition))
    wanted = _parse_topics(args.topic)
    existing = _existing_partitions(admin, set(wanted))
    tps = []
    for topic, parts in wanted.items():
        if topic not in existing:
            raise CliError(f"topic {topic!r} does not exist")
        for p in parts if parts is not None else existing[topic]:
            if p not in existing[topic]:
                raise CliError(f"topic {topic!r} has no partition {p}")
            tps.append(TopicPartition(topic, p))
    return tps


def _new_offsets(
    admin: Any, args: argparse.Namespace, tps: list[Any], committed: dict[Any, Any]
) -> dict[Any, int]:
    from kafka.admin import OffsetSpec, OffsetTimestamp

    earliest = _end_offsets(admin, tps, OffsetSpec.EARLIEST)
    latest = _end_offsets(admin, tps, OffsetSpec.LATEST)
    if args.to_datetime is not None:
        at = OffsetTimestamp(_timestamp_ms(args.to_datetime))
        by_time = _end_offsets(admin, tps, at)
    out = {}
    for tp in tps:
        if args.to_earliest:
            raw = earliest[tp]
        elif args.to_latest:
            raw = latest[tp]
        elif args.to_offset is not None:
            raw = args.to_offset
        elif args.to_datetime is not None:
            raw = by_time[tp] if by_time[tp] >= 0 else latest[tp]
        else:
            done = committed.get(tp)
            if done is None or done.offset < 0:
                raise CliError(
                    f"--shift-by: group has no committed offset for {tp.topic}:{tp.partition}"
                )
            raw = done.offset + args.shift_by
        out[tp] = min(max(raw, earliest[tp]), latest[tp])
    return out


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    from kafka.structs import OffsetAndMetadata

    with Closing(admin_client(args)) as admin:
        info = _group_info(admin, [args.group])[args.group]
        state = info.get("group_state")
        if state not in INACTIVE_STATES:
            raise CliError(
                f"offsets can only be reset if group {args.group!r} is inactive, but "
                f"its state is {state}"
            )
        committed = admin.list_group_offsets({args.group: None}).get(args.group, {})
        tps = _target_partitions(admin, args, committed)
        if not tps:
            raise CliError(f"group {args.group!r} has no committed offsets to reset")
        targets = _new_offsets(admin, args, tps, committed)
        if args.execute:
            result = admin.alter_group_offsets(
                args.group, {tp: OffsetAndMetadata(off, "", -1) for tp, off in targets.items()}
            )
            failed = [
                f"{tp.topic}:{tp.partition} {error_name(err)}"
                for tp, err in sorted(result.items())
                if error_name(err) != "NONE"
            ]
            if failed:
                raise CliError(f"committing offsets of {args.group!r} failed: " + ", ".join(failed))
    rows = []
    for tp, offset in sorted(targets.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        done = committed.get(tp)
        rows.append(
            {
                "group": args.group,
                "topic": tp.topic,
                "partition": tp.partition,
                "previous_offset": done.offset if done is not None and done.offset >= 0 else None,
                "new_offset": offset,
            }
        )
    if want_json(args):
        print_json({"group": args.group, "executed": bool(args.execute), "partitions": rows})
    else:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
            [
                [r["group"], r["topic"], r["partition"], r["previous_offset"], r["new_offset"]]
                for r in rows
            ],
        )
    if not args.execute:
        print(
            "Dry run: nothing was committed; add --execute to commit these offsets.",
            file=sys.stderr,
        )
    return 0
