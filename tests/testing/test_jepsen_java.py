"""The queue workload's Java client processes asked for where they cannot run: a clear error
naming what is missing, before any client starts, never a run quietly on librdkafka alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.jepsen import java_share
from odradek.testing.jepsen import javaclient
from odradek.testing.jepsen.javaclient import JavaUnavailable
from odradek.testing.jepsen.runner import Workload, run_workload
from odradek.testing.jepsen.workload import java_processes


@pytest.fixture
def no_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(javaclient, "LIB", tmp_path / "lib")
    monkeypatch.setattr(javaclient, "CLASSES", tmp_path / "classes")


def test_java_processes_without_the_jars_are_an_error(no_jars: None) -> None:
    with pytest.raises(JavaUnavailable, match="kafka-clients.*scripts/setup.sh"):
        run_workload("127.0.0.1:1", Workload(seed=1, java=0.5))


def test_bench_java_share_asked_for_fails_and_auto_says_why(
    no_jars: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit, match="--java 0.5: .*kafka-clients"):
        java_share("0.5")
    assert java_share("auto") == 0.0
    assert "java client: the Java client's jars" in capsys.readouterr().out
    assert java_share("0") == 0.0


def test_the_seed_picks_java_processes_of_both_kinds() -> None:
    picks = {java_processes(seed, 2, 2, 0.5) for seed in range(20)}
    assert all(len(p) == 2 and {n[0] for n in p} == {"p", "t"} for p in picks)
    assert len(picks) > 1  # the seed decides which
    assert java_processes(7, 2, 2, 0.5) == java_processes(7, 2, 2, 0.5)
    assert java_processes(7, 2, 2, 0.0) == frozenset()
