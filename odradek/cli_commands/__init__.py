"""The client-side subcommands of `odradek`: topics, groups, produce, consume, cluster, dev
and fault. Each module registers its parser with `register(subparsers)`; kafka-python is
imported only when a command runs, so `odradek serve` never loads the client."""

from __future__ import annotations

import argparse


def register_all(sub: argparse._SubParsersAction) -> None:
    from odradek.cli_commands import cluster, consume, dev, faults, groups, produce, topics

    for module in (topics, groups, produce, consume, cluster, dev, faults):
        module.register(sub)
