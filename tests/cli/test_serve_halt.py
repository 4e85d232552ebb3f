"""`odradek serve` of a clustered broker (ZooKeeper) ends, with one line and exit status 1, when
the broker halts because every log dir failed, as Kafka's process does (Exit.halt); it used to
stay alive, serving nothing, until SIGTERM (issue 11).

The serve loop runs in this process (a disk fault cannot be injected into a child process): the
log dir fails the way an I/O error takes it offline (LogDir.fail), which halts the broker."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest

from odradek import cli
from odradek.broker import server
from odradek.broker.config import BrokerConfig
from odradek.testing.zookeeper import ZooKeeperServer, ZooKeeperUnavailable, zookeeper_jar

DEADLINE_S = 30.0


@pytest.mark.skipif(zookeeper_jar() is None, reason="no ZooKeeper jar")
def test_serve_exits_1_when_the_broker_halts_on_failed_log_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[server.Broker] = []

    class Recorded(server.Broker):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(server, "Broker", Recorded)
    try:
        zk = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
    except ZooKeeperUnavailable as exc:
        pytest.skip(str(exc))
    try:
        config = BrokerConfig(
            {
                "node.id": "0",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path / "data"),
                "zookeeper.connect": zk.connect("/serve-halt"),
            }
        )

        async def run() -> int:
            serving = asyncio.create_task(cli._serve(config))
            deadline = asyncio.get_running_loop().time() + DEADLINE_S
            while not (started and started[0].bound):
                assert not serving.done(), serving.result()
                assert asyncio.get_running_loop().time() < deadline, "serve never got ready"
                await asyncio.sleep(0.01)
            broker = started[0]
            for log_dir in broker.logs.log_dirs.values():
                log_dir.fail(OSError(errno.EIO, "Input/output error"))
            # before the fix: serve waited for SIGTERM and this timed out
            return await asyncio.wait_for(serving, DEADLINE_S)

        assert asyncio.run(run()) == 1
    finally:
        zk.stop()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("odradek: broker 0 halted: failed log dirs: ")
