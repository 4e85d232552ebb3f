"""`odradek users`: SCRAM credentials (SASL/SCRAM-SHA-256 and -512 users), as kafka-configs.sh
with `--entity-type users` manages them, plus short forms.

kafka-configs.sh's spelling:

    odradek users --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    odradek users --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    odradek users --describe [--entity-type users] [--entity-name alice]

Short forms:

    odradek users add alice --password alice-secret [--mechanism SCRAM-SHA-512] [--iterations 8192]
    odradek users delete alice [--mechanism SCRAM-SHA-512]     (every mechanism by default)
    odradek users list

The password never leaves this process: as Kafka's Admin client does, the command picks a random
salt, computes the SaltedPassword (PBKDF2 with the mechanism's HMAC, `iterations` rounds, 4096
by default) and sends salt and SaltedPassword in AlterUserScramCredentials (key 51); the broker
stores salt, StoredKey, ServerKey and iterations. Describing (DescribeUserScramCredentials, key
50) shows mechanisms and iterations only. `add` without --password reads it from the terminal
(or one line of standard input). Each mechanism's change is its own request: Kafka's controller
refuses two changes of one user in one request (DUPLICATE_RESOURCE), which makes
kafka-configs.sh's two-mechanism `--add-config` fail against Kafka 3.9 in KRaft mode; here it
works.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    check_add_delete,
    error_name,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json
from odradek.security.scram import MAX_ITERATIONS, ScramMechanism, random_salt

DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default
MECHANISMS = [m.mechanism_name for m in ScramMechanism]
RESOURCE_NOT_FOUND = 91


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "users",
        help="SCRAM users: add, delete, list (kafka-configs --entity-type users with "
        "SCRAM-SHA-256/512)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_client_options(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--describe", action="store_true", help="list users' SCRAM credentials")
    mode.add_argument("--alter", action="store_true", help="add or delete SCRAM credentials")
    p.add_argument(
        "--entity-type",
        choices=["users", "user"],
        help="users (the only type this command manages; quotas: odradek quotas)",
    )
    p.add_argument("--entity-name", metavar="USER", help="the user")
    p.add_argument(
        "--add-config",
        action="append",
        metavar="'MECH=[iterations=N,password=P],...'",
        help=f"credentials to set, MECH one of {', '.join(MECHANISMS)}",
    )
    p.add_argument(
        "--delete-config", action="append", metavar="MECH[,MECH]", help="credentials to remove"
    )
    p.set_defaults(func=run_command(cmd_users), users_action=None)
    actions = p.add_subparsers(dest="users_action", metavar="{add,delete,list}")

    a = actions.add_parser("add", help="add a user or change its password")
    add_client_options(a)
    a.add_argument("user")
    a.add_argument("--password", help="the password (default: asked for, or read from stdin)")
    a.add_argument(
        "--mechanism",
        action="append",
        choices=MECHANISMS,
        help="SCRAM-SHA-256 (default) or SCRAM-SHA-512; repeat for both",
    )
    a.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, metavar="N")
    a.set_defaults(func=run_command(cmd_users))

    d = actions.add_parser("delete", help="delete a user's SCRAM credentials")
    add_client_options(d)
    d.add_argument("user")
    d.add_argument(
        "--mechanism",
        action="append",
        choices=MECHANISMS,
        help="only this mechanism's credential (default: every one the user has)",
    )
    d.set_defaults(func=run_command(cmd_users))

    lst = actions.add_parser("list", help="users with SCRAM credentials")
    add_client_options(lst)
    lst.set_defaults(func=run_command(cmd_users))


# -- parsing kafka-configs.sh's --add-config ---------------------------------------------------


def split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets, as kafka-configs.sh does ('a=[x=1,y=2],b=[z]')."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def parse_add_config(items: list[str] | None) -> dict[str, tuple[int, str]]:
    """mechanism -> (iterations, password) from --add-config values."""
    out: dict[str, tuple[int, str]] = {}
    for item in items or []:
        for entry in split_top_level(item):
            key, sep, value = entry.partition("=")
            key = key.strip()
            if not sep:
                raise CliError(f"--add-config needs MECHANISM=[password=...], got {entry!r}")
            if key not in MECHANISMS:
                raise CliError(
                    f"Invalid config(s): {key} (odradek users takes {', '.join(MECHANISMS)}; "
                    "client quotas: odradek quotas)"
                )
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            fields: dict[str, str] = {}
            for field in value.split(","):
                name, eq, val = field.partition("=")
                if not eq or not name.strip():
                    raise CliError(f"{key}: expected iterations=N,password=P, got {value!r}")
                fields[name.strip()] = val
            unknown = sorted(set(fields) - {"iterations", "password"})
            if unknown:
                raise CliError(f"{key}: unknown field(s) {', '.join(unknown)}")
            if "password" not in fields:
                raise CliError(f"{key}: a password is required ({key}=[password=...])")
            try:
                iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
            except ValueError:
                raise CliError(f"{key}: iterations must be a number") from None
            out[key] = (iterations, fields["password"])
    return out


def parse_delete_config(items: list[str] | None) -> list[str]:
    keys = [k.strip() for item in items or [] for k in item.split(",") if k.strip()]
    for key in keys:
        if key not in MECHANISMS:
            raise CliError(
                f"Invalid config(s): {key} (odradek users takes {', '.join(MECHANISMS)}; "
                "client quotas: odradek quotas)"
            )
    return keys


# -- requests ----------------------------------------------------------------------------------


def _send(admin: Any, request: Any) -> Any:
    async def go() -> Any:
        return await admin._manager.send(request)

    return admin._manager.run(go)


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.from_name(name)
    assert mechanism is not None
    return mechanism


def check_iterations(name: str, iterations: int) -> None:
    """Refuse here what the broker would refuse, with its words."""
    mechanism = _mechanism(name)
    if iterations < mechanism.min_iterations:
        raise CliError(
            f"UNACCEPTABLE_CREDENTIAL: Too few iterations ({name} needs at least "
            f"{mechanism.min_iterations})"
        )
    if iterations > MAX_ITERATIONS:
        raise CliError(f"UNACCEPTABLE_CREDENTIAL: Too many iterations (at most {MAX_ITERATIONS})")


def alter(
    admin: Any,
    user: str,
    upserts: dict[str, tuple[int, str]],
    deletes: list[str],
) -> None:
    """Set and delete one user's credentials; raises CliError with the broker's answer.

    One AlterUserScramCredentials per mechanism: Kafka's controller (ScramControlManager)
    refuses two changes of one user in one request with DUPLICATE_RESOURCE, even for two
    mechanisms, so kafka-configs.sh's `--add-config 'SCRAM-SHA-256=[..],SCRAM-SHA-512=[..]'` is
    sent as two requests."""
    from kafka.protocol.admin import AlterUserScramCredentialsRequest as Req

    for name, (iterations, _password) in upserts.items():
        check_iterations(name, iterations)
    requests = []
    for name in deletes:
        deletion = Req.ScramCredentialDeletion(name=user, mechanism=_mechanism(name).wire_type)
        requests.append(Req(deletions=[deletion], upsertions=[]))
    for name, (iterations, password) in upserts.items():
        mechanism = _mechanism(name)
        salt = random_salt()
        upsertion = Req.ScramCredentialUpsertion(
            name=user,
            mechanism=mechanism.wire_type,
            iterations=iterations,
            salt=salt,
            salted_password=mechanism.salted_password(password, salt, iterations),
        )
        requests.append(Req(deletions=[], upsertions=[upsertion]))
    for request in requests:
        resp = _send(admin, request)
        for result in resp.results:
            if result.error_code:
                name = error_name(result.error_code)
                raise CliError(f"{name}: {result.error_message}" if result.error_message else name)


def describe(admin: Any, users: list[str] | None) -> list[dict[str, Any]]:
    """[{"user": ..., "credentials": [{"mechanism": ..., "iterations": ...}]}]; users named but
    without credentials are left out (kafka-configs.sh prints nothing for them)."""
    from kafka.protocol.admin import DescribeUserScramCredentialsRequest as Req

    request = Req(users=None if users is None else [Req.UserName(name=u) for u in users])
    resp = _send(admin, request)
    if resp.error_code:
        name = error_name(resp.error_code)
        raise CliError(f"{name}: {resp.error_message}" if resp.error_message else name)
    out = []
    for result in resp.results:
        if result.error_code == RESOURCE_NOT_FOUND:
            continue
        if result.error_code:
            name = error_name(result.error_code)
            raise CliError(f"{name}: {result.error_message}" if result.error_message else name)
        credentials = []
        for info in result.credential_infos:
            mechanism = ScramMechanism.from_type(info.mechanism)
            credentials.append(
                {
                    "mechanism": mechanism.mechanism_name if mechanism else str(info.mechanism),
                    "iterations": info.iterations,
                }
            )
        out.append({"user": result.user, "credentials": credentials})
    return sorted(out, key=lambda item: item["user"])


def describe_line(item: dict[str, Any]) -> str:
    """kafka-configs.sh's line for one user."""
    infos = ", ".join(f"{c['mechanism']}=iterations={c['iterations']}" for c in item["credentials"])
    return f"SCRAM credential configs for user-principal '{item['user']}' are {infos}"


# -- the command -------------------------------------------------------------------------------


def read_password(user: str) -> str:
    if sys.stdin.isatty():
        password = getpass.getpass(f"Password for {user}: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError("no password given (--password, or type it when asked)")
    return password


def _done(args: argparse.Namespace, message: str, **data: Any) -> int:
    if want_json(args):
        print_json({"result": "ok", **data})
    else:
        print(message)
    return 0


def cmd_users(args: argparse.Namespace) -> int:
    action = args.users_action
    if action is None and not (args.describe or args.alter):
        raise CliError("give --describe, --alter, or one of: add, delete, list")
    if action == "add":
        password = args.password if args.password is not None else read_password(args.user)
        mechanisms = args.mechanism or ["SCRAM-SHA-256"]
        for name in mechanisms:
            check_iterations(name, args.iterations)
        with Closing(admin_client(args)) as admin:
            alter(admin, args.user, {m: (args.iterations, password) for m in mechanisms}, [])
        return _done(
            args,
            f"User {args.user}: {', '.join(mechanisms)} credentials set.",
            user=args.user,
            mechanisms=mechanisms,
        )
    if action == "delete":
        with Closing(admin_client(args)) as admin:
            mechanisms = args.mechanism
            if not mechanisms:
                found = describe(admin, [args.user])
                if not found:
                    raise CliError(f"RESOURCE_NOT_FOUND: user {args.user} has no SCRAM credentials")
                mechanisms = [c["mechanism"] for c in found[0]["credentials"]]
            alter(admin, args.user, {}, mechanisms)
        return _done(
            args,
            f"User {args.user}: {', '.join(mechanisms)} credentials deleted.",
            user=args.user,
            mechanisms=mechanisms,
        )
    if action == "list":
        with Closing(admin_client(args)) as admin:
            found = describe(admin, None)
        if want_json(args):
            print_json(found)
        else:
            for item in found:
                mechanisms = ", ".join(c["mechanism"] for c in item["credentials"])
                print(f"{item['user']}\t{mechanisms}")
        return 0
    if args.alter:
        if not args.entity_name:
            raise CliError("--alter needs --entity-type users --entity-name USER")
        upserts = parse_add_config(args.add_config)
        deletes = parse_delete_config(args.delete_config)
        check_add_delete(upserts, deletes)
        with Closing(admin_client(args)) as admin:
            alter(admin, args.entity_name, upserts, deletes)
        return _done(args, f"Completed updating config for user {args.entity_name}.")
    if args.add_config or args.delete_config:
        raise CliError("--add-config and --delete-config go with --alter")
    with Closing(admin_client(args)) as admin:
        found = describe(admin, [args.entity_name] if args.entity_name else None)
    if want_json(args):
        print_json(found)
    else:
        for item in found:
            print(describe_line(item))
    return 0
