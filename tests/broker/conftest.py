"""A real odradek broker in the test process: its own event-loop thread, port 0, tmp data dir."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.server import Broker
from tests.cluster.zk_helpers import zookeeper  # noqa: F401  (the fixture)

TIMEOUT_S = 30


@contextmanager
def running_broker(data_dir: Path, config: dict[str, str] | None = None) -> Iterator[Broker]:
    """Start a broker on a background loop with extra broker `config` (Kafka keys)."""
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir), **(config or {})}
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="test-broker")
    thread.start()

    async def boot() -> Broker:
        broker = Broker(BrokerConfig(props))
        await broker.start()
        return broker

    try:
        broker = asyncio.run_coroutine_threadsafe(boot(), loop).result(TIMEOUT_S)
        try:
            yield broker
        finally:
            asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(TIMEOUT_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT_S)
        loop.close()


@pytest.fixture
def inproc_broker(tmp_path: Path) -> Iterator[Broker]:
    with running_broker(tmp_path / "data") as broker:
        yield broker


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Broker]]:
    """Start brokers with extra config, e.g. `make_broker({"num.partitions": "3"})`."""
    with ExitStack() as stack:
        started: list[Broker] = []

        def make(config: dict[str, str]) -> Broker:
            data_dir = tmp_path / f"broker-{len(started)}"
            started.append(stack.enter_context(running_broker(data_dir, config)))
            return started[-1]

        yield make
