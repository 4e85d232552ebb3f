"""The odradek pytest plugin (entry point `pytest11`), registered when odradek is installed.

Fixtures:
    odradek_broker           one in-process broker for the whole session (per xdist worker)
    odradek_topic            factory: odradek_topic(partitions=1, config=None) -> unique name
    odradek_broker_factory   factory for extra brokers of your own, stopped after the test

    def test_orders(odradek_broker, odradek_topic):
        topic = odradek_topic(partitions=3)
        producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap)
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker

_counter = itertools.count()


@pytest.fixture(scope="session")
def odradek_broker() -> Iterator[Broker]:
    """A real broker in this test process, on a free port with a temporary data dir."""
    with Broker() as broker:
        yield broker


@pytest.fixture
def odradek_topic(odradek_broker: Broker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a topic with a unique name for this test: `odradek_topic(partitions=3)`."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:150]

    def create(partitions: int = 1, config: dict[str, Any] | None = None) -> str:
        name = f"{stem}-{worker}-{next(_counter)}"
        configs = {k: str(v) for k, v in (config or {}).items()}
        odradek_broker.call(
            lambda server: server.topics.create_topic(name, partitions, -1, configs)
        )
        return name

    return create


@pytest.fixture
def odradek_broker_factory() -> Iterator[Callable[..., Broker]]:
    """Start brokers of your own: `odradek_broker_factory(topics={"t": 2}, config={...})`."""
    started: list[Broker] = []

    def start(**kwargs: Any) -> Broker:
        broker = Broker(**kwargs).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()
