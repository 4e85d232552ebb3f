"""Brokers for tests: real odradek brokers started inside the test process.

from odradek.testing import Broker

with Broker(topics={"orders": 3}) as broker:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)

Both take `security="sasl_ssl"` (or "ssl", "mtls", "sasl_plaintext"; odradek.testing.security)
for a broker with a throwaway CA and SASL users, and give the clients' settings:

with Broker(security="sasl_ssl", mechanism="SCRAM-SHA-256") as broker:
    producer = confluent_kafka.Producer(broker.client_config(user="alice"))

`Broker`, `Cluster` and `Security` are imported on first use: the pytest plugin
(odradek.testing.pytest_plugin) lives in this package, and loading it must not import the broker
(nor kafka-python) into test runs that never use its fixtures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.testing.broker import Broker
    from odradek.testing.cluster import Cluster
    from odradek.testing.security import Security

__all__ = ["Broker", "Cluster", "Security"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from odradek.testing.broker import Broker

        return Broker
    if name == "Cluster":
        from odradek.testing.cluster import Cluster

        return Cluster
    if name == "Security":
        from odradek.testing.security import Security

        return Security
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
