"""The client-side subcommands of `odradek`: topics, groups, produce, consume, cluster, dev,
fault, configs, delete-records, leader-election, transactions and dump-log. Each module registers
its parser with `register(subparsers)`; kafka-python is imported only when a command runs, so
`odradek serve` never loads the client."""

from __future__ import annotations

import argparse
from importlib import import_module

# commands whose parser needs only their own module: `odradek produce` starts without
# importing the other commands (and their imports), which is most of a short run's time
ALONE = {"produce": "odradek.cli_commands.produce", "consume": "odradek.cli_commands.consume"}


def register_alone(sub: argparse._SubParsersAction, command: str) -> bool:
    """Register only `command`'s parser when it is one of ALONE; False otherwise."""
    module = ALONE.get(command)
    if module is None:
        return False
    import_module(module).register(sub)
    return True


def register_all(sub: argparse._SubParsersAction) -> None:
    from odradek.cli_commands import cluster, consume, dev, faults, groups, produce, topics

    for module in (topics, groups, produce, consume, cluster, dev, faults):
        module.register(sub)
    import_module("odradek.cli_commands.configs").register(sub)
    import_module("odradek.cli_commands.records").register(sub)
    import_module("odradek.cli_commands.election").register(sub)
    import_module("odradek.cli_commands.transactions").register(sub)
    import_module("odradek.cli_commands.dump_log").register(sub)
    import_module("odradek.cli_commands.quotas").register(sub)
    import_module("odradek.cli_commands.users").register(sub)
    import_module("odradek.cli_commands.acls").register(sub)
    import_module("odradek.cli_commands.client_metrics").register(sub)
    import_module("odradek.cli_commands.log_dirs").register(sub)
