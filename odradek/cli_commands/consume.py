"""`odradek consume TOPIC`: print records of a topic, one line each, as kafka-console-consumer.sh.

Without `--group` the consumer assigns itself every partition (or `--partition P`) and starts at
the end, or at the start with `--from-beginning`, or at `--offset N|earliest|latest` of the one
`--partition`; nothing is committed. With `--group G` it joins the group (JoinGroup/SyncGroup
through the group coordinator), starts from the committed offsets (`--from-beginning` applies
when there are none, like auto.offset.reset=earliest) and commits what it printed when it stops.
`--max-messages N` (or `--max`) stops after N records, `--timeout-ms T` after T ms without a
record; Ctrl-C or SIGTERM stop it cleanly.

Output is Kafka's DefaultMessageFormatter, set with `--property k=v` (or `--formatter-config
FILE`): print.timestamp (`CreateTime:1700000000000`), print.partition (`Partition:0`),
print.offset (`Offset:42`), print.headers (`h1:v1,h2:v2` or NO_HEADERS), print.key, print.value
(default true), in that order, separated by key.separator (TAB); line.separator, headers.separator
and null.literal (`null`) as Kafka's. `--print-key` and `--print-headers` are print.key=true and
print.headers=true. `--formatter json` (or `--json`) prints one JSON object per record and
`--formatter NoOpMessageFormatter` nothing. Consumer properties (isolation.level, max.poll.records,
fetch.max.bytes, ...) come from `--consumer.config FILE` and `--consumer-property k=v`;
`--isolation-level read_committed` hides aborted transactions.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from odradek.cli_commands.common import (
    REQUEST_TIMEOUT_MS,
    SECURITY_KEYS,
    Closing,
    add_client_options,
    bootstrap,
    check_reachable,
    command_config,
    connect_timeout_ms,
    parse_key_values,
    read_properties,
    run_command,
    security_settings,
    want_json,
)
from odradek.cli_commands.output import CliError, Progress, print_json_line, text

# One poll() lasts as long as the command would wait anyway: until --timeout-ms runs out, or this
# long without it (poll returns as soon as it has records, so --max-messages stops as promptly).
# kafka-python 3.0.12 loses a JoinGroup/SyncGroup round that a poll() ends in the middle of: a
# round finishing between two polls is discarded and another started (the leader's JoinGroup
# rebalances the group again), and a leader's round for a metadata change (partitions added) is
# not awaited by the next poll once it has assigned, so its SyncGroup assignment is never applied.
# With 200 ms polls on a busy machine, where a round takes longer, a group never settled or never
# read its new partitions; a round now ends inside its poll unless the command is stopping anyway
# (or, without --timeout-ms, it straddles the end of a minute-long idle poll).
IDLE_POLL_MS = 60_000
TOPIC_WAIT_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consume", help="print records of a topic, one line per record")
    add_client_options(p)
    p.add_argument("topic", nargs="?", help="the topic (or --topic)")
    p.add_argument("--topic", dest="topic_option", metavar="TOPIC", help=argparse.SUPPRESS)
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (with --group: when nothing is committed)",
    )
    p.add_argument("--group", metavar="G", help="consume as a member of this consumer group")
    p.add_argument("--partition", type=int, help="read only this partition (not with --group)")
    p.add_argument(
        "--offset",
        metavar="N|earliest|latest",
        help="where to start in --partition: an offset, earliest or latest (default latest)",
    )
    p.add_argument(
        "--max-messages", "--max", dest="max", type=int, metavar="N", help="stop after N records"
    )
    p.add_argument(
        "--timeout-ms", type=int, metavar="T", help="stop when no record arrives for T milliseconds"
    )
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="formatter property: print.key, print.value, print.headers, print.timestamp, "
        "print.partition, print.offset, key.separator, line.separator, headers.separator, "
        "null.literal (repeatable)",
    )
    p.add_argument(
        "--formatter",
        default="DefaultMessageFormatter",
        help="DefaultMessageFormatter (default), json or NoOpMessageFormatter",
    )
    p.add_argument("--formatter-config", metavar="FILE", help="formatter properties file")
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    p.add_argument("--print-headers", action="store_true", help="print HEADERS<TAB>... first")
    p.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        help="read_committed hides records of aborted transactions (default read_uncommitted)",
    )
    p.add_argument(
        "--consumer-property",
        action="append",
        metavar="KEY=VALUE",
        help="a consumer property: isolation.level, max.poll.records, fetch.max.bytes, "
        "auto.offset.reset, client.id, ... (repeatable)",
    )
    p.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="consumer properties file (--consumer-property wins over it)",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="print a progress line on stderr every second (default: on a TTY)",
    )
    p.set_defaults(func=run_command(cmd_consume))


# consumer properties the command sets itself, or that make no sense for kafka-python
_FIXED = {"bootstrap.servers", "key.deserializer", "value.deserializer", "group.id"}
_NOT_MAPPED = {"partition.assignment.strategy", "interceptor.classes", "metric.reporters"}


def _consumer_properties(args: argparse.Namespace) -> dict[str, Any]:
    """--consumer.config and --consumer-property as kafka-python KafkaConsumer settings
    (Kafka's dotted names become kafka-python's underscored ones; values take the type of
    kafka-python's default). Unknown names are reported once, as Kafka warns."""
    from kafka import KafkaConsumer

    props: dict[str, str] = {}
    if args.consumer_config:
        props.update(read_properties(args.consumer_config))
    props.update(parse_key_values(args.consumer_property, "--consumer-property"))
    if "group.id" in props and args.group is None:
        args.group = props["group.id"]
    out: dict[str, Any] = security_settings({k: v for k, v in props.items() if k in SECURITY_KEYS})
    defaults = KafkaConsumer.DEFAULT_CONFIG
    for key, raw in props.items():
        if key in _FIXED or key in SECURITY_KEYS:
            continue
        name = key.replace(".", "_").replace("-", "_")
        if key in _NOT_MAPPED or name not in defaults:
            print(
                f"odradek: warning: the configuration '{key}' was supplied but isn't a known "
                "config",
                file=sys.stderr,
            )
            continue
        default = defaults[name]
        value = raw.strip()
        try:
            if isinstance(default, bool):
                if value.lower() not in ("true", "false"):
                    raise ValueError(value)
                out[name] = value.lower() == "true"
            elif isinstance(default, int):
                out[name] = int(value)
            elif isinstance(default, float):
                out[name] = float(value)
            elif default is None or isinstance(default, str):
                out[name] = value
            else:
                raise ValueError(value)
        except ValueError:
            raise CliError(f"invalid value {raw!r} for consumer property {key}") from None
    return out


def _consumer(args: argparse.Namespace, props: dict[str, Any]) -> Any:
    from kafka import KafkaConsumer

    settings: dict[str, Any] = {
        "client_id": "odradek-cli-consumer",
        "enable_auto_commit": args.group is not None,
        "auto_offset_reset": "latest",
        "isolation_level": "read_uncommitted",
        "allow_auto_create_topics": False,
        "request_timeout_ms": REQUEST_TIMEOUT_MS + 5000,
        **command_config(args),
        **props,
        "bootstrap_servers": bootstrap(args),
        "group_id": args.group,
        "bootstrap_timeout_ms": connect_timeout_ms(args),
    }
    if args.from_beginning:
        if props.get("auto_offset_reset", "earliest") != "earliest":
            raise CliError(
                "can't simultaneously specify --from-beginning and "
                f"'auto.offset.reset={props['auto_offset_reset']}'"
            )
        settings["auto_offset_reset"] = "earliest"
    if args.isolation_level is not None:
        settings["isolation_level"] = args.isolation_level
    if settings["isolation_level"] not in ("read_committed", "read_uncommitted"):
        raise CliError(f"invalid isolation.level {settings['isolation_level']!r}")
    check_reachable(args, settings)
    return KafkaConsumer(**settings)


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
    offset = args.offset
    if offset is None:
        offset = "earliest" if args.from_beginning else "latest"
    if offset == "earliest":
        consumer.seek_to_beginning(*tps)
    elif offset == "latest":
        consumer.seek_to_end(*tps)
    else:
        consumer.seek(tps[0], int(offset))


_FORMATTER_KEYS = {
    "print.timestamp": False,
    "print.key": False,
    "print.value": True,
    "print.partition": False,
    "print.offset": False,
    "print.headers": False,
}
_FORMATTER_TEXT = {
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "null.literal": "null",
}
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class Formatter:
    """Kafka's DefaultMessageFormatter (tools/consumer/DefaultMessageFormatter.java)."""

    def __init__(self, props: dict[str, str]) -> None:
        unknown = sorted(set(props) - set(_FORMATTER_KEYS) - set(_FORMATTER_TEXT))
        for key in unknown:
            if key.endswith(".deserializer") or ".deserializer." in key:
                raise CliError(f"--property {key}: deserializers are not supported")
            print(f"odradek: warning: unknown formatter property {key}", file=sys.stderr)
        flags = {
            k: props[k].strip().lower() == "true" if k in props else v
            for k, v in _FORMATTER_KEYS.items()
        }
        self.timestamp = flags["print.timestamp"]
        self.key = flags["print.key"]
        self.value = flags["print.value"]
        self.partition = flags["print.partition"]
        self.offset = flags["print.offset"]
        self.headers = flags["print.headers"]
        texts = {k: props.get(k, v).encode() for k, v in _FORMATTER_TEXT.items()}
        self.sep = texts["key.separator"]
        self.line = texts["line.separator"]
        self.headers_sep = texts["headers.separator"]
        self.null = texts["null.literal"]

    def format(self, record: Any) -> bytes:
        null = self.null
        fields: list[bytes] = []
        if self.timestamp:
            kind = _TIMESTAMP_TYPES.get(record.timestamp_type)
            fields.append(
                f"{kind}:{record.timestamp}".encode() if kind is not None else b"NO_TIMESTAMP"
            )
        if self.partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.headers:
            headers = record.headers or []
            fields.append(
                self.headers_sep.join(
                    k.encode() + b":" + (v if v is not None else null) for k, v in headers
                )
                if headers
                else b"NO_HEADERS"
            )
        if self.key:
            fields.append(record.key if record.key is not None else null)
        if self.value:
            fields.append(record.value if record.value is not None else null)
        return self.sep.join(fields) + self.line if fields else b""


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


_FORMATTERS = {
    "defaultmessageformatter": "default",
    "default": "default",
    "json": "json",
    "noopmessageformatter": "noop",
    "noop": "noop",
}


def _formatter_name(name: str) -> str:
    """Kafka's class names (kafka.tools.X, org.apache.kafka.tools.consumer.X) or short ones."""
    short = name.rsplit(".", 1)[-1].lower()
    if short not in _FORMATTERS:
        raise CliError(
            f"unknown --formatter {name!r}: DefaultMessageFormatter, json or NoOpMessageFormatter"
        )
    return _FORMATTERS[short]


def _check_options(args: argparse.Namespace) -> None:
    if args.topic_option is not None:
        if args.topic is not None and args.topic != args.topic_option:
            raise CliError("give the topic once: as an argument or with --topic")
        args.topic = args.topic_option
    if args.topic is None:
        raise CliError("a topic is required (odradek consume TOPIC)")
    if args.group is not None and args.partition is not None:
        raise CliError("--partition cannot be used with --group")
    if args.max is not None and args.max < 0:
        raise CliError("--max-messages must be >= 0")
    if args.offset is not None:
        if args.partition is None:
            raise CliError("the partition is required when offset is specified")
        if args.from_beginning:
            raise CliError("options from-beginning and offset cannot be specified together")
        offset = args.offset.strip().lower()
        if offset not in ("earliest", "latest") and not offset.isdigit():
            raise CliError(
                f"the provided offset value {args.offset!r} is incorrect: valid values are "
                "'earliest', 'latest', or a non-negative number"
            )
        args.offset = offset


def cmd_consume(args: argparse.Namespace) -> int:
    _check_options(args)
    kind = "json" if want_json(args) else _formatter_name(args.formatter)
    fprops = read_properties(args.formatter_config) if args.formatter_config else {}
    fprops.update(parse_key_values(args.property, "--property"))
    if args.print_key:
        fprops["print.key"] = "true"
    if args.print_headers:
        fprops["print.headers"] = "true"
    formatter = Formatter(fprops)
    props = _consumer_properties(args)
    as_json = kind == "json"
    progress = Progress(f"consume {args.topic}", enabled=True if args.progress else None)
    out = sys.stdout.buffer
    count = 0
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with Closing(_consumer(args, props)) as consumer:
            _start(consumer, args)
            idle_since = time.monotonic()
            try:
                while args.max is None or count < args.max:
                    wait_ms = IDLE_POLL_MS
                    if args.timeout_ms is not None:
                        left = args.timeout_ms - (time.monotonic() - idle_since) * 1000
                        if left <= 0:
                            break
                        wait_ms = int(max(left, 1))
                    remaining = None if args.max is None else args.max - count
                    batches = consumer.poll(timeout_ms=wait_ms, max_records=remaining)
                    got = 0
                    for records in batches.values():
                        for record in records:
                            if as_json:
                                print_json_line(_as_json(record))
                            elif kind == "default":
                                out.write(formatter.format(record))
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
