"""`odradek serve | topics | groups | produce | consume | cluster ...`.

`odradek serve [server.properties] [--override key=value ...]` starts a broker the way
kafka-server-start.sh does; with no arguments it listens on localhost:9092 and keeps data in
./odradek-data. A bad config, an unusable data dir or a busy port ends it with one line and
exit status 1; SIGTERM and Ctrl-C shut it down cleanly. A broker of a cluster whose every log dir
failed halts and the process ends with one line and exit status 1, as Kafka's does.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.cli_commands import register_all, register_alone

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig

# asyncio and the broker/log modules are imported by the commands that use them: client commands
# (`odradek produce`) start ~100 ms faster without them.

log = logging.getLogger("odradek")


def _parse_overrides(items: list[str]) -> dict[str, str]:
    from odradek.log.config import ConfigError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override needs key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _check_ports(config: BrokerConfig) -> None:
    """Refuse a busy listener port before anything starts, so that its error is the only line
    (binding it later, after the coordinators have loaded, printed their start-up lines first)."""
    import socket

    for listener in config.listeners:
        if listener.port == 0:
            continue
        try:
            addresses = socket.getaddrinfo(
                listener.host or None,
                listener.port,
                type=socket.SOCK_STREAM,
                flags=socket.AI_PASSIVE,
            )
        except OSError:
            continue  # an unresolvable host: the bind itself reports it
        for family, type_, proto, _, address in addresses:
            with socket.socket(family, type_, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    probe.bind(address)
                except OSError as exc:
                    where = f"{listener.name}://{listener.host}:{listener.port}"
                    raise SystemExit(
                        f"odradek: cannot listen on {where}: {exc.strerror or exc}"
                    ) from None


async def _serve(config: BrokerConfig) -> int:
    import asyncio

    from odradek.broker.server import Broker

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    broker = Broker(config)
    try:
        await broker.start()
    except OSError as exc:
        await broker.stop()
        where = ",".join(f"{x.name}://{x.host}:{x.port}" for x in config.listeners)
        raise SystemExit(f"odradek: cannot listen on {where}: {exc.strerror or exc}") from None
    from odradek.broker.ops import gc_tuning

    gc_tuning.tune()  # full collections would walk every start-up object
    listeners = ",".join(f"{b.name}://{b.host}:{b.port}" for b in broker.bound)
    print(f"odradek ready listeners={listeners} data={','.join(broker.logs.dirs)}", flush=True)
    signalled = asyncio.ensure_future(stop.wait())
    halted = asyncio.ensure_future(broker.stopped.wait())
    await asyncio.wait({signalled, halted}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    halted.cancel()
    if broker.stopped.is_set() and not stop.is_set():
        # the broker stopped itself (every log dir failed, in a cluster): the process ends as
        # Kafka's does (Exit.halt(1)), so that a supervisor sees it and restarts it
        failed = ", ".join(broker.logs.offline_dirs) or "?"
        what = f"broker {broker.node_id} halted: failed log dirs: {failed}"
        print(f"odradek: {what}", file=sys.stderr)
        return 1
    log.info("shutting down")
    await broker.stop()
    return 0


def _skip_kafka_client_import() -> None:
    """Import kafka-python's protocol package without its client (`kafka/__init__` loads the
    whole client, ~100 ms): a broker process needs only `kafka.protocol`. Only for `serve`,
    where nothing else in the process uses the client."""
    # crc32c's package __init__ likewise only adds an importlib.metadata version lookup
    for package in ("kafka", "crc32c"):
        if package in sys.modules:
            continue
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        stub = types.ModuleType(package)
        stub.__path__ = list(spec.submodule_search_locations)
        stub.__file__ = spec.origin
        sys.modules[package] = stub


def cmd_serve(args: argparse.Namespace) -> int:
    _skip_kafka_client_import()
    import asyncio

    from odradek.broker.config import BrokerConfig
    from odradek.log.config import ConfigError
    from odradek.log.manager import DataDirError

    try:
        overrides = _parse_overrides(args.override or [])
        if args.metrics:
            overrides["metrics.listen"] = args.metrics
        config = BrokerConfig.load(
            args.config, overrides, dict(os.environ), strict=args.strict_config
        )
    except ConfigError as exc:
        print(f"odradek: bad configuration: {exc}", file=sys.stderr)
        return 1
    _check_ports(config)
    from odradek.log import power_loss

    if power_loss.install_from_env():  # tests only: fsyncs journaled for a simulated power loss
        print(f"odradek: test hook {power_loss.ENV} is set", file=sys.stderr)
    try:
        return asyncio.run(_serve(config))
    except (DataDirError, ConfigError, ValueError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or (`command` given and one of cli_commands.ALONE) of that
    command alone."""
    parser = argparse.ArgumentParser(prog="odradek", description="A Kafka-compatible broker.")
    parser.add_argument("--log-level", default=os.environ.get("ODRADEK_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command")
    if command is not None and register_alone(sub, command):
        return parser
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("config", nargs="?", help="server.properties file")
    serve.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="set a config key (repeatable)"
    )
    serve.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics here (same as metrics.listen)",
    )
    serve.add_argument(
        "--strict-config",
        action="store_true",
        help="refuse to start on a key that is not Kafka's (a typo) instead of warning and going "
        "on as Kafka does (same as odradek.strict.config=true)",
    )
    serve.set_defaults(func=cmd_serve)
    register_all(sub)  # topics, groups, produce, consume, cluster, dev, fault
    _add_local_cluster(sub)
    return parser


def _cluster_port(port: int | None, brokers: int, host: str) -> int | None:
    """The first port of `odradek cluster --brokers N` (0: free ports); None after saying, in
    one line, that an asked-for port is taken. Unasked, 9092.. or free ports when they are not
    all free (a Kafka on the host), also said in one line."""
    from odradek.cli_commands.dev import DEFAULT_PORT, ports_free

    wanted = list(range(port or DEFAULT_PORT, (port or DEFAULT_PORT) + max(brokers, 1)))
    span = f"{wanted[0]}-{wanted[-1]}" if len(wanted) > 1 else f"{wanted[0]}"
    if port == 0 or ports_free(host, wanted):
        return wanted[0] if port != 0 else 0
    if port is not None:
        print(f"odradek: cannot listen on {host}:{span}: a port is taken", file=sys.stderr)
        return None
    taken = f"ports {span} are not all free" if len(wanted) > 1 else f"port {span} is taken"
    print(
        f"odradek: {taken} (another Kafka?): the brokers listen on free ports instead "
        "(listed below)",
        file=sys.stderr,
        flush=True,
    )
    return 0


def _add_local_cluster(sub: argparse._SubParsersAction) -> None:
    """`odradek cluster --brokers N [--base-dir D] [--port P] [--override k=v]`: N brokers in
    this process sharing one metadata store (broker/cluster/local_cluster.py). Without --brokers,
    `odradek cluster` describes a running cluster (cli_commands/cluster.py)."""
    parser = sub.choices.get("cluster") or sub.add_parser("cluster", help="run a cluster")
    describe = parser.get_default("func")
    parser.add_argument(
        "--brokers",
        type=int,
        metavar="N",
        help="start N brokers in this process and run until stopped",
    )
    parser.add_argument(
        "--base-dir",
        default="./odradek-cluster",
        help="data dirs of the started brokers go under here",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="first broker's port, the others follow (default 9092, or free ports when "
        "9092.. is taken; 0: free ports)",
    )
    parser.add_argument("--listen-host", default="127.0.0.1", help="host the brokers bind")
    parser.add_argument(
        "--override",
        action="append",
        metavar="KEY=VALUE",
        help="set a broker config key on every broker (repeatable)",
    )

    def run(args: argparse.Namespace) -> int:
        if not args.brokers:
            return describe(args) if describe else 2
        from odradek.broker.cluster import local_cluster
        from odradek.log.config import ConfigError

        _skip_kafka_client_import()
        try:
            overrides = _parse_overrides(args.override or [])
        except ConfigError as exc:
            print(f"odradek: bad configuration: {exc}", file=sys.stderr)
            return 1
        port = _cluster_port(args.port, args.brokers, args.listen_host)
        if port is None:
            return 1
        if getattr(args, "security", None):  # TLS / SASL (odradek.testing.cluster)
            from odradek.cli_commands.dev import security_users
            from odradek.cli_commands.output import CliError
            from odradek.testing.cluster import secure_cluster_main

            try:
                users = security_users(args.user)
            except CliError as exc:
                print(f"odradek: {exc}", file=sys.stderr)
                return exc.status
            host, mech = args.listen_host, args.mechanism
            return secure_cluster_main(
                args.brokers, args.base_dir, overrides, host, port, args.security, mech, users
            )
        return local_cluster.main(args.brokers, args.base_dir, overrides, args.listen_host, port)

    parser.set_defaults(func=run)


def _command_word(argv: list[str]) -> str | None:
    """The command (`produce`) in argv, after the global options; None when there is none."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("-h", "--help"):
            return None
        i += 2 if argv[i] == "--log-level" else 1
    return argv[i] if i < len(argv) else None


def main(argv: list[str] | None = None) -> int:
    from odradek.cli_commands.kafka_flags import ScriptFormError, kafka_script_form

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_word(argv))
    try:
        argv = kafka_script_form(argv)
    except ScriptFormError as exc:
        parser.error(str(exc))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    command: Callable[[argparse.Namespace], int] = args.func
    return command(args)
