"""`odradek acls --add|--remove|--list`: ACLs, as kafka-acls.sh manages them.

Resources: `--topic NAME`, `--group NAME`, `--transactional-id NAME`, `--cluster` (each may be
repeated; `*` names every resource of the type), with `--resource-pattern-type`
literal (default) or prefixed for `--add`, and also any or match for `--list` / `--remove`.
Entries: `--allow-principal User:alice` / `--deny-principal User:bob` (repeatable),
`--allow-host` / `--deny-host` (default `*`), `--operation` (repeatable: Read, Write, Create,
Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All;
default All). `--producer` and `--consumer` (with `--topic`, `--group`, `--transactional-id`,
`--idempotent`) add the ACLs those clients need, as kafka-acls.sh does.

`--add` prints what it adds and then the resource's ACLs; `--list` prints every matching ACL
grouped by resource (all of them without a resource); `--remove` deletes the matching ACLs
(every ACL of the resource when no principal is given). The connection's security settings come
from `--command-config FILE` (Kafka's client properties: security.protocol, sasl.mechanism,
sasl.jaas.config with username/password, ssl.truststore.location of a PEM file).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from odradek.cli_commands.common import (
    BOOTSTRAP_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    Closing,
    add_client_options,
    bootstrap,
    check_reachable,
    command_config,
    connect_timeout_ms,
    error_name,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json
from odradek.security.acl_types import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
)
from odradek.security.acl_wire import binding_fields, binding_from_wire, filter_fields

OPERATIONS = [
    op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
]  # what --operation accepts


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "acls",
        help="add, remove and list ACLs (kafka-acls.sh)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_client_options(p)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--add", action="store_true", help="add ACLs")
    mode.add_argument("--remove", action="store_true", help="remove ACLs")
    mode.add_argument("--list", action="store_true", help="list ACLs")
    p.add_argument("--topic", action="append", default=[], metavar="NAME")
    p.add_argument("--group", action="append", default=[], metavar="NAME")
    p.add_argument("--transactional-id", action="append", default=[], metavar="NAME")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument(
        "--resource-pattern-type",
        default="literal",
        choices=["literal", "prefixed", "any", "match"],
        type=str.lower,
        help="literal (default) or prefixed; --list and --remove also take any and match",
    )
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                   help="--list: only ACLs of this principal")  # fmt: skip
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                   "DescribeConfigs, AlterConfigs, IdempotentWrite or All (default)")  # fmt: skip
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite")
    p.add_argument("--force", action="store_true", help="accepted: --remove never asks")
    p.set_defaults(func=run_command(cmd_acls))


# -- parsing ------------------------------------------------------------------------------------


def _pattern_type(args: argparse.Namespace) -> PatternType:
    return PatternType.parse(args.resource_pattern_type)


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, n) for n in args.topic]
    out += [(ResourceType.GROUP, n) for n in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def operations(args: argparse.Namespace) -> list[AclOperation]:
    ops: list[AclOperation] = []
    for text in args.operation or ["All"]:
        op = AclOperation.parse(text.replace("-", "_"))
        if op not in OPERATIONS:
            names = ", ".join(o.pascal for o in OPERATIONS)
            raise CliError(f"Invalid operation {text}: use one of {names}")
        ops.append(op)
    return ops


def _principals(items: Iterable[str]) -> list[str]:
    for p in items:
        try:
            parse_principal(p)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    return list(items)


def entries(args: argparse.Namespace, ops: list[AclOperation]) -> list[AccessControlEntry]:
    out = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in _principals(principals):
            for host in hosts or ["*"]:
                for op in ops:
                    out.append(AccessControlEntry(principal, host, op, permission))
    return out


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    pattern_type = _pattern_type(args)
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CliError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid "
            "when adding acls."
        )
    if not args.allow_principal and not args.deny_principal:
        raise CliError("--add needs --allow-principal or --deny-principal")
    out: list[AclBinding] = []
    if args.producer or args.consumer:
        if not args.topic:
            raise CliError("--producer / --consumer need --topic")
        if args.consumer and not args.group:
            raise CliError("--consumer needs --group")
        wanted: list[tuple[ResourceType, str, list[AclOperation]]] = []
        Op = AclOperation
        if args.producer:
            wanted += [
                (ResourceType.TOPIC, t, [Op.WRITE, Op.DESCRIBE, Op.CREATE]) for t in args.topic
            ]
            wanted += [
                (ResourceType.TRANSACTIONAL_ID, t, [Op.WRITE, Op.DESCRIBE])
                for t in args.transactional_id
            ]
            if args.idempotent:
                wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, [Op.IDEMPOTENT_WRITE]))
        if args.consumer:
            wanted += [(ResourceType.TOPIC, t, [Op.READ, Op.DESCRIBE]) for t in args.topic]
            wanted += [(ResourceType.GROUP, g, [Op.READ]) for g in args.group]
        for rtype, name, ops in wanted:
            pt = PatternType.LITERAL if rtype is ResourceType.CLUSTER else pattern_type
            for entry in entries(args, ops):
                out.append(AclBinding(ResourcePattern(rtype, name, pt), entry))
        return list(dict.fromkeys(out))
    found = resources(args)
    if not found:
        raise CliError("give a resource: --topic, --group, --transactional-id or --cluster")
    ops = operations(args)
    for rtype, name in found:
        for entry in entries(args, ops):
            out.append(AclBinding(ResourcePattern(rtype, name, pattern_type), entry))
    return out


def filters(args: argparse.Namespace, remove: bool) -> list[AclBindingFilter]:
    """The filters of --list / --remove: per resource (every ACL without one, for --list), per
    principal and operation when given."""
    pattern_type = _pattern_type(args)
    patterns = [ResourcePatternFilter(t, n, pattern_type) for t, n in resources(args)]
    if not patterns:
        if remove:
            raise CliError("--remove needs a resource: --topic, --group, --transactional-id "
                           "or --cluster")  # fmt: skip
        patterns = [ResourcePatternFilter()]
    entry_filters: list[AccessControlEntryFilter] = []
    ops: list[AclOperation] = operations(args) if args.operation else [AclOperation.ANY]
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in _principals(principals):
            for host in hosts or [None]:
                for op in ops:
                    entry_filters.append(AccessControlEntryFilter(principal, host, op, permission))
    for principal in _principals(args.principal):
        for op in ops:
            entry_filters.append(AccessControlEntryFilter(principal, None, op))
    if not entry_filters:
        entry_filters = [AccessControlEntryFilter(None, None, op) for op in ops]
    return [AclBindingFilter(p, e) for p in patterns for e in entry_filters]


# -- the client ---------------------------------------------------------------------------------


def admin(args: argparse.Namespace) -> Any:
    from kafka.admin import KafkaAdminClient

    security = command_config(args)
    check_reachable(args, security)
    return KafkaAdminClient(
        bootstrap_servers=bootstrap(args),
        client_id="odradek-cli",
        bootstrap_timeout_ms=connect_timeout_ms(args) or BOOTSTRAP_TIMEOUT_MS,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **security,
    )


def _send(client: Any, request: Any) -> Any:
    return client._manager.run(client._manager.send, request)


def _check(code: int, message: str | None) -> None:
    if code:
        name = error_name(code)
        raise CliError(f"{name}: {message}" if message and message != name else name)


def describe(client: Any, flt: AclBindingFilter) -> list[AclBinding]:
    from kafka.protocol.admin import DescribeAclsRequest

    resp = _send(client, DescribeAclsRequest(**filter_fields(flt)))
    _check(resp.error_code, resp.error_message)
    return [
        binding_from_wire(r, a, PatternType.from_code(r.pattern_type))
        for r in resp.resources
        for a in r.acls
    ]


def create(client: Any, bindings: list[AclBinding]) -> None:
    from kafka.protocol.admin import CreateAclsRequest as Req

    resp = _send(
        client,
        Req(
            creations=[
                Req.AclCreation(**binding_fields(b, "resource_pattern_type")) for b in bindings
            ]
        ),
    )
    for result in resp.results:
        _check(result.error_code, result.error_message)


def delete(client: Any, flts: list[AclBindingFilter]) -> list[AclBinding]:
    from kafka.protocol.admin import DeleteAclsRequest as Req

    resp = _send(client, Req(filters=[Req.DeleteAclsFilter(**filter_fields(f)) for f in flts]))
    removed: dict[AclBinding, None] = {}
    for result in resp.filter_results:
        _check(result.error_code, result.error_message)
        for m in result.matching_acls:
            removed[binding_from_wire(m, m, PatternType.from_code(m.pattern_type))] = None
    return list(removed)


# -- output -------------------------------------------------------------------------------------


def pattern_text(p: ResourcePattern) -> str:
    return (
        f"ResourcePattern(resourceType={p.resource_type.name}, name={p.name}, "
        f"patternType={p.pattern_type.name})"
    )


def entry_text(e: AccessControlEntry) -> str:
    return (
        f"(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
        f"permissionType={e.permission_type.name})"
    )


def grouped(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    out: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        out.setdefault(b.pattern, []).append(b.entry)
    return out


def print_groups(heading: str, bindings: Iterable[AclBinding]) -> None:
    """kafka-acls.sh's block per resource: a heading line, then one tab-indented entry each."""
    for pattern, items in grouped(bindings).items():
        print(f"{heading} `{pattern_text(pattern)}`: ")
        for e in items:
            print(f" \t{entry_text(e)} ")
        print()


def as_json(bindings: Iterable[AclBinding]) -> list[dict[str, Any]]:
    return [
        {
            "resource_type": p.resource_type.name,
            "name": p.name,
            "pattern_type": p.pattern_type.name,
            "acls": [
                {
                    "principal": e.principal,
                    "host": e.host,
                    "operation": e.operation.name,
                    "permission_type": e.permission_type.name,
                }
                for e in items
            ],
        }
        for p, items in grouped(bindings).items()
    ]


def cmd_acls(args: argparse.Namespace) -> int:
    if args.add:
        to_add = bindings_to_add(args)
    else:
        flts = filters(args, remove=args.remove)
    with Closing(admin(args)) as client:
        if args.add:
            create(client, to_add)
            current = []
            for pattern in grouped(to_add):
                current += describe(client, AclBindingFilter(
                    ResourcePatternFilter(pattern.resource_type, pattern.name,
                                          pattern.pattern_type)))  # fmt: skip
            if want_json(args):
                print_json({"added": as_json(to_add), "current": as_json(current)})
            else:
                print_groups("Adding ACLs for resource", to_add)
                print_groups("Current ACLs for resource", current)
            return 0
        if args.remove:
            removed = delete(client, flts)
            if want_json(args):
                print_json({"removed": as_json(removed)})
            else:
                print_groups("Removed ACLs for resource", removed)
            return 0
        found: dict[AclBinding, None] = {}
        for flt in flts:
            found.update(dict.fromkeys(describe(client, flt)))
    if want_json(args):
        print_json(as_json(found))
    else:
        print_groups("Current ACLs for resource", found)
    return 0
