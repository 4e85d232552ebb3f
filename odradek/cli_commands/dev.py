"""`odradek dev`: an ephemeral broker for development and for test suites in any language.

It is `odradek.testing.Broker`: the real broker on a temporary data dir that is removed at exit.
It listens on 127.0.0.1:9092, Kafka's port and the client commands' default bootstrap, unless
that port is taken (a Kafka on the host): then on a free port, and one line on stderr says so.
The first line on stdout is the bootstrap address (`127.0.0.1:PORT`) so a script can read it;
with `--admin` the fault-injection HTTP endpoint (odradek/broker/ops/admin_http.py) is started too
and its URL is the second line. `--json` prints one JSON object with both instead. It runs until
Ctrl-C or SIGTERM and exits 0 after a clean stop.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeAlias

from odradek.cli_commands.common import parse_key_values
from odradek.cli_commands.output import CliError

if TYPE_CHECKING:
    from odradek.testing import Broker

# What signal.signal returns and takes: a handler, SIG_DFL / SIG_IGN, or None (set outside Python).
_SignalHandler: TypeAlias = Callable[[int, FrameType | None], object] | int | None


# Kafka's port, where the client commands look by default (localhost:9092)
DEFAULT_PORT = 9092


def ports_free(host: str, ports: list[int]) -> bool:
    """Whether a listener could bind every port on `host` now (as asyncio's create_server,
    with SO_REUSEADDR, so that a port in TIME_WAIT counts as free)."""
    import socket

    for port in ports:
        try:
            infos = socket.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except OSError:
            return False
        for family, type_, proto, _, address in infos:
            with socket.socket(family, type_, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(address)
                except OSError:
                    return False
    return True


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dev", help="run an ephemeral broker on a temp dir (removed at exit)")
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"listener port (default {DEFAULT_PORT}, or a free one when it is taken; 0: free)",
    )
    p.add_argument("--host", default="127.0.0.1", help="listener host (default 127.0.0.1)")
    p.add_argument(
        "--topic",
        action="append",
        metavar="NAME[:PARTITIONS]",
        help="create this topic at start (repeatable)",
    )
    p.add_argument(
        "--admin",
        metavar="HOST:PORT",
        nargs="?",
        const="127.0.0.1:0",
        help="also serve the fault-injection HTTP endpoint (default 127.0.0.1:0)",
    )
    p.add_argument(
        "--override",
        action="append",
        metavar="KEY=VALUE",
        help="set a broker config key (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the addresses as one JSON object")
    p.set_defaults(func=cmd_dev)


def _topics(items: list[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or []:
        name, _, count = item.partition(":")
        if not name:
            raise CliError(f"--topic needs NAME[:PARTITIONS], got {item!r}")
        try:
            partitions = int(count) if count else 1
        except ValueError:
            raise CliError(f"--topic {item!r}: partitions must be a number") from None
        if partitions < 1:
            raise CliError(f"--topic {item!r}: partitions must be at least 1")
        out[name] = partitions
    return out


def _admin_url(broker: Any) -> str | None:
    admin = broker.server.admin_http if broker.server else None
    return admin.url if admin is not None else None


def cmd_dev(args: argparse.Namespace) -> int:
    from odradek.log.config import ConfigError

    try:
        topics = _topics(args.topic)
        config = parse_key_values(args.override, "--override")
    except CliError as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return exc.status
    if args.admin:
        config["odradek.admin.listen"] = args.admin
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    from odradek.testing import Broker

    port = args.port
    if port and not ports_free(args.host, [port]):
        # refused before the broker starts: its start-up lines would come before the error
        _restore(previous)
        print(f"odradek: cannot listen on {args.host}:{port}: the port is taken", file=sys.stderr)
        return 1
    taken = port is None and not ports_free(args.host, [DEFAULT_PORT])
    if port is None:
        port = 0 if taken else DEFAULT_PORT
    broker = Broker(topics=topics, config=config, host=args.host, port=port)
    try:
        try:
            broker.start()
        except OSError:
            if args.port is not None or taken:
                raise
            # 9092 was taken between the check and the bind: a free port after all
            _discard(broker, {})
            taken = True
            broker = Broker(topics=topics, config=config, host=args.host, port=0)
            broker.start()
    except (ConfigError, ValueError) as exc:
        _discard(broker, previous)
        print(f"odradek: bad configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        _discard(broker, previous)
        print(f"odradek: cannot listen: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        if taken:
            print(
                f"odradek: port {DEFAULT_PORT} is taken (another Kafka?): this dev broker is on "
                f"{broker.bootstrap}; give client commands -b {broker.bootstrap}",
                file=sys.stderr,
                flush=True,
            )
        admin = _admin_url(broker)
        if args.json:
            print(
                json.dumps(
                    {
                        "bootstrap": broker.bootstrap,
                        "admin": admin,
                        "data_dir": broker.data_dir,
                        "topics": topics,
                    }
                ),
                flush=True,
            )
        else:
            print(broker.bootstrap, flush=True)
            if admin:
                print(admin, flush=True)
            print(
                f"odradek dev broker on {broker.bootstrap}, data in {broker.data_dir} "
                "(removed at exit); Ctrl-C to stop",
                file=sys.stderr,
                flush=True,
            )
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        broker.stop()
        _restore(previous)


def _restore(handlers: dict[signal.Signals, _SignalHandler]) -> None:
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _discard(broker: Broker, handlers: dict[signal.Signals, _SignalHandler]) -> None:
    """After a failed start: nothing runs any more; remove the temp dir."""
    shutil.rmtree(broker.data_dir, ignore_errors=True)
    _restore(handlers)
