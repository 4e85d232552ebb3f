"""Brokers for tests: real odradek brokers started inside the test process.

from odradek.testing import Broker

with Broker(topics={"orders": 3}) as broker:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
"""

from odradek.testing.broker import Broker
from odradek.testing.cluster import Cluster

__all__ = ["Broker", "Cluster"]
