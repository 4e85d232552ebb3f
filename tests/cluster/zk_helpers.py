"""What the tests of the ZooKeeper metadata store share: one ZooKeeper server per test module
(the `zookeeper` fixture, made available by tests/broker/conftest.py and tests/cluster/conftest.py),
two brokers' stores on it, waiting for a watch to deliver a change, running an async test body,
reading a node's JSON."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from odradek.testing.zookeeper import ZooKeeperServer

if TYPE_CHECKING:  # imported when used: the conftests that offer the fixture stay light
    from odradek.broker.cluster.metadata_store import MetadataChange
    from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore

SESSION_MS = 2000


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper"))) as server:
        yield server


@contextmanager
def two_stores(
    connect: str,
) -> Iterator[tuple[ZooKeeperMetadataStore, ZooKeeperMetadataStore, list[MetadataChange]]]:
    """The stores of brokers 0 and 1 on the ZooKeeper at `connect`, both subscribed; the changes
    broker 1 hears are in the list. Both are closed at the end."""
    from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore

    a = ZooKeeperMetadataStore(connect, 0, session_timeout_ms=SESSION_MS)
    b = ZooKeeperMetadataStore(connect, 1, session_timeout_ms=SESSION_MS)
    heard: list[MetadataChange] = []
    try:
        a.subscribe(lambda change: None)
        b.subscribe(heard.append)
        yield a, b, heard
    finally:
        a.close()
        b.close()


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the change did not arrive"
        await asyncio.sleep(0.01)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 60))


def node(store: ZooKeeperMetadataStore, path: str) -> Any:
    data, _ = store.zk.get(path)
    return json.loads(data)
