"""`odradek groups list|describe|delete|delete-offsets|reset-offsets`, as kafka-consumer-groups.sh.

ListGroups (key 16) lists (with each group's type: classic or consumer), DescribeGroups (15) gives
state, protocol and members (their subscription and assignment decoded from the consumer protocol),
ConsumerGroupDescribe (69) the same for KIP-848 consumer-protocol groups, OffsetFetch (9) the
committed offsets and ListOffsets (2) the log end offsets, hence the lag per partition and in
total; FindCoordinator (10) the coordinator. `describe --offsets|--members [--verbose]|--state`
print the views of Kafka's tool; without them one view shows it all. DeleteGroups (42) deletes
empty groups, OffsetDelete (47) some of a group's committed offsets (refused per partition with
GROUP_SUBSCRIBED_TO_TOPIC while live members consume the topic). reset-offsets commits new offsets
with OffsetCommit (8) as the admin client does (generation -1, no member id), which the coordinator
only accepts for a group without members: like Kafka's tool it refuses a group that is not Empty
(or Dead, i.e. unknown), and without `--execute` only shows what it would do. The targets:
--to-earliest/--to-latest/--to-current/--to-offset/--shift-by, --to-datetime and --by-duration
(ListOffsets by timestamp), --from-file (the topic,partition,offset CSV that `--export` prints);
every target is kept within the log's start and end, as Kafka does. Share groups (KIP-932) are
described, reset and have offsets deleted as kafka-share-groups.sh does it (share_groups.py).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime
from typing import Any, cast

from odradek.cli_commands import share_groups
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
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATE[,STATE]",
        help="only groups in these states (Stable, Empty, ...), as kafka-consumer-groups.sh",
    )
    p.set_defaults(func=run_command(cmd_list))

    p = cmds.add_parser("describe", help="state, members, committed offsets and lag")
    add_client_options(p)
    p.add_argument("groups", nargs="*", metavar="GROUP")
    p.add_argument(
        "--group", action="append", dest="group_opt", metavar="GROUP", help="(repeatable)"
    )
    _all_groups_option(p)
    view = p.add_mutually_exclusive_group()
    view.add_argument(
        "--offsets",
        action="store_true",
        help="committed offset, log end offset and lag per partition, and the total lag",
    )
    view.add_argument(
        "--members", action="store_true", help="the members and how many partitions each has"
    )
    view.add_argument(
        "--state",
        action="store_true",
        help="coordinator, assignment strategy, state and member count",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="with --members: each member's group instance id and assigned partitions",
    )
    p.add_argument(
        "--share",
        action="store_true",
        help="the group is a share group (KIP-932), as kafka-share-groups.sh",
    )
    p.set_defaults(func=run_command(cmd_describe))

    p = cmds.add_parser("delete", help="delete consumer groups (they must be empty)")
    add_client_options(p)
    p.add_argument("groups", nargs="*", metavar="GROUP")
    p.add_argument(
        "--group", action="append", dest="group_opt", metavar="GROUP", help="(repeatable)"
    )
    _all_groups_option(p)
    p.set_defaults(func=run_command(cmd_delete))

    p = cmds.add_parser(
        "delete-offsets",
        help="delete a group's committed offsets for some topics or partitions (OffsetDelete)",
    )
    add_client_options(p)
    p.add_argument("group", nargs="?", metavar="GROUP")
    p.add_argument("--group", dest="group_opt", metavar="GROUP", help="the group (or GROUP)")
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    p.add_argument(
        "--share",
        action="store_true",
        help="the group is a share group (KIP-932), as kafka-share-groups.sh",
    )
    p.set_defaults(func=run_command(cmd_delete_offsets))

    p = cmds.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    add_client_options(p)
    p.add_argument("group", nargs="?", metavar="GROUP")
    p.add_argument("--group", dest="group_opt", metavar="GROUP", help="the group (or GROUP)")
    scope = p.add_mutually_exclusive_group()
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
    to.add_argument("--to-current", action="store_true", help="the committed offsets as they are")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="first offset at or after this time, e.g. 2024-05-01T12:00:00Z (no zone: local time)",
    )
    to.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="first offset at or after this long ago (ISO 8601 duration, e.g. PT1H30M, P1D)",
    )
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offsets by N")
    to.add_argument(
        "--from-file",
        metavar="CSV",
        help="offsets from a file of topic,partition,offset lines (as --export writes)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")
    p.add_argument(
        "--export",
        action="store_true",
        help="print the new offsets as topic,partition,offset CSV (for --from-file)",
    )
    p.add_argument(
        "--share",
        action="store_true",
        help="the group is a share group (KIP-932), as kafka-share-groups.sh",
    )
    p.set_defaults(func=run_command(cmd_reset_offsets))


def _one_group(args: argparse.Namespace) -> str:
    """GROUP or --group GROUP (kafka-consumer-groups.sh spells it --group)."""
    if args.group and args.group_opt and args.group != args.group_opt:
        raise CliError(f"two groups given: {args.group!r} and --group {args.group_opt!r}")
    group = args.group or args.group_opt
    if not group:
        raise CliError("name the group: GROUP or --group GROUP")
    return str(group)


# -- describing ---------------------------------------------------------------------------------


def _assignment(member: dict[str, Any]) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a member's decoded consumer-protocol assignment (or of a
    KIP-848 member's assignment, as ConsumerGroupDescribe gives it)."""
    if "assigned" in member:
        return sorted(member["assigned"])
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
    if info.get("group_type") == "share":
        return _describe_share(admin, group, info, members, owner)
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
    lags = [r["lag"] for r in rows if r["lag"] is not None]
    return {
        "group": group,
        "coordinator": _coordinator(admin, group),
        "state": info.get("group_state"),
        "type": info.get("group_type", "classic"),
        "protocol_type": info.get("protocol_type"),
        "protocol": info.get("protocol_data"),
        "members": members,
        "partitions": rows,
        "total_lag": sum(lags) if lags else None,
    }


def _describe_share(
    admin: Any,
    group: str,
    info: dict[str, Any],
    members: list[dict[str, Any]],
    owner: dict[tuple[str, int], dict[str, Any]],
) -> dict[str, Any]:
    rows = share_groups.partition_rows(admin, group, owner)
    lags = [r["lag"] for r in rows if r["lag"] is not None]
    return {
        "group": group,
        "coordinator": _coordinator(admin, group),
        "state": info.get("group_state"),
        "type": "share",
        "protocol_type": "share",
        "protocol": info.get("protocol_data"),
        "members": members,
        "partitions": rows,
        "total_lag": sum(lags) if lags else None,
    }


def _coordinator(admin: Any, group: str) -> dict[str, Any] | None:
    """The group's coordinator (FindCoordinator, cached by kafka-python from the describe)."""
    import kafka.errors as errors

    try:
        node = admin._manager.run(admin._find_coordinator_id, group)
        meta = admin._manager.cluster.broker_metadata(node)
    except (errors.KafkaError, AttributeError):  # a kafka-python without these internals
        return None
    if meta is None:
        return {"id": node, "host": None, "port": None}
    return {"id": node, "host": meta.host, "port": meta.port}


def _print_group(desc: dict[str, Any]) -> None:
    proto = "/".join(p for p in (desc["protocol_type"], desc["protocol"]) if p) or "-"
    print(
        f"Group: {desc['group']}  State: {desc['state']}  Protocol: {proto}  "
        f"Members: {len(desc['members'])}  Type: {desc['type']}"
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
    _print_offsets(desc, with_group=False)


def _print_offsets(desc: dict[str, Any], with_group: bool) -> None:
    lead = ["GROUP"] if with_group else []
    if desc["type"] == "share":  # kafka-share-groups.sh --describe --offsets
        print_table(
            lead + ["TOPIC", "PARTITION", "START-OFFSET", "LAG", "CONSUMER-ID", "HOST"],
            [
                ([desc["group"]] if with_group else [])
                + [
                    r["topic"],
                    r["partition"],
                    r["start_offset"],
                    r["lag"],
                    r["consumer_id"],
                    r["host"],
                ]
                for r in desc["partitions"]
            ],
        )
        print(f"Total lag: {desc['total_lag'] if desc['total_lag'] is not None else '-'}")
        return
    print_table(
        lead
        + [
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
            ([desc["group"]] if with_group else [])
            + [
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
    print(f"Total lag: {desc['total_lag'] if desc['total_lag'] is not None else '-'}")


def _print_members(desc: dict[str, Any], verbose: bool) -> None:
    """kafka-consumer-groups.sh --describe --members [--verbose]."""
    if not desc["members"]:
        kind = "Share group" if desc["type"] == "share" else "Consumer group"
        print(f"{kind} '{desc['group']}' has no active members.")
        return
    headers = ["GROUP", "CONSUMER-ID"]
    headers += ["GROUP-INSTANCE-ID"] if verbose else []
    headers += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    headers += ["ASSIGNMENT"] if verbose else []
    lines = []
    for m in desc["members"]:
        line = [desc["group"], m["member_id"]]
        line += [m["instance_id"]] if verbose else []
        line += [m["host"], m["client_id"], len(m["assignment"])]
        line += [_assignment_text(m, kafka_style=True)] if verbose else []
        lines.append(line)
    print_table(headers, lines)


def _print_state(desc: dict[str, Any]) -> None:
    """kafka-consumer-groups.sh --describe --state."""
    c = desc["coordinator"]
    where = f"{c['host']}:{c['port']} ({c['id']})" if c else "-"
    print_table(
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [[desc["group"], where, desc["protocol"] or "", desc["state"], len(desc["members"])]],
    )


def _assignment_text(member: dict[str, Any], kafka_style: bool = False) -> str:
    """Assignment as t:0,1 u:0, or with kafka_style as t(0,1),u(0) (Kafka's --verbose)."""
    by_topic: dict[str, list[int]] = {}
    for a in member["assignment"]:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    if kafka_style:
        return (
            ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items())) or "-"
        )
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


def _consumer_group_info(admin: Any, group: str) -> dict[str, Any] | None:
    """A KIP-848 consumer group through ConsumerGroupDescribe (69), in DescribeGroups' shape
    (None when the coordinator has no such group or does not serve the API)."""
    import kafka.errors as errors

    from odradek.wire import protocol

    async def go() -> Any:
        node = await admin._find_coordinator_id(group)
        request = protocol.ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False
        )
        return await admin._manager.send(request, node_id=node)

    try:
        response = admin._manager.run(go)
    except (errors.KafkaError, AttributeError):
        return None
    g = response.groups[0] if response.groups else None
    if g is None or g.error_code:
        return None
    return {
        "group_state": g.group_state,
        "group_type": "consumer",
        "protocol_type": "consumer",
        "protocol_data": g.assignor_name,
        "group_epoch": g.group_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assigned": [
                    (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ],
            }
            for m in g.members
        ],
    }


def _group_info(admin: Any, groups: list[str], share: bool = False) -> dict[str, dict[str, Any]]:
    described: dict[str, dict[str, Any]] = {} if share else admin.describe_groups(groups)
    for group in groups:
        info = described.get(group)
        if (
            share
            or info is None
            or info.get("group_state") == "Dead"
            or (info.get("error") and "GroupIdNotFound" in info["error"])
        ):
            # not a classic group: perhaps a consumer-protocol (KIP-848) or a share one
            other = None if share else _consumer_group_info(admin, group)
            if other is None:
                other = share_groups.share_group_info(admin, group, forced=share)
            if other is not None:
                described[group] = info = other
            elif info is not None and "GroupIdNotFound" in (info.get("error") or ""):
                # DescribeGroups v6 (KIP-1043) names an unknown group; before, it was Dead
                described[group] = info = {**info, "error": None, "group_state": "Dead"}
        if info is None:
            raise CliError(f"the broker did not describe group {group!r}")
        if info.get("error"):
            if "GroupIdNotFound" in info["error"]:
                raise CliError(f"consumer group {group!r} does not exist")
            raise CliError(f"cannot describe group {group!r}: {info['error']}")
    return described


# -- commands -----------------------------------------------------------------------------------


def _all_groups_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--all-groups",
        action="store_true",
        help="every consumer group, as kafka-consumer-groups.sh",
    )


def _named_groups(args: argparse.Namespace, admin: Any) -> list[str]:
    """GROUP arguments and --group options in order, or every group with --all-groups."""
    named = list(dict.fromkeys(list(args.groups) + list(args.group_opt or [])))
    if args.all_groups:
        if named:
            raise CliError("--all-groups names every group: not with GROUP or --group")
        share = bool(getattr(args, "share", False))
        return sorted(
            g["group_id"] for g in admin.list_groups() if (g.get("group_type") == "share") == share
        )
    if not named:
        raise CliError("name at least one group: GROUP, --group GROUP or --all-groups")
    return named


def cmd_list(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        found = admin.list_groups()
    if args.state:
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        found = [g for g in found if str(g.get("group_state")).lower() in wanted]
    rows = sorted(
        (
            {
                "group": g.get("group_id"),
                "protocol_type": g.get("protocol_type"),
                "state": g.get("group_state"),
                "type": g.get("group_type") or "classic",
            }
            for g in found
        ),
        key=lambda r: r["group"],
    )
    if want_json(args):
        print_json(rows)
        return
    print_table(
        ["GROUP", "PROTOCOL-TYPE", "STATE", "TYPE"],
        [[r["group"], r["protocol_type"] or "-", r["state"], r["type"]] for r in rows],
    )


def cmd_describe(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        groups = _named_groups(args, admin)
        if not groups:
            print("There are no consumer groups.")
            return
        described = _group_info(admin, groups, share=args.share)
        result = []
        for group in groups:
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
        if args.members:
            _print_members(desc, args.verbose)
        elif args.state:
            _print_state(desc)
        elif args.offsets:
            if desc["partitions"]:
                _print_offsets(desc, with_group=True)
            else:
                print(f"Consumer group '{desc['group']}' has no committed offsets.")
        else:
            _print_group(desc)


def cmd_delete(args: argparse.Namespace) -> int:
    with Closing(admin_client(args)) as admin:
        groups = _named_groups(args, admin)
        outcome = admin.delete_groups(groups) if groups else {}
    results = [
        {"group": g, "error": None if outcome.get(g) == "OK" else _error_text(outcome.get(g))}
        for g in groups
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


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def duration_ms(text: str) -> int:
    """An ISO 8601 duration as java.time.Duration.parse reads it (PnDTnHnMn.nS: days, hours,
    minutes, seconds, each optional and signed, at least one given), in milliseconds."""
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.group(i) for i in (2, 3, 4, 5)) or text.strip().upper().endswith("T"):
        raise CliError(
            f"--by-duration {text!r} is not an ISO 8601 duration such as PT1H30M or P1DT12H"
        )
    sign, days, hours, minutes, seconds, fraction = m.groups()
    secs = int(seconds or 0)
    frac_ms = int(((fraction or "") + "000")[:3])
    millis = secs * 1000 + (-frac_ms if secs < 0 or (seconds or "").startswith("-") else frac_ms)
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    total += millis
    return -total if sign == "-" else total


def read_reset_plan(path: str, group: str) -> dict[tuple[str, int], int]:
    """kafka-consumer-groups.sh's CSV: topic,partition,offset lines (one group), or
    group,topic,partition,offset lines (several groups; only this group's are used)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CliError(f"cannot read --from-file {path}: {exc.strerror or exc}") from None
    plan: dict[tuple[str, int], int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4:
            if cells[0] != group:
                continue
            cells = cells[1:]
        if len(cells) != 3 or not cells[0]:
            raise CliError(
                f"{path}:{number}: expected topic,partition,offset (or group,topic,partition,"
                f"offset), got {line!r}"
            )
        try:
            plan[(cells[0], int(cells[1]))] = int(cells[2])
        except ValueError:
            raise CliError(f"{path}:{number}: partition and offset must be numbers") from None
    if not plan:
        raise CliError(f"--from-file {path} has no offsets for group {group!r}")
    return plan


def _check_partitions(admin: Any, tps: list[Any]) -> None:
    existing = _existing_partitions(admin, {tp.topic for tp in tps})
    for tp in tps:
        if tp.topic not in existing:
            raise CliError(f"topic {tp.topic!r} does not exist")
        if tp.partition not in existing[tp.topic]:
            raise CliError(f"topic {tp.topic!r} has no partition {tp.partition}")


def _target_partitions(
    admin: Any, args: argparse.Namespace, committed: dict[Any, Any], plan: dict[Any, int] | None
) -> list[Any]:
    from kafka import TopicPartition

    if plan is not None:
        tps = [TopicPartition(t, p) for t, p in sorted(plan)]
        if args.topic:
            wanted = _parse_topics(args.topic)
            tps = [
                tp
                for tp in tps
                if tp.topic in wanted
                and (wanted[tp.topic] is None or tp.partition in (wanted[tp.topic] or ()))
            ]
        _check_partitions(admin, tps)
        return tps
    if args.all_topics:
        return sorted(committed, key=lambda tp: (tp.topic, tp.partition))
    if not args.topic:
        raise CliError("say which offsets to reset: --topic TOPIC[:P,...] or --all-topics")
    return _topic_partitions(admin, args.topic)


def _topic_partitions(admin: Any, items: list[str]) -> list[Any]:
    """TOPIC (all its partitions) or TOPIC:P,P as TopicPartitions, checked against metadata."""
    from kafka import TopicPartition

    wanted = _parse_topics(items)
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
    admin: Any,
    args: argparse.Namespace,
    tps: list[Any],
    committed: dict[Any, Any],
    plan: dict[Any, int] | None,
) -> dict[Any, int]:
    from kafka.admin import OffsetSpec, OffsetTimestamp

    earliest = _end_offsets(admin, tps, OffsetSpec.EARLIEST)
    latest = _end_offsets(admin, tps, OffsetSpec.LATEST)
    at_ms = None
    if args.to_datetime is not None:
        at_ms = _timestamp_ms(args.to_datetime)
    elif args.by_duration is not None:
        at_ms = int(time.time() * 1000) - duration_ms(args.by_duration)
    if at_ms is not None:
        by_time = _end_offsets(admin, tps, OffsetTimestamp(max(at_ms, 0)))
    out = {}
    for tp in tps:
        done = committed.get(tp)
        current = done.offset if done is not None and done.offset >= 0 else None
        if args.to_earliest:
            raw = earliest[tp]
        elif args.to_latest:
            raw = latest[tp]
        elif args.to_current:
            raw = current if current is not None else latest[tp]
        elif args.to_offset is not None:
            raw = args.to_offset
        elif at_ms is not None:
            raw = by_time[tp] if by_time[tp] >= 0 else latest[tp]
        elif plan is not None:
            raw = plan[(tp.topic, tp.partition)]
        else:
            if current is None:
                raise CliError(
                    f"--shift-by: group has no committed offset for {tp.topic}:{tp.partition}"
                )
            raw = current + args.shift_by
        out[tp] = min(max(raw, earliest[tp]), latest[tp])
    return out


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = _one_group(args)
    if args.by_duration is not None:
        duration_ms(args.by_duration)  # a malformed duration fails before any request
    plan = read_reset_plan(args.from_file, group) if args.from_file else None
    with Closing(admin_client(args)) as admin:
        info = _group_info(admin, [group], share=args.share)[group]
        state = info.get("group_state")
        if state not in INACTIVE_STATES:
            raise CliError(
                f"offsets can only be reset if group {group!r} is inactive, but "
                f"its state is {state}"
            )
        share = info.get("group_type") == "share"
        if share:  # the share-partition start offsets stand for committed offsets
            committed = {
                TopicPartition(t, p): OffsetAndMetadata(start, "", -1)
                for (t, p), (start, _lag) in share_groups.start_offsets(admin, group).items()
            }
        else:
            committed = admin.list_group_offsets({group: None}).get(group, {})
        tps = _target_partitions(admin, args, committed, plan)
        if not tps:
            raise CliError(f"group {group!r} has no committed offsets to reset")
        targets = _new_offsets(admin, args, tps, committed, plan)
        if args.execute and share:
            share_groups.alter(admin, group, targets)
        elif args.execute:
            result = admin.alter_group_offsets(
                group, {tp: OffsetAndMetadata(off, "", -1) for tp, off in targets.items()}
            )
            failed = [
                f"{tp.topic}:{tp.partition} {error_name(err)}"
                for tp, err in sorted(result.items())
                if error_name(err) != "NONE"
            ]
            if failed:
                raise CliError(f"committing offsets of {group!r} failed: " + ", ".join(failed))
    rows = []
    for tp, offset in sorted(targets.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        done = committed.get(tp)
        rows.append(
            {
                "group": group,
                "topic": tp.topic,
                "partition": tp.partition,
                "previous_offset": done.offset if done is not None and done.offset >= 0 else None,
                "new_offset": offset,
            }
        )
    if args.export:
        # kafka-consumer-groups.sh --export: the plan as CSV, which --from-file reads back
        for r in rows:
            print(f"{r['topic']},{r['partition']},{r['new_offset']}")
    elif want_json(args):
        print_json({"group": group, "executed": bool(args.execute), "partitions": rows})
    else:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
            [
                [r["group"], r["topic"], r["partition"], r["previous_offset"], r["new_offset"]]
                for r in rows
            ],
        )
    if not args.execute and not args.dry_run:
        # as kafka-consumer-groups.sh warns when neither --execute nor --dry-run is given
        print(
            "Dry run: nothing was committed; add --execute to commit these offsets.",
            file=sys.stderr,
        )
    return 0


# -- delete-offsets -----------------------------------------------------------------------------


def cmd_delete_offsets(args: argparse.Namespace) -> int:
    """kafka-consumer-groups.sh --delete-offsets: OffsetDelete (key 47). A partition of a topic
    the group's live members subscribe to fails with GROUP_SUBSCRIBED_TO_TOPIC."""
    import kafka.errors as errors
    from kafka import TopicPartition

    group = _one_group(args)
    wanted = _parse_topics(args.topic)
    with Closing(admin_client(args)) as admin:
        info = _group_info(admin, [group], share=args.share)[group]
        if info.get("group_type") == "share":
            return _delete_share_offsets(args, admin, group, wanted)
        tps = [
            TopicPartition(t, p) for t, parts in wanted.items() if parts is not None for p in parts
        ]
        whole = [t for t, parts in wanted.items() if parts is None]
        if whole:
            tps += _topic_partitions(admin, whole)
        try:
            result = admin.delete_group_offsets(group, tps)
        except errors.GroupIdNotFoundError:
            raise CliError(f"consumer group {group!r} does not exist") from None
    outcome = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "error": None if error_name(err) == "NONE" else error_name(err),
        }
        for tp, err in sorted(result.items())
    ]
    failed = [o for o in outcome if o["error"]]
    if want_json(args):
        print_json({"group": group, "partitions": outcome})
    else:
        print_table(
            ["TOPIC", "PARTITION", "STATUS"],
            [[o["topic"], o["partition"], o["error"] or "Successful"] for o in outcome],
        )
    if failed:
        raise CliError(
            f"deleting offsets of group {group!r} failed for "
            + ", ".join(f"{o['topic']}:{o['partition']} ({o['error']})" for o in failed)
        )
    return 0


def _delete_share_offsets(
    args: argparse.Namespace, admin: Any, group: str, wanted: dict[str, list[int] | None]
) -> int:
    """kafka-share-groups.sh --delete-offsets: a share group's state goes topic by topic."""
    if any(parts is not None for parts in wanted.values()):
        raise CliError("a share group's offsets are deleted for whole topics: --topic TOPIC")
    outcome = share_groups.delete_offsets(admin, group, list(wanted))
    if want_json(args):
        print_json({"group": group, "topics": outcome})
    else:
        print_table(
            ["TOPIC", "STATUS"], [[o["topic"], o["error"] or "Successful"] for o in outcome]
        )
    failed = [o for o in outcome if o["error"]]
    if failed:
        raise CliError(
            f"deleting offsets of share group {group!r} failed for "
            + ", ".join(f"{o['topic']} ({o['message'] or o['error']})" for o in failed)
        )
    return 0
