"""Brokers for tests: real odradek brokers started inside the test process.

from odradek.testing import Broker

with Broker(topics={"orders": 3}) as broker:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)

`Broker` and `Cluster` are imported on first use: the pytest plugin (odradek.testing.pytest_plugin)
lives in this package, and loading it must not import the broker (nor kafka-python) into test
runs that never use its fixtures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.testing.broker import Broker
    from odradek.testing.cluster import Cluster

__all__ = ["Broker", "Cluster"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from odradek.testing.broker import Broker

        return Broker
    if name == "Cluster":
        from odradek.testing.cluster import Cluster

        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
