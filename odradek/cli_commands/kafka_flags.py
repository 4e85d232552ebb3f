"""Kafka's script form of the admin commands: `kafka-topics.sh --create --topic T`,
`kafka-consumer-groups.sh --describe --all-groups`, `kafka-configs.sh --alter ...`.

Kafka's tools name the operation with a flag (`--create`, `--describe`, `--list`, `--delete`,
`--alter`, `--reset-offsets`, `--delete-offsets`) where odradek has a subcommand word. Before
argparse sees the command line, `kafka_script_form` moves that flag to the subcommand's place:
`odradek topics --create --topic T --partitions 3` runs as `odradek topics create --topic T
--partitions 3`. The other flags (`--topic`, `--group`, `--all-groups`, `--entity-type`, ...)
are options of the subcommands themselves.
"""

from __future__ import annotations

# command -> {operation flag -> subcommand}
OPERATIONS: dict[str, dict[str, str]] = {
    "topics": {
        "--create": "create",
        "--describe": "describe",
        "--list": "list",
        "--delete": "delete",
        "--alter": "alter",
    },
    "groups": {
        "--list": "list",
        "--describe": "describe",
        "--delete": "delete",
        "--reset-offsets": "reset-offsets",
        "--delete-offsets": "delete-offsets",
    },
    "configs": {"--describe": "describe", "--alter": "alter"},
}
# every subcommand word of those commands: a command line naming one is in odradek's own form
# (`odradek topics reassign --list` keeps its --list)
SUBCOMMANDS: dict[str, frozenset[str]] = {
    "topics": frozenset({"create", "describe", "list", "delete", "alter", "reassign"}),
    "groups": frozenset({"list", "describe", "delete", "delete-offsets", "reset-offsets"}),
    "configs": frozenset({"describe", "alter"}),
}
# options of the top-level parser that take a value (they come before the command)
_GLOBAL_VALUED = {"--log-level"}


class ScriptFormError(ValueError):
    """Two operations at once (`--create --delete`), as Kafka's tools refuse them."""


def kafka_script_form(argv: list[str]) -> list[str]:
    """`argv` with a Kafka tool's operation flag turned into odradek's subcommand word; other
    command lines unchanged."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _GLOBAL_VALUED else 1
    if i >= len(argv) or argv[i] not in OPERATIONS:
        return argv
    operations = OPERATIONS[argv[i]]
    rest = argv[i + 1 :]
    if any(token in SUBCOMMANDS[argv[i]] for token in rest):
        return argv  # odradek's own form
    found = [j for j, token in enumerate(rest) if token in operations]
    if not found:
        return argv
    if len(found) > 1:
        names = ", ".join(rest[j] for j in found)
        raise ScriptFormError(f"{argv[i]}: give one operation, not {names}")
    (j,) = found
    word = operations[rest[j]]
    return [*argv[: i + 1], word, *rest[:j], *rest[j + 1 :]]
