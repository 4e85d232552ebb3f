"""The README's commands as a user would type them (issue 13): the command-line example runs
against a real broker, and the `make` variables and setup profiles it names are the ones the
Makefile and scripts/setup.sh have."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from odradek.testing import Broker

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _indented_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("    "):
            current.append(line[4:])
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def test_cli_example_runs_against_a_broker() -> None:
    example = _indented_blocks(_section("Command line"))[-1]
    assert example[0].startswith("odradek topics create"), example
    bin_dir = Path(sys.executable).parent
    with Broker() as broker:
        env = {
            **os.environ,
            "ODRADEK_BOOTSTRAP": broker.bootstrap,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(example)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Created topic orders"), proc.stdout
    # print.partition=true: "Partition:N<TAB>value" per record; the five lines, in some order
    records = [line for line in lines if line.startswith("Partition:")]
    assert all(re.fullmatch(r"Partition:[0-2]\t\d", line) for line in records), proc.stdout
    assert sorted(int(line[-1]) for line in records) == [1, 2, 3, 4, 5], proc.stdout


def test_make_targets_and_variables_named_in_the_readme_exist() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    setup = (REPO / "scripts" / "setup.sh").read_text(encoding="utf-8")
    for target in re.findall(r"^    make (\w+)", README, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), f"make {target}"
    assert "ODRADEK_PIPELINES=0" in README and "ODRADEK_PIPELINES" in setup
    usage = re.search(r"usage: scripts/setup\.sh \[([\w|]+)\]", setup)
    assert usage is not None
    for profile in re.findall(r"scripts/setup\.sh (\w+)", README):
        assert profile in usage.group(1).split("|"), profile


def test_readme_says_how_to_get_the_odradek_command_after_make_run() -> None:
    """`make run` leaves `odradek` in .venv/bin, off PATH: the README and `make run` itself say
    how to reach it (tests/setup/test_make_run.py runs what they say)."""
    run_it = _section("Run it")
    assert "source .venv/bin/activate" in run_it and ".venv/bin/odradek" in run_it
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "source $(VENV)/bin/activate" in recipe


def test_readme_states_odradek_clusters_default_data_directory() -> None:
    from odradek.cli import build_parser

    line = re.search(r"odradek cluster --brokers 3 .*\n\s+# \(data in (\S+?);", README)
    assert line is not None, "the README does not say where `odradek cluster` keeps its data"
    cluster = build_parser()._subparsers._group_actions[0].choices["cluster"]  # type: ignore[union-attr]
    assert cluster.get_default("base_dir") == line.group(1)
