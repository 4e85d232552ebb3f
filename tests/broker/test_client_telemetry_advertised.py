"""The client-telemetry APIs (KIP-714: GetTelemetrySubscriptions 71, PushTelemetry 72) are
advertised only when a client-metrics receiver is configured, as Kafka advertises them only
with a ClientTelemetry metrics reporter: here the Prometheus endpoint (`metrics.listen`), which
exports pushed metrics. Without it, clients see no telemetry APIs and librdkafka does not start
telemetry (nor log its `GETSUBSCRIPTIONS ... Telemetry client instance id changed` line)."""

from __future__ import annotations

import logging
import time

import confluent_kafka
from kafka import KafkaAdminClient

from odradek.testing import Broker

GET_SUBSCRIPTIONS, PUSH = 71, 72
WAIT_S = 20.0


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The API versions a real client (kafka-python) learns from the broker (its raw table:
    kafka-python 3.0's `api_versions()` maps keys to its ApiKey enum, which lacks key 93 that
    Kafka 4.4 and odradek list)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        node = admin.describe_cluster()["brokers"][0]["broker_id"]
        versions = admin.get_broker_version_data(node).api_versions
        return {int(key): tuple(span) for key, span in versions.items()}
    finally:
        admin.close()


def test_no_telemetry_apis_without_a_receiver() -> None:
    with Broker() as broker:
        apis = advertised(broker.bootstrap)
    assert 3 in apis  # Metadata, as ever
    assert GET_SUBSCRIPTIONS not in apis and PUSH not in apis


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_telemetry_with_the_prometheus_receiver() -> None:
    with Broker(topics={"t": 1}, config={"metrics.listen": "127.0.0.1:0"}) as broker:
        apis = advertised(broker.bootstrap)
        assert apis[GET_SUBSCRIPTIONS] == (0, 0) and apis[PUSH] == (0, 0)
        lines = Lines()
        logger = logging.getLogger("test-telemetry-rdkafka")
        logger.addHandler(lines)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap, "logger": logger}
        )
        try:
            producer.produce("t", b"x")
            assert producer.flush(WAIT_S) == 0
            deadline = time.monotonic() + WAIT_S
            while not any("GETSUBSCRIPTIONS" in line for line in lines.lines):
                assert time.monotonic() < deadline, lines.lines
                producer.poll(0.1)
        finally:
            producer.flush(WAIT_S)
            logger.removeHandler(lines)
        assert broker.call(lambda s: len(s.telemetry.instances)) >= 1
