"""`odradek quotas --describe|--alter`: client quotas, as kafka-configs.sh with
`--entity-type users|clients` does them.

Entities are named as kafka-configs.sh names them: `--entity-type users --entity-name alice`,
`--entity-type clients --entity-default`, both types for a (user, client-id) entity, or the
short forms `--user alice`, `--client app`, `--user-defaults`, `--client-defaults`. Each
`--entity-type` takes the `--entity-name` / `--entity-default` that follows it.

`--alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152` sets keys and
`--delete-config request_percentage` removes them (AlterClientQuotas, key 49); `--describe`
prints `Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0`
for every matching entity (DescribeClientQuotas, key 48, strict: only entities of exactly the
named types; a type without a name matches every named entity of that type, and `--describe`
alone lists every quota entity).
"""

from __future__ import annotations

import argparse
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

ENTITY_TYPES = {"users": "user", "user": "user", "clients": "client-id", "client": "client-id"}
QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
# how kafka-configs.sh names an entity type when it prints one
PRINTED = {"user": "user-principal", "client-id": "client-id"}


class _Entity(argparse.Action):
    """Keep --entity-type / --entity-name / --entity-default (and the short forms) in the order
    given, so each type pairs with the name after it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        items = list(getattr(namespace, "entity_items", None) or [])
        kind = self.const
        if kind == "type":
            if values not in ENTITY_TYPES:
                parser.error(f"--entity-type must be users or clients, got {values!r}")
            items.append(("type", ENTITY_TYPES[values]))
        elif kind == "name":
            items.append(("name", values))
        elif kind == "default":
            items.append(("default", None))
        else:  # the short forms: (type, name) or (type, default)
            etype, default = kind
            items.append(("type", etype))
            items.append(("default", None) if default else ("name", values))
        namespace.entity_items = items


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quotas",
        help="describe and alter client quotas of users and client-ids (kafka-configs "
        "--entity-type users/clients)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_client_options(p)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true", help="list quotas")
    mode.add_argument("--alter", action="store_true", help="set or delete quotas")
    p.set_defaults(entity_items=[])
    p.add_argument(
        "--entity-type", action=_Entity, const="type", metavar="users|clients", help="entity type"
    )
    p.add_argument("--entity-name", action=_Entity, const="name", metavar="NAME")
    p.add_argument(
        "--entity-default", action=_Entity, const="default", nargs=0, help="the <default> entity"
    )
    p.add_argument("--user", action=_Entity, const=("user", False), metavar="NAME")
    p.add_argument("--client", action=_Entity, const=("client-id", False), metavar="NAME")
    p.add_argument("--user-defaults", action=_Entity, const=("user", True), nargs=0)
    p.add_argument("--client-defaults", action=_Entity, const=("client-id", True), nargs=0)
    p.add_argument(
        "--add-config",
        action="append",
        metavar="K=V[,K=V]",
        help=f"quotas to set, keys: {', '.join(QUOTA_KEYS)}",
    )
    p.add_argument("--delete-config", action="append", metavar="K[,K]", help="quota keys to remove")
    p.set_defaults(func=run_command(cmd_quotas))


def entities(items: list[tuple[str, str | None]]) -> list[tuple[str, int, str | None]]:
    """(entity type, match type, name) from the ordered entity options."""
    out: list[tuple[str, int, str | None]] = []
    pending: str | None = None
    for kind, value in items:
        if kind == "type":
            if pending is not None:
                out.append((pending, MATCH_ANY, None))
            pending = value
            continue
        if pending is None:
            option = "--entity-name" if kind == "name" else "--entity-default"
            raise CliError(f"{option} needs an --entity-type (users or clients) before it")
        out.append(
            (pending, MATCH_EXACT, value) if kind == "name" else (pending, MATCH_DEFAULT, None)
        )
        pending = None
    if pending is not None:
        out.append((pending, MATCH_ANY, None))
    types = [t for t, _, _ in out]
    if len(set(types)) != len(types):
        raise CliError("give each entity type once (users and/or clients)")
    return out


def parse_add(items: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items or []:
        for pair in item.split(","):
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep or not key:
                raise CliError(f"--add-config needs key=value, got {pair!r}")
            if key not in QUOTA_KEYS:
                raise CliError(f"Invalid config(s): {key} (quota keys: {', '.join(QUOTA_KEYS)})")
            try:
                out[key] = float(value)
            except ValueError:
                raise CliError(f"{key} must be a number, got {value!r}") from None
    return out


def parse_delete(items: list[str] | None) -> list[str]:
    keys = [k.strip() for item in items or [] for k in item.split(",") if k.strip()]
    for key in keys:
        if key not in QUOTA_KEYS:
            raise CliError(f"Invalid config(s): {key} (quota keys: {', '.join(QUOTA_KEYS)})")
    return keys


def _send(admin: Any, request: Any) -> Any:
    async def go() -> Any:
        return await admin._manager.send(request)

    return admin._manager.run(go)


def describe(args: argparse.Namespace, admin: Any) -> list[dict[str, Any]]:
    from kafka.protocol.admin import DescribeClientQuotasRequest as Req

    parsed = entities(args.entity_items)
    components = [Req.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in parsed]
    resp = _send(admin, Req(components=components, strict=bool(parsed)))
    if resp.error_code:
        raise CliError(resp.error_message or error_name(resp.error_code))
    out = []
    for entry in resp.entries or []:
        out.append(
            {
                "entity": {e.entity_type: e.entity_name for e in entry.entity},
                "quotas": {v.key: v.value for v in entry.values},
            }
        )
    return out


def describe_line(entity: dict[str, str | None], quotas: dict[str, float]) -> str:
    """kafka-configs.sh's line for one quota entity (ConfigCommand.describeQuotaConfigs: the
    user part first, then the client-id)."""
    parts = []
    for etype in ("user", "client-id"):
        if etype not in entity:
            continue
        name = entity[etype]
        printed = PRINTED[etype]
        parts.append(f"the default {printed}" if name is None else f"{printed} '{name}'")
    values = ", ".join(f"{k}={v}" for k, v in sorted(quotas.items()))
    return f"Quota configs for {', '.join(parts)} are {values}"


def alter(args: argparse.Namespace, admin: Any) -> str:
    from kafka.protocol.admin import AlterClientQuotasRequest as Req

    parsed = entities(args.entity_items)
    if not parsed:
        raise CliError("--alter needs an entity: --entity-type users|clients with a name")
    if any(m == MATCH_ANY for _, m, _ in parsed):
        raise CliError("--alter needs --entity-name or --entity-default for each --entity-type")
    adds = parse_add(args.add_config)
    deletes = parse_delete(args.delete_config)
    check_add_delete(adds, deletes)
    ops = [Req.EntryData.OpData(key=k, value=v, remove=False) for k, v in adds.items()]
    ops += [Req.EntryData.OpData(key=k, value=0.0, remove=True) for k in deletes]
    entity = [Req.EntryData.EntityData(entity_type=t, entity_name=n) for t, _, n in parsed]
    resp = _send(admin, Req(entries=[Req.EntryData(entity=entity, ops=ops)], validate_only=False))
    for entry in resp.entries:
        if entry.error_code:
            raise CliError(entry.error_message or error_name(entry.error_code))
    etype, _, name = parsed[0]  # kafka-configs.sh names the first entity type given
    plural = "users" if etype == "user" else "clients"
    if name is None:
        return f"Completed updating default config for {plural} in the cluster."
    return f"Completed updating config for {plural[:-1]} {name}."


def cmd_quotas(args: argparse.Namespace) -> int:
    with Closing(admin_client(args)) as admin:
        if args.alter:
            message = alter(args, admin)
            if want_json(args):
                print_json({"result": "ok"})
            else:
                print(message)
            return 0
        found = describe(args, admin)
    if want_json(args):
        print_json(found)
    else:
        for item in found:
            print(describe_line(item["entity"], item["quotas"]))
    return 0
