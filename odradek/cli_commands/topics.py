"""`odradek topics list|create|describe|delete|alter` (and `reassign`, in reassign.py), as
kafka-topics.sh and kafka-configs.sh.

Metadata (key 3) lists and describes topics (with ListOffsets (2) for each partition's log-start
offset and high watermark and DescribeLogDirs (35) for its size on the leader, as
`rpk topic describe -p`; `--under-replicated-partitions` and `--unavailable-partitions` report
only those partitions, as kafka-topics.sh --describe), CreateTopics (19), DeleteTopics (20) and
CreatePartitions (37) change them, DescribeConfigs (32) shows the configs that differ from the
defaults, IncrementalAlterConfigs (44, KIP-339) sets and deletes topic configs.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli_commands import reassign
from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    parse_key_values,
    result_message,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    topics = sub.add_parser("topics", help="list, create, describe, alter and delete topics")
    add_client_options(topics)
    cmds = topics.add_subparsers(dest="topics_command", metavar="COMMAND")
    cmds.required = True

    p = cmds.add_parser("list", help="list topics with their partition counts")
    add_client_options(p)
    p.add_argument(
        "--exclude-internal",
        action="store_true",
        help="leave out internal topics such as __consumer_offsets",
    )
    p.set_defaults(func=run_command(cmd_list))

    p = cmds.add_parser("create", help="create a topic")
    add_client_options(p)
    p.add_argument("name", nargs="?", help="the topic (or --topic)")
    _topic_option(p)
    p.add_argument(
        "--partitions",
        type=int,
        default=-1,
        help="partition count (default: the broker's num.partitions)",
    )
    p.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="replicas per partition (default: default.replication.factor)",
    )
    p.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)"
    )
    p.add_argument(
        "--if-not-exists", action="store_true", help="succeed when the topic already exists"
    )
    p.set_defaults(func=run_command(cmd_create))

    p = cmds.add_parser(
        "describe",
        help="partitions (leader, epoch, replicas, ISR, offsets, size) and configs",
    )
    add_client_options(p)
    p.add_argument("names", nargs="*", metavar="NAME", help="topics (default: all)")
    _topic_option(p)
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    report = p.add_mutually_exclusive_group()
    report.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replica set",
    )
    report.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a live leader",
    )
    report.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than the topic's min.insync.replicas",
    )
    report.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="only partitions whose ISR is exactly min.insync.replicas",
    )
    p.set_defaults(func=run_command(cmd_describe))

    p = cmds.add_parser("delete", help="delete topics")
    add_client_options(p)
    p.add_argument("names", nargs="*", metavar="NAME", help="topics (or --topic)")
    _topic_option(p)
    p.add_argument("--if-exists", action="store_true", help="succeed when a topic is missing")
    p.set_defaults(func=run_command(cmd_delete))

    p = cmds.add_parser("alter", help="change topic configs or add partitions")
    add_client_options(p)
    p.add_argument("name", nargs="?", help="the topic (or --topic)")
    _topic_option(p)
    p.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="set a topic config (repeatable)"
    )
    p.add_argument(
        "--delete-config",
        action="append",
        metavar="KEY",
        help="reset a topic config to its default (repeatable)",
    )
    p.add_argument("--partitions", type=int, help="grow the topic to this many partitions")
    p.set_defaults(func=run_command(cmd_alter))

    reassign.register_under(cmds)


def _topic_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--topic",
        action="append",
        dest="topic_opt",
        metavar="NAME",
        help="the topic, as kafka-topics.sh names it (repeatable)",
    )


def _topic_names(args: argparse.Namespace) -> list[str]:
    """Topics named as NAME arguments and with --topic, in order, once each."""
    given = ([args.name] if getattr(args, "name", None) else []) + list(
        getattr(args, "names", None) or []
    )
    return list(dict.fromkeys(given + list(args.topic_opt or [])))


def _one_topic(args: argparse.Namespace) -> str:
    names = _topic_names(args)
    if len(names) != 1:
        raise CliError("name one topic: NAME or --topic NAME")
    args.name = names[0]
    return names[0]


# -- helpers ------------------------------------------------------------------------------------


def _partition_rows(topic: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "partition": p["partition_index"],
            "leader": p["leader_id"],
            "leader_epoch": p.get("leader_epoch", -1),
            "replicas": list(p["replica_nodes"]),
            "isr": list(p["isr_nodes"]),
            "offline": list(p.get("offline_replicas") or []),
        }
        for p in sorted(topic.get("partitions") or [], key=lambda p: p["partition_index"])
    ]


OFFSETS_TIMEOUT_MS = 5000


def _log_offsets(admin: Any, tps: list[Any], spec: Any) -> dict[Any, int]:
    """ListOffsets for partitions with a leader; a partition whose leader cannot answer (it
    just failed) is left out rather than failing the whole describe."""
    import kafka.errors as errors

    if not tps:
        return {}
    try:
        found = admin.list_partition_offsets(
            {tp: spec for tp in tps}, timeout_ms=OFFSETS_TIMEOUT_MS
        )
        return {tp: ot.offset for tp, ot in found.items()}
    except errors.KafkaError:
        if len(tps) == 1:
            return {}
    out: dict[Any, int] = {}
    for tp in tps:
        out.update(_log_offsets(admin, [tp], spec))
    return out


def _sizes(admin: Any, names: list[str]) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker) -> bytes on disk, from DescribeLogDirs (key 35) to every live
    broker; empty when the cluster does not answer it (a broker without the API)."""
    import kafka.errors as errors

    if not names:
        return {}
    try:
        answers = admin.describe_log_dirs(list(names))
    except (errors.KafkaError, OSError):
        return {}
    out: dict[tuple[str, int, int], int] = {}
    for answer in answers:
        for log_dir in answer.get("log_dirs") or []:
            for topic in log_dir.get("topics") or []:
                for part in topic.get("partitions") or []:
                    if part.get("is_future_key"):
                        continue
                    out[(topic["name"], part["partition_index"], answer["broker"])] = part[
                        "partition_size"
                    ]
    return out


def _add_offsets_and_sizes(admin: Any, described: list[dict[str, Any]]) -> None:
    """Per partition: log-start offset, high watermark (ListOffsets earliest/latest, as
    `rpk topic describe -p`) and the leader replica's size in bytes (DescribeLogDirs)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    tps = [
        TopicPartition(t["name"], p["partition"])
        for t in described
        for p in t["partitions"]
        if p["leader"] >= 0
    ]
    starts = _log_offsets(admin, tps, OffsetSpec.EARLIEST)
    ends = _log_offsets(admin, tps, OffsetSpec.LATEST)
    sizes = _sizes(admin, [t["name"] for t in described])
    for t in described:
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition"])
            p["log_start_offset"] = starts.get(tp)
            p["high_watermark"] = ends.get(tp)
            p["size_bytes"] = sizes.get((t["name"], p["partition"], p["leader"]))


def _live_brokers(admin: Any) -> set[int]:
    brokers = admin.describe_cluster().get("brokers") or []
    return {b["broker_id"] for b in brokers if not b.get("is_fenced")}


def _describe_topics(admin: Any, names: list[str] | None) -> list[dict[str, Any]]:
    """Metadata for `names` (None: all), failing with one line when a topic is missing."""
    found = admin.describe_topics(names)
    for topic in found:
        if topic["error_code"]:
            if topic["error_code"] == 3:
                raise CliError(f"topic {topic['name']!r} does not exist")
            raise CliError(
                f"cannot describe topic {topic['name']!r}: {error_name(topic['error_code'])}"
            )
    return sorted(found, key=lambda t: t["name"])


def _non_default_configs(admin: Any, names: list[str]) -> dict[str, dict[str, str | None]]:
    """Configs set on each topic (DescribeConfigs sources other than the defaults)."""
    from kafka.admin import ConfigResource

    if not names:
        return {}
    described = admin.describe_configs([ConfigResource("TOPIC", n) for n in names])
    by_topic = described.get("topic", {})
    out: dict[str, dict[str, str | None]] = {}
    for name in names:
        entries = by_topic.get(name) or {}
        out[name] = {
            k: (None if v.get("is_sensitive") else v.get("value"))
            for k, v in sorted(entries.items())
        }
    return out


def _replication_factor(topic: dict[str, Any]) -> int:
    parts = topic.get("partitions") or []
    return max((len(p["replica_nodes"]) for p in parts), default=0)


def _check(result_code: int, message: str | None, what: str) -> None:
    if result_code:
        detail = f": {message}" if message else ""
        raise CliError(f"{what} failed: {error_name(result_code)}{detail}")


# -- commands -----------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        topics = _describe_topics(admin, None)
    if args.exclude_internal:
        topics = [t for t in topics if not t.get("is_internal")]
    rows = [
        {
            "name": t["name"],
            "partitions": len(t.get("partitions") or []),
            "replication_factor": _replication_factor(t),
            "internal": bool(t.get("is_internal")),
        }
        for t in topics
    ]
    if want_json(args):
        print_json(rows)
        return
    print_table(
        ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"],
        [
            [r["name"], r["partitions"], r["replication_factor"], "yes" if r["internal"] else ""]
            for r in rows
        ],
    )


def cmd_create(args: argparse.Namespace) -> int:
    _one_topic(args)
    configs = parse_key_values(args.config, "--config")
    spec = {
        args.name: {
            "num_partitions": args.partitions,
            "replication_factor": args.replication_factor,
            "configs": configs,
        }
    }
    with Closing(admin_client(args)) as admin:
        result = admin.create_topics(spec, raise_errors=False)
        topic = result["topics"][0]
        existed = topic["error_code"] == 36
        if existed and args.if_not_exists:
            pass
        else:
            _check(topic["error_code"], topic.get("error_message"), f"creating topic {args.name!r}")
        partitions, rf = topic.get("num_partitions", -1), topic.get("replication_factor", -1)
        if existed or partitions < 0:
            described = _describe_topics(admin, [args.name])[0]
            partitions = len(described["partitions"])
            rf = _replication_factor(described)
    if want_json(args):
        print_json(
            {
                "topic": args.name,
                "created": not existed,
                "partitions": partitions,
                "replication_factor": rf,
                "configs": configs,
            }
        )
    elif existed:
        print(f"Topic {args.name} already exists.")
    else:
        print(
            f"Created topic {args.name} with {partitions} partitions and replication factor {rf}."
        )
    return 0


def cmd_describe(args: argparse.Namespace) -> None:
    report = (
        args.under_replicated_partitions
        or args.unavailable_partitions
        or args.under_min_isr_partitions
        or args.at_min_isr_partitions
    )
    with Closing(admin_client(args)) as admin:
        topics = _describe_topics(admin, _topic_names(args) or None)
        if args.exclude_internal:
            topics = [t for t in topics if not t.get("is_internal")]
        if report:
            live = _live_brokers(admin) if args.unavailable_partitions else set()
            min_isr = (
                _min_isr(admin, [t["name"] for t in topics])
                if args.under_min_isr_partitions or args.at_min_isr_partitions
                else {}
            )
            _print_report(args, topics, live, min_isr)
            return
        configs = _non_default_configs(admin, [t["name"] for t in topics])
        described = [
            {
                "name": t["name"],
                "topic_id": str(t["topic_id"]) if t.get("topic_id") else None,
                "internal": bool(t.get("is_internal")),
                "partition_count": len(t.get("partitions") or []),
                "replication_factor": _replication_factor(t),
                "configs": configs.get(t["name"], {}),
                "partitions": _partition_rows(t),
            }
            for t in topics
        ]
        _add_offsets_and_sizes(admin, described)
    if want_json(args):
        names = _topic_names(args)
        print_json(described if len(names) != 1 else described[0])
        return
    for i, topic in enumerate(described):
        if i:
            print()
        conf = ",".join(f"{k}={v}" for k, v in topic["configs"].items())
        print(
            f"Topic: {topic['name']}  TopicId: {topic['topic_id'] or '-'}  "
            f"PartitionCount: {topic['partition_count']}  "
            f"ReplicationFactor: {topic['replication_factor']}  Configs: {conf or '-'}"
        )
        print_table(
            [
                "PARTITION",
                "LEADER",
                "EPOCH",
                "REPLICAS",
                "ISR",
                "OFFLINE",
                "LOG-START-OFFSET",
                "HIGH-WATERMARK",
                "SIZE",
            ],
            [
                [
                    p["partition"],
                    p["leader"] if p["leader"] >= 0 else "none",
                    p["leader_epoch"],
                    p["replicas"],
                    p["isr"],
                    p["offline"],
                    p["log_start_offset"],
                    p["high_watermark"],
                    p["size_bytes"],
                ]
                for p in topic["partitions"]
            ],
        )


def _min_isr(admin: Any, names: list[str]) -> dict[str, int]:
    """Each topic's effective min.insync.replicas (DescribeConfigs, defaults included)."""
    from kafka.admin import ConfigResource

    if not names:
        return {}
    described = admin.describe_configs(
        [ConfigResource("TOPIC", n, {"min.insync.replicas": None}) for n in names],
        config_filter="all",
    ).get("topic", {})
    out = {}
    for name in names:
        entry = (described.get(name) or {}).get("min.insync.replicas") or {}
        out[name] = int(entry.get("value") or 1)
    return out


def _print_report(
    args: argparse.Namespace,
    topics: list[dict[str, Any]],
    live: set[int],
    min_isr: dict[str, int],
) -> None:
    """kafka-topics.sh --describe --under-replicated-partitions / --unavailable-partitions /
    --under-min-isr-partitions / --at-min-isr-partitions: only the partitions in that condition,
    one line each, nothing when there are none."""
    rows = []
    for t in topics:
        for p in _partition_rows(t):
            if args.under_replicated_partitions:
                hit = len(p["isr"]) < len(p["replicas"])
            elif args.under_min_isr_partitions:
                hit = len(p["isr"]) < min_isr.get(t["name"], 1)
            elif args.at_min_isr_partitions:
                hit = len(p["isr"]) == min_isr.get(t["name"], 1)
            else:
                hit = p["leader"] < 0 or p["leader"] not in live
            if hit:
                rows.append({"topic": t["name"], **p})
    if want_json(args):
        print_json(rows)
        return
    if rows:
        print_table(
            ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            [
                [
                    r["topic"],
                    r["partition"],
                    r["leader"] if r["leader"] >= 0 else "none",
                    r["leader_epoch"],
                    r["replicas"],
                    r["isr"],
                    r["offline"],
                ]
                for r in rows
            ],
        )


def cmd_delete(args: argparse.Namespace) -> int:
    names = _topic_names(args)
    if not names:
        raise CliError("name the topics to delete: NAME or --topic NAME")
    with Closing(admin_client(args)) as admin:
        result = admin.delete_topics(names, raise_errors=False)
    outcome = []
    failed = []
    for topic in result["topics"]:
        code = topic["error_code"]
        if code == 3 and args.if_exists:
            code = 0
        outcome.append(
            {
                "topic": topic["name"],
                "error": error_name(code) if code else None,
                "message": topic.get("error_message") if code else None,
            }
        )
        if code:
            failed.append(
                f"{topic['name']!r}: {error_name(code)}"
                + (f" ({topic['error_message']})" if topic.get("error_message") else "")
            )
    if want_json(args):
        print_json(outcome)
    else:
        for item in outcome:
            if not item["error"]:
                print(f"Deleted topic {item['topic']}.")
    if failed:
        raise CliError("deleting topics failed: " + "; ".join(failed))
    return 0


def cmd_alter(args: argparse.Namespace) -> int:
    from kafka.admin import AlterConfigOp, ConfigResource

    _one_topic(args)
    sets = parse_key_values(args.config, "--config")
    deletes = list(args.delete_config or [])
    if not sets and not deletes and args.partitions is None:
        raise CliError("nothing to alter: give --config, --delete-config or --partitions")
    both = set(sets) & set(deletes)
    if both:
        raise CliError(f"--config and --delete-config both name {', '.join(sorted(both))}")
    done: dict[str, Any] = {"topic": args.name}
    with Closing(admin_client(args)) as admin:
        _describe_topics(admin, [args.name])
        if sets or deletes:
            ops: dict[str, Any] = {k: (AlterConfigOp.SET, v) for k, v in sets.items()}
            ops.update({k: (AlterConfigOp.DELETE, None) for k in deletes})
            result = admin.alter_configs(
                [ConfigResource("TOPIC", args.name, ops)], raise_on_unknown=False, incremental=True
            )
            outcome = result.get("topic", {}).get(args.name, "OK")
            if outcome != "OK":
                raise CliError(
                    f"altering configs of {args.name!r} failed: {result_message(outcome)}"
                )
            done["set"] = sets
            done["deleted"] = deletes
        if args.partitions is not None:
            response = admin.create_partitions({args.name: args.partitions}, raise_errors=False)
            for res in response.results:
                _check(
                    res.error_code,
                    res.error_message,
                    f"growing {args.name!r} to {args.partitions} partitions",
                )
            done["partitions"] = args.partitions
    if want_json(args):
        print_json(done)
        return 0
    if sets or deletes:
        changes = [f"{k}={v}" for k, v in sets.items()] + [f"-{k}" for k in deletes]
        print(f"Altered configs of topic {args.name}: {', '.join(changes)}.")
    if args.partitions is not None:
        print(f"Topic {args.name} now has {args.partitions} partitions.")
    return 0
