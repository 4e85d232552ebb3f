"""`odradek dev`: an ephemeral broker for development and for test suites in any language.

It is `odradek.testing.Broker`: the real broker on a temporary data dir that is removed at exit.
It listens on 127.0.0.1:9092, Kafka's port and the client commands' default bootstrap, unless
that port is taken (a Kafka on the host): then on a free port, and one line on stderr says so.
The first line on stdout is the bootstrap address (`127.0.0.1:PORT`) so a script can read it;
with `--admin` the fault-injection HTTP endpoint (odradek/broker/ops/admin_http.py) is started too
and its URL is the second line. `--json` prints one JSON object with both instead. It runs until
Ctrl-C or SIGTERM and exits 0 after a clean stop.

`--security ssl|mtls|sasl_plaintext|sasl_ssl` (with `--mechanism` PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512 or OAUTHBEARER, and `--user NAME[:PASSWORD]`) serves that listener instead, with a
throwaway CA and certificates in the data dir (odradek.testing.security), and prints the client
properties after the bootstrap line: the librdkafka properties, the paths of the properties
files (librdkafka / kcat -F, and Java clients / Kafka's tools --command-config) and a kcat line.
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
    p.add_argument(
        "--security",
        choices=["ssl", "mtls", "sasl_plaintext", "sasl_ssl"],
        help="serve TLS and/or SASL with a throwaway CA, and print the client properties",
    )
    p.add_argument(
        "--mechanism",
        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
        type=str.upper,
        help="SASL mechanism with --security sasl_* (default PLAIN)",
    )
    p.add_argument(
        "--user",
        action="append",
        metavar="NAME[:PASSWORD]",
        help="a SASL user / client certificate (repeatable; default alice:alice-secret; "
        "password default NAME-secret)",
    )
    p.add_argument(
        "--schema-registry",
        action="store_true",
        help="also serve the built-in Schema Registry on a free port (its URL is printed)",
    )
    p.add_argument("--json", action="store_true", help="print the addresses as one JSON object")
    p.set_defaults(func=cmd_dev)


def security_users(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    users: dict[str, str] = {}
    for item in items:
        name, sep, password = item.partition(":")
        if not name:
            raise CliError(f"--user needs NAME[:PASSWORD], got {item!r}")
        users[name] = password if sep else f"{name}-secret"
    return users


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
        users = security_users(args.user)
        if args.security is None and (args.mechanism or users):
            raise CliError("--mechanism and --user go with --security")
        if args.mechanism and args.security in ("ssl", "mtls"):
            raise CliError(f"--security {args.security} takes no --mechanism")
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
    secure: dict[str, Any] = {"schema_registry": args.schema_registry}
    if args.security:
        secure |= {"security": args.security, "mechanism": args.mechanism, "users": users}
    broker = Broker(topics=topics, config=config, host=args.host, port=port, **secure)
    try:
        try:
            broker.start()
        except OSError:
            if args.port is not None or taken:
                raise
            # 9092 was taken between the check and the bind: a free port after all
            _discard(broker, {})
            taken = True
            broker = Broker(topics=topics, config=config, host=args.host, port=0, **secure)
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
        registry = broker.schema_registry_url if args.schema_registry else None
        security = None
        if broker.security is not None:
            security = broker.security.describe(broker.bootstrap)
        if args.json:
            doc: dict[str, Any] = {
                "bootstrap": broker.bootstrap,
                "admin": admin,
                "data_dir": broker.data_dir,
                "topics": topics,
            }
            if registry is not None:
                doc["schema_registry"] = registry
            if security is not None:
                doc["security"] = security
            print(json.dumps(doc), flush=True)
        else:
            print(broker.bootstrap, flush=True)
            if admin:
                print(admin, flush=True)
            if registry:
                print(registry, flush=True)
            if security is not None:
                from odradek.testing.security import print_client_properties

                print_client_properties(security)
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
