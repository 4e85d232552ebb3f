"""`odradek produce TOPIC`: one record per stdin line, as kafka-console-producer.sh.

Records are batched as Kafka's producer does (producer_client.py: batch.size, linger.ms,
idempotence, retries), so `seq 200000 | odradek produce t` takes a fraction of a second.
Producer properties come from `--producer.config FILE`, then `--producer-property k=v`
(repeatable), then the shorthand options `--acks`, `--linger-ms`, `--batch-size`,
`--compression` when given, as kafka-console-producer merges them.

Line parsing is kafka-console-producer's LineMessageReader, set with `--property k=v`:
parse.key (key.separator, default TAB), parse.headers (headers.delimiter TAB, headers.separator
`,`, headers.key.separator `:`), ignore.error (a line without a separator becomes a value with a
null key / a header without value instead of an error) and null.marker (a key, value or header
value equal to it is null). `--key-separator SEP` is parse.key=true key.separator=SEP;
`--header k=v` adds a header to every record; `--partition` pins the partition. Line terminators
(\\n, \\r\\n) are not part of the value; an empty line is a record with an empty value. A line
that does not parse ends the command (status 1) after the lines before it were sent.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from odradek.cli_commands.common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    add_client_options,
    connect_timeout_ms,
    parse_key_values,
    read_properties,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, Progress, print_json

if TYPE_CHECKING:
    from odradek.cli_commands.producer_client import Producer

FLUSH_TIMEOUT_S = 120.0
READ_SIZE = 1 << 20

# --property keys of kafka-console-producer's LineMessageReader, with Kafka's defaults
READER_DEFAULTS = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "ignore.error": "false",
    "null.marker": "",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "produce",
        help="send stdin lines to a topic, one record per line",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_client_options(p)
    p.add_argument("topic", nargs="?", help="the topic (or --topic)")
    p.add_argument("--topic", dest="topic_option", metavar="TOPIC", help=argparse.SUPPRESS)
    p.add_argument(
        "--producer-property",
        action="append",
        metavar="KEY=VALUE",
        help="a producer property: acks, batch.size, linger.ms, compression.type, "
        "max.request.size, enable.idempotence, ... (repeatable)",
    )
    p.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="producer properties file (--producer-property wins over it)",
    )
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="line reader property: parse.key, key.separator, parse.headers, "
        "headers.delimiter, headers.separator, headers.key.separator, ignore.error, "
        "null.marker (repeatable)",
    )
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
        "--request-required-acks",
        choices=["all", "-1", "1", "0"],
        help="acknowledgements to wait for (producer property acks, default all)",
    )
    p.add_argument(
        "--linger-ms", "--timeout", type=int, help="batching delay (linger.ms, default 5)"
    )
    for flag, key in _CONSOLE_PRODUCER_FLAGS.items():
        p.add_argument(flag, type=int, metavar="N", help=f"producer property {key}")
    p.add_argument(
        "--batch-size",
        type=int,
        help=f"batch size in bytes (batch.size, default {DEFAULT_BATCH_SIZE}, as kcat's)",
    )
    p.add_argument(
        "--compression",
        "--compression-codec",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="compression codec (compression.type, default none)",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="print a progress line on stderr every second (default: on a TTY)",
    )
    p.set_defaults(func=run_command(cmd_produce))


# batch.size unless set: librdkafka's (kcat's) default rather than the Java producer's 16384.
# Lines from a file or a pipe then go in batches of ~10,000 records of 100 B instead of ~150,
# and the broker's per-request work, not the tool, no longer sets the pace (bench/produce_cli.py);
# interactive lines still leave after linger.ms. Capped by max.request.size.
DEFAULT_BATCH_SIZE = 1_000_000

# kafka-console-producer.sh's flags for producer properties
_CONSOLE_PRODUCER_FLAGS = {
    "--request-timeout-ms": "request.timeout.ms",
    "--message-send-max-retries": "retries",
    "--retry-backoff-ms": "retry.backoff.ms",
    "--max-block-ms": "max.block.ms",
}


def _producer_properties(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {"batch.size": str(DEFAULT_BATCH_SIZE)}
    if args.producer_config:
        props.update(read_properties(args.producer_config))
    props.update(parse_key_values(args.producer_property, "--producer-property"))
    for flag, key in _CONSOLE_PRODUCER_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            props[key] = str(value)
    for option, key in (
        ("acks", "acks"),
        ("linger_ms", "linger.ms"),
        ("batch_size", "batch.size"),
        ("compression", "compression.type"),
    ):
        value = getattr(args, option)
        if value is not None:
            props[key] = str(value)
    return props


class LineReader:
    """kafka-console-producer's LineMessageReader over byte lines."""

    def __init__(self, props: dict[str, str], static_headers: list[tuple[bytes, bytes]]) -> None:
        unknown = sorted(set(props) - set(READER_DEFAULTS))
        if unknown:
            print(
                f"odradek: warning: unknown --property {', '.join(unknown)} (known: "
                + ", ".join(READER_DEFAULTS)
                + ")",
                file=sys.stderr,
            )
        conf = {**READER_DEFAULTS, **props}
        for flag in ("parse.key", "parse.headers", "ignore.error"):
            if conf[flag].strip().lower() not in ("true", "false"):
                raise CliError(f"--property {flag} must be true or false, got {conf[flag]!r}")
        self.parse_key = conf["parse.key"].strip().lower() == "true"
        self.parse_headers = conf["parse.headers"].strip().lower() == "true"
        self.ignore_error = conf["ignore.error"].strip().lower() == "true"
        self.key_sep = conf["key.separator"].encode()
        self.headers_delim = conf["headers.delimiter"].encode()
        self.headers_sep = conf["headers.separator"].encode()
        self.headers_key_sep = conf["headers.key.separator"].encode()
        self.null_marker = conf["null.marker"].encode() if "null.marker" in props else None
        if self.null_marker == b"":
            raise CliError("--property null.marker must not be empty")
        names = {
            "key.separator": self.key_sep,
            "headers.delimiter": self.headers_delim,
            "headers.separator": self.headers_sep,
            "headers.key.separator": self.headers_key_sep,
        }
        for name, value in names.items():
            if not value and (self.parse_key if name == "key.separator" else self.parse_headers):
                raise CliError(f"--property {name} must not be empty")
        if self.parse_headers:
            pairs = [
                ("headers.delimiter", "headers.separator"),
                ("headers.delimiter", "headers.key.separator"),
                ("headers.separator", "headers.key.separator"),
            ]
            for a, b in pairs:
                if names[a] == names[b]:
                    raise CliError(f"--property {a} and {b} may not be equal")
        self.static_headers = static_headers
        self.plain = (
            not self.parse_key
            and not self.parse_headers
            and not static_headers
            and self.null_marker is None
        )

    def _cut(self, line: bytes, start: int, sep: bytes, what: str, number: int) -> bytes | None:
        index = line.find(sep, start)
        if index < 0:
            if self.ignore_error:
                return None
            shown = line.decode("utf-8", "backslashreplace")
            raise CliError(f"No {what} found on line number {number}: '{shown}'")
        return line[start:index]

    def parse(
        self, line: bytes, number: int
    ) -> tuple[bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]:
        start = 0
        raw_headers = None
        if self.parse_headers:
            raw_headers = self._cut(line, 0, self.headers_delim, "headers delimiter", number)
            if raw_headers is not None:
                start = len(raw_headers) + len(self.headers_delim)
        key = None
        if self.parse_key:
            key = self._cut(line, start, self.key_sep, "key separator", number)
            if key is not None:
                start += len(key) + len(self.key_sep)
        value: bytes | None = line[start:] if start else line
        marker = self.null_marker
        if marker is not None:
            if key == marker:
                key = None
            if value == marker:
                value = None
        headers: list[tuple[bytes, bytes | None]] = list(self.static_headers)
        if raw_headers is not None and raw_headers != marker:
            for pair in raw_headers.split(self.headers_sep):
                hkey, sep, hvalue = pair.partition(self.headers_key_sep)
                if not sep:
                    if not self.ignore_error:
                        shown = pair.decode("utf-8", "backslashreplace")
                        raise CliError(
                            f"No header key separator found in pair '{shown}' on line number "
                            f"{number}"
                        )
                    headers.append((pair, None))
                    continue
                if marker is not None and hkey == marker:
                    raise CliError(
                        f"Header keys should not be equal to the null marker "
                        f"'{marker.decode()}' as they can't be null"
                    )
                headers.append((hkey, None if hvalue == marker else hvalue))
        return key, value, headers


def _static_headers(items: list[str] | None) -> list[tuple[bytes, bytes]]:
    out = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--header needs key=value, got {item!r}")
        out.append((key.encode(), value.encode()))
    return out


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _bootstrap(args: argparse.Namespace, props: dict[str, str]) -> str:
    return (
        getattr(args, "bootstrap_server", None)
        or os.environ.get(BOOTSTRAP_ENV)
        or props.get("bootstrap.servers")
        or DEFAULT_BOOTSTRAP
    )


def cmd_produce(args: argparse.Namespace) -> int:
    from odradek.cli_commands import producer_client as pc

    if args.topic_option is not None:
        if args.topic is not None and args.topic != args.topic_option:
            raise CliError("give the topic once: as an argument or with --topic")
        args.topic = args.topic_option
    if args.topic is None:
        raise CliError("a topic is required (odradek produce TOPIC)")

    reader_props = parse_key_values(args.property, "--property")
    if args.key_separator is not None:
        if args.key_separator == "":
            raise CliError("--key-separator must not be empty")
        reader_props.setdefault("parse.key", "true")
        reader_props["key.separator"] = args.key_separator
    reader = LineReader(reader_props, _static_headers(args.header))
    props = _producer_properties(args)
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol != "PLAINTEXT" or getattr(args, "command_config", None):
        # the batching producer (producer_client.py) speaks PLAINTEXT only
        raise CliError(
            "odradek produce speaks PLAINTEXT only; for a secured listener use kcat -F with "
            "the librdkafka properties (odradek dev --security prints them) or a PLAINTEXT "
            "listener beside it"
        )
    try:
        cfg = pc.ProducerConfig.from_properties(props)
        servers = pc.parse_bootstrap(_bootstrap(args, props))
    except pc.ProducerConfigError as exc:
        raise CliError(str(exc)) from None
    for warning in cfg.warnings:
        print(f"odradek: warning: {warning}", file=sys.stderr)
    if args.partition is not None and args.partition < 0:
        raise CliError("--partition must be >= 0")
    cfg.max_block_ms = min(cfg.max_block_ms, max(connect_timeout_ms(args), 1))
    from odradek.cli_commands.reachability import check_bootstrap

    check_bootstrap(_bootstrap(args, props), connect_timeout_ms(args), plaintext=True)
    progress = Progress(f"produce {args.topic}", enabled=True if args.progress else None)
    producer = pc.Producer(servers, args.topic, cfg, connect_timeout_ms(args), args.partition)
    sent = 0
    try:
        try:
            producer.start()
        except (OSError, TimeoutError) as exc:
            raise CliError(f"cannot connect to a broker: {exc}") from None
        except pc.ProducerConfigError as exc:
            raise CliError(str(exc)) from None
        # SIGTERM, like Ctrl-C, stops reading; what was read is still sent (as Kafka's tool
        # closes its producer in a shutdown hook)
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            sent = _pump(producer, reader, progress)
        finally:
            try:
                producer.flush(FLUSH_TIMEOUT_S)
            finally:
                signal.signal(signal.SIGTERM, previous)
    finally:
        producer.close()
        progress.done()
    outcome = producer.outcome
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


def _pump(producer: Producer, reader: LineReader, progress: Progress) -> int:
    """Read stdin in large chunks and hand its lines to the producer; returns the count."""
    fd = sys.stdin.fileno()
    carry = b""
    number = 0
    shown = 0
    eof = False
    while not eof:
        if producer.full():
            producer.poll(0.05)
            continue
        if not producer.poll(1.0, fd):
            continue
        chunk = os.read(fd, READ_SIZE)
        if chunk:
            data = carry + chunk if carry else chunk
            lines = data.split(b"\n")
            carry = lines.pop()
        else:
            eof = True
            lines = [carry] if carry else []
            data = carry
        if b"\r" in data:
            lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
        if lines:
            number = _feed(producer, reader, lines, number)
        if producer.outcome.delivered != shown:
            progress.add(producer.outcome.delivered - shown)
            shown = producer.outcome.delivered
    return number


def _feed(producer: Producer, reader: LineReader, lines: list[bytes], number: int) -> int:
    now = time.monotonic()
    ts = int(time.time() * 1000)
    if reader.plain:
        producer.append_values(lines, ts, now)
        return number + len(lines)
    for line in lines:
        number += 1
        key, value, headers = reader.parse(line, number)
        producer.append(key, value, headers, ts, now)
    return number
