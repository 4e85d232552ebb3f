"""`odradek fault`: arm faults on a running odradek broker through its admin HTTP endpoint
(`odradek.admin.listen`, odradek/broker/ops/admin_http.py). Kafka has no equivalent.

    odradek fault --admin 127.0.0.1:9644 fail produce NOT_LEADER_OR_FOLLOWER --count 3
    odradek fault delay fetch 500 --count 2
    odradek fault pause | resume | clear | drop-connections | status
    odradek fault disk EIO --ops write,fsync      # log dir I/O fails (clear: `disk clear`)
    odradek fault clock -3600000                  # the broker's wall clock 1 h back (0: back)

`--admin` defaults to the ODRADEK_ADMIN environment variable.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from odradek.cli_commands.common import run_command, want_json
from odradek.cli_commands.output import CliError, print_json, print_table

ADMIN_ENV = "ODRADEK_ADMIN"
TIMEOUT_S = 10.0


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--admin",
        default=argparse.SUPPRESS,
        metavar="HOST:PORT",
        help=f"the broker's admin endpoint (env {ADMIN_ENV})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the endpoint's JSON answer",
    )


def register(sub: argparse._SubParsersAction) -> None:
    fault = sub.add_parser("fault", help="inject faults through a broker's admin endpoint")
    _add_options(fault)
    cmds = fault.add_subparsers(dest="fault_command", metavar="COMMAND")
    cmds.required = True

    p = cmds.add_parser("fail", help="answer the next COUNT requests of API with ERROR")
    _add_options(p)
    p.add_argument("api", help="API name or key (produce, fetch, ListOffsets, 3, ...)")
    p.add_argument("error", help="Kafka error name or code (NOT_LEADER_OR_FOLLOWER, 6, ...)")
    p.add_argument("--count", type=int, default=1, help="how many requests (default 1)")
    p.set_defaults(func=run_command(cmd_fail))

    p = cmds.add_parser("delay", help="hold the next COUNT requests of API for MS milliseconds")
    _add_options(p)
    p.add_argument("api")
    p.add_argument("ms", type=int)
    p.add_argument("--count", type=int, default=1, help="how many requests (default 1)")
    p.set_defaults(func=run_command(cmd_delay))

    for name, path, text in (
        ("pause", "/faults/pause", "hold every request until resume"),
        ("resume", "/faults/resume", "answer requests again"),
        ("clear", "/faults/clear", "disarm every fault and resume"),
        ("drop-connections", "/connections/drop", "close every client connection"),
    ):
        p = cmds.add_parser(name, help=text)
        _add_options(p)
        p.set_defaults(func=run_command(_simple(path)), endpoint=path)

    p = cmds.add_parser("disk", help="make the broker's log dir writes/fsyncs fail")
    _add_options(p)
    p.add_argument("error", help="errno name (EIO, ENOSPC, ...) or 'clear'")
    p.add_argument("--ops", default="write,fsync", help="write, fsync or both (default)")
    p.add_argument("--dir", help="one log dir (default: every one)")
    p.set_defaults(func=run_command(cmd_disk))

    p = cmds.add_parser("clock", help="show or shift the broker's wall clock")
    _add_options(p)
    p.add_argument("offset_ms", type=int, nargs="?", help="ms from the system clock (0: back)")
    p.set_defaults(func=run_command(cmd_clock))

    p = cmds.add_parser("status", help="the broker's health and armed faults")
    _add_options(p)
    p.set_defaults(func=run_command(cmd_status))


def admin_url(args: argparse.Namespace) -> str:
    address = getattr(args, "admin", None) or os.environ.get(ADMIN_ENV)
    if not address:
        raise CliError(f"no admin endpoint: give --admin HOST:PORT or set {ADMIN_ENV}")
    if "://" not in address:
        address = "http://" + address
    return address.rstrip("/")


def call(
    args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One request to the endpoint; its JSON answer, or a CliError with its error message."""
    import urllib.error
    import urllib.request

    url = admin_url(args) + path
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error") or exc.reason
        except ValueError:
            message = exc.reason
        raise CliError(f"admin endpoint refused {path}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(f"cannot reach the admin endpoint at {admin_url(args)}: {reason}") from None
    except ValueError:
        raise CliError(f"the admin endpoint at {admin_url(args)} did not answer JSON") from None


def _report(args: argparse.Namespace, answer: dict[str, Any], message: str) -> None:
    if want_json(args):
        print_json(answer)
    else:
        print(message)


def _describe(rule: dict[str, Any]) -> str:
    what = f"fail with {rule['error']}" if rule.get("error") else f"delay {rule['delay_ms']} ms"
    return f"{what} on the next {rule['remaining']} {rule['api']} request(s)"


def cmd_fail(args: argparse.Namespace) -> None:
    answer = call(
        args, "POST", "/faults/fail", {"api": args.api, "error": args.error, "count": args.count}
    )
    _report(args, answer, "Armed: " + _describe(answer["armed"]) + ".")


def cmd_delay(args: argparse.Namespace) -> None:
    answer = call(
        args, "POST", "/faults/delay", {"api": args.api, "ms": args.ms, "count": args.count}
    )
    _report(args, answer, "Armed: " + _describe(answer["armed"]) + ".")


def _simple(path: str) -> Callable[[argparse.Namespace], None]:
    def command(args: argparse.Namespace) -> None:
        answer = call(args, "POST", path)
        messages = {
            "/faults/pause": "Broker paused: requests are held until resume.",
            "/faults/resume": "Broker resumed.",
            "/faults/clear": "All faults cleared.",
            "/connections/drop": f"Dropped {answer.get('dropped')} connections.",
        }
        _report(args, answer, messages[path])

    command.__name__ = "cmd_" + path.rsplit("/", 1)[-1]
    return command


def cmd_disk(args: argparse.Namespace) -> None:
    error = None if args.error.lower() == "clear" else args.error
    body: dict[str, Any] = {"error": error, "ops": args.ops.split(",")}
    if args.dir:
        body["dir"] = args.dir
    answer = call(args, "POST", "/faults/disk", body)
    done = "Disk fault cleared" if error is None else f"Log dir {args.ops} now fail with {error}"
    offline = ", ".join(answer.get("offline_dirs") or []) or "none"
    _report(args, answer, f"{done}; offline log dirs: {offline}.")


def cmd_clock(args: argparse.Namespace) -> None:
    if args.offset_ms is None:
        answer = call(args, "GET", "/clock")
    else:
        answer = call(args, "POST", "/clock", {"offset_ms": args.offset_ms})
    _report(args, answer, f"Broker clock: {answer['now_ms']} ({answer['offset_ms']:+d} ms).")


def cmd_status(args: argparse.Namespace) -> None:
    answer = call(args, "GET", "/health")
    if want_json(args):
        print_json(answer)
        return
    print(
        f"Broker {answer.get('node_id')} at {answer.get('bootstrap')}: {answer.get('status')}, "
        f"{'paused' if answer.get('paused') else 'running'}, "
        f"{answer.get('connections')} connections, {answer.get('injected')} faults injected"
    )
    rules = answer.get("rules") or []
    if rules:
        print_table(
            ["API", "FAULT", "REMAINING"],
            [[r["api"], r["error"] or f"delay {r['delay_ms']} ms", r["remaining"]] for r in rules],
        )
