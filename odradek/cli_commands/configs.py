"""`odradek configs describe|alter`, as kafka-configs.sh: topic, broker and group configs.

DescribeConfigs (key 32, with synonyms) shows each config as kafka-configs.sh prints it:
`name=value sensitive=false synonyms={SOURCE:name=value, ...}`; without `--all` only the configs
set on the entity itself (source DYNAMIC_TOPIC_CONFIG / DYNAMIC_BROKER_CONFIG), with `--all`
every config with its source. IncrementalAlterConfigs (key 44, KIP-339) sets (`--add-config`)
and deletes (`--delete-config`) keys; `--add-config` takes kafka-configs.sh's syntax
`k1=v1,k2=[v1,v2],k3=v3` (square brackets around a value holding commas). Groups
(`--entity-type groups` or `--group`, KIP-848 / KIP-932 per-group configs) need not exist; the
groups listed without a name are those with configs (ListConfigResources, key 74).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    result_message,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json

ENTITY_TYPES = {
    "topics": "TOPIC",
    "topic": "TOPIC",
    "brokers": "BROKER",
    "broker": "BROKER",
    "groups": "GROUP",
    "group": "GROUP",
}
# the source of a config set on the entity itself (what describe shows without --all)
DYNAMIC_SOURCE = {
    "TOPIC": "DYNAMIC_TOPIC_CONFIG",
    "BROKER": "DYNAMIC_BROKER_CONFIG",
    "GROUP": "DYNAMIC_GROUP_CONFIG",
}
_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")  # kafka-configs.sh: commas outside [...]


def register(sub: argparse._SubParsersAction) -> None:
    configs = sub.add_parser(
        "configs", help="describe and alter topic and broker configs (kafka-configs)"
    )
    add_client_options(configs)
    cmds = configs.add_subparsers(dest="configs_command", metavar="COMMAND")
    cmds.required = True

    p = cmds.add_parser("describe", help="configs of topics or brokers, with source")
    add_client_options(p)
    _entity_options(p, name_required=False)
    p.add_argument(
        "--all", action="store_true", help="every config, defaults included, with its source"
    )
    p.set_defaults(func=run_command(cmd_describe))

    p = cmds.add_parser("alter", help="set or delete configs of a topic or broker")
    add_client_options(p)
    _entity_options(p, name_required=True)
    p.add_argument(
        "--add-config",
        action="append",
        metavar="K=V[,K=V]",
        help="configs to set: k1=v1,k2=[v1,v2,v2],k3=v3 (repeatable)",
    )
    p.add_argument(
        "--add-config-file",
        metavar="FILE",
        help="a properties file of configs to set (one k=v a line)",
    )
    p.add_argument(
        "--delete-config",
        action="append",
        metavar="K[,K]",
        help="configs to remove (back to their default): k1,k2 (repeatable)",
    )
    p.set_defaults(func=run_command(cmd_alter))


def _entity_options(p: argparse.ArgumentParser, name_required: bool) -> None:
    p.add_argument(
        "--entity-type",
        choices=sorted(ENTITY_TYPES),
        help="topics, brokers or groups",
    )
    p.add_argument(
        "--entity-name",
        metavar="NAME",
        help="topic name, broker id or group id"
        + ("" if name_required else " (default: every topic / broker / group with configs)"),
    )
    p.add_argument("--topic", metavar="NAME", help="same as --entity-type topics --entity-name")
    p.add_argument("--broker", metavar="ID", help="same as --entity-type brokers --entity-name")
    p.add_argument("--group", metavar="ID", help="same as --entity-type groups --entity-name")


def _entity(args: argparse.Namespace, name_required: bool) -> tuple[str, str | None]:
    """(TOPIC|BROKER, name or None) from --entity-type/--entity-name or --topic/--broker."""
    given = [
        x
        for x in (
            ("TOPIC", args.topic) if args.topic is not None else None,
            ("BROKER", args.broker) if args.broker is not None else None,
            ("GROUP", args.group) if args.group is not None else None,
        )
        if x
    ]
    if args.entity_type or args.entity_name is not None:
        if given:
            raise CliError("give either --entity-type/--entity-name or --topic/--broker/--group")
        if not args.entity_type:
            raise CliError("--entity-name needs --entity-type (topics, brokers or groups)")
        given.append((ENTITY_TYPES[args.entity_type], args.entity_name))
    if len(given) != 1:
        raise CliError(
            "give one entity: --entity-type topics|brokers|groups, --topic, --broker or --group"
        )
    rtype, name = given[0]
    if name_required and not name:
        raise CliError("--entity-name is required (a topic name, broker id or group id)")
    if rtype == "BROKER" and name is not None and not name.isdigit():
        raise CliError(f"a broker is named by its numeric id, got {name!r}")
    return rtype, name


def _singular(rtype: str) -> str:
    return rtype.lower()


def _check_exists(admin: Any, rtype: str, names: list[str]) -> None:
    if rtype == "TOPIC":
        for topic in admin.describe_topics(names):
            if topic["error_code"] == 3:
                raise CliError(f"topic {topic['name']!r} does not exist")
            if topic["error_code"]:
                raise CliError(
                    f"cannot describe topic {topic['name']!r}: {error_name(topic['error_code'])}"
                )
    elif rtype == "GROUP":
        return  # a group's configs may be set before the group exists, as Kafka allows
    else:
        known = {str(b) for b in broker_ids(admin)}
        for name in names:
            if name not in known:
                raise CliError(
                    f"broker {name} is not in the cluster (brokers: {', '.join(sorted(known))})"
                )


def _all_names(admin: Any, rtype: str) -> list[str]:
    if rtype == "TOPIC":
        return sorted(admin.list_topics())
    if rtype == "GROUP":
        return sorted(admin.list_config_resources(["GROUP"]).get("group", []))
    return [str(b) for b in broker_ids(admin)]


def broker_ids(admin: Any) -> list[int]:
    """The cluster's broker ids (DescribeCluster), sorted."""
    brokers = admin.describe_cluster()["brokers"]
    return sorted(int(b.get("broker_id", b.get("node_id", -1))) for b in brokers)


def _describe(admin: Any, rtype: str, names: list[str], describe_all: bool) -> list[dict[str, Any]]:
    """Each entity's configs, sorted by name, as kafka-configs.sh filters them."""
    from kafka.admin import ConfigResource

    out = []
    for name in names:  # one at a time: broker resources go to their own broker
        found = admin.describe_configs(
            [ConfigResource(rtype, name)], include_synonyms=True, config_filter="all"
        )
        entries = found.get(rtype.lower(), {}).get(name, {})
        configs = []
        for key in sorted(entries):
            e = entries[key]
            source = e.get("config_source")
            if not describe_all and source != DYNAMIC_SOURCE[rtype]:
                continue
            sensitive = bool(e.get("is_sensitive"))
            configs.append(
                {
                    "name": key,
                    "value": None if sensitive else e.get("value"),
                    "source": source,
                    "sensitive": sensitive,
                    "read_only": bool(e.get("read_only")),
                    "synonyms": [
                        {"name": s["name"], "value": s.get("value"), "source": s["source"]}
                        for s in e.get("synonyms") or []
                    ],
                }
            )
        out.append({"entity_type": _singular(rtype), "entity_name": name, "configs": configs})
    return out


def _java_bool(v: bool) -> str:
    return "true" if v else "false"


def _java(v: str | None) -> str:
    """A value as Java prints it (kafka-configs.sh shows a missing value as null)."""
    return "null" if v is None else v


def cmd_describe(args: argparse.Namespace) -> None:
    rtype, name = _entity(args, name_required=False)
    with Closing(admin_client(args)) as admin:
        if name:
            _check_exists(admin, rtype, [name])
            names = [name]
        else:
            names = _all_names(admin, rtype)
        described = _describe(admin, rtype, names, args.all)
    if want_json(args):
        print_json(described if name is None else described[0])
        return
    label = "All" if args.all else "Dynamic"
    for entity in described:
        print(f"{label} configs for {entity['entity_type']} {entity['entity_name']} are:")
        for c in entity["configs"]:
            synonyms = ", ".join(
                f"{s['source']}:{s['name']}={_java(s['value'])}" for s in c["synonyms"]
            )
            print(
                f"  {c['name']}={_java(c['value'])} sensitive={_java_bool(c['sensitive'])} "
                f"synonyms={{{synonyms}}}"
            )


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k1=v1,k2=[v1,v2],k3=v3."""
    out: dict[str, str] = {}
    for item in _SPLIT.split(text):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--add-config needs key=value pairs, got {item!r}")
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key] = value
    return out


def _read_config_file(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CliError(f"cannot read --add-config-file {path}: {exc.strerror or exc}") from None
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{path}:{n}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_alter(args: argparse.Namespace) -> int:
    from kafka.admin import AlterConfigOp, ConfigResource

    rtype, name = _entity(args, name_required=True)
    assert name is not None
    sets: dict[str, str] = {}
    if args.add_config_file:
        sets.update(_read_config_file(args.add_config_file))
    for text in args.add_config or []:
        sets.update(parse_add_config(text))
    deletes = [k.strip() for text in args.delete_config or [] for k in text.split(",") if k.strip()]
    if not sets and not deletes:
        raise CliError("nothing to alter: give --add-config, --add-config-file or --delete-config")
    both = set(sets) & set(deletes)
    if both:
        raise CliError(f"--add-config and --delete-config both name {', '.join(sorted(both))}")
    with Closing(admin_client(args)) as admin:
        _check_exists(admin, rtype, [name])
        if deletes and rtype in ("TOPIC", "GROUP"):
            # as kafka-configs.sh: deleting a config that is not set is an error
            current = {c["name"] for c in _describe(admin, rtype, [name], False)[0]["configs"]}
            missing = [k for k in deletes if k not in current]
            if missing:
                raise CliError(f"Invalid config(s): {','.join(missing)} (not set on {name})")
        ops: dict[str, Any] = {k: (AlterConfigOp.SET, v) for k, v in sets.items()}
        ops.update({k: (AlterConfigOp.DELETE, None) for k in deletes})
        result = admin.alter_configs(
            [ConfigResource(rtype, name, ops)], raise_on_unknown=False, incremental=True
        )
        outcome = result.get(rtype.lower(), {}).get(name, "OK")
        if outcome != "OK":
            raise CliError(
                f"altering configs of {_singular(rtype)} {name} failed: {result_message(outcome)}"
            )
    if want_json(args):
        print_json(
            {
                "entity_type": _singular(rtype),
                "entity_name": name,
                "set": sets,
                "deleted": deletes,
            }
        )
    else:
        print(f"Completed updating config for {_singular(rtype)} {name}.")
    return 0
