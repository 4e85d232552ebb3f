"""Prometheus metrics scraped after a known produce/consume: the counts match."""

from __future__ import annotations

import time
import urllib.request

import confluent_kafka as ck
from prometheus_client.parser import text_string_to_metric_families

from odradek.testing import Broker


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_count_what_clients_did():
    with Broker(topics={"clicks": 2}, config={"metrics.listen": "127.0.0.1:0"}) as broker:
        port = broker.server.metrics.port
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(25):
            producer.produce("clicks", value=b"x" * 100, key=b"k%d" % i, partition=i % 2)
        assert producer.flush(10) == 0
        consumer = ck.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "m", "enable.auto.commit": False}
        )
        consumer.assign([ck.TopicPartition("clicks", p, 0) for p in (0, 1)])
        got = 0
        deadline = time.monotonic() + 15
        while got < 25 and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(100, 0.5) if not m.error())
        consumer.close()
        assert got == 25
        # a metadata request for an illegal topic name shows up as an error count
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.describe_topics(["bad name!"])
        except Exception:
            pass
        admin.close()
        m = scrape(port)
        topic = (("topic", "clicks"),)
        assert m[("odradek_topic_records_in_total", topic)] == 25
        assert m[("odradek_topic_records_out_total", topic)] == 25
        assert m[("odradek_topic_bytes_in_total", topic)] > 25 * 100
        assert (
            m[("odradek_topic_bytes_out_total", topic)]
            >= m[("odradek_topic_bytes_in_total", topic)]
        )
        assert m[("odradek_requests_total", (("api", "produce"),))] >= 1
        assert m[("odradek_requests_total", (("api", "metadata"),))] >= 1
        assert m[("odradek_request_latency_seconds_count", (("api", "fetch"),))] >= 1
        assert m[("odradek_partitions", ())] >= 2
        assert m[("odradek_log_size_bytes", topic)] > 0
        assert m[("odradek_connections", ())] >= 1
        assert (
            m[("odradek_errors_total", (("api", "metadata"), ("code", "INVALID_TOPIC_EXCEPTION")))]
            >= 1
        )
