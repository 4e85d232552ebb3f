"""Per-dir checkpoint files as Kafka's CheckpointFile reads them: an empty file, or a version
line alone, is no entries and no warning (a Kafka killed before its first checkpoint leaves
them empty)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.log.checkpoints import read_checkpoint


@pytest.mark.parametrize("text", ["", "0\n"])
def test_empty_checkpoint_reads_as_no_entries_quietly(
    text: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with caplog.at_level(logging.WARNING):
        assert read_checkpoint(str(path)) == {}
    assert not caplog.records


def test_malformed_checkpoint_still_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("7\n1\nt 0 5\n")
    with caplog.at_level(logging.WARNING):
        assert read_checkpoint(str(path)) == {}
    assert "malformed checkpoint" in caplog.text
