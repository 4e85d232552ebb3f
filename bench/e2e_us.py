"""End-to-end latency in microseconds, one record at a time (acks=1), on odradek or Kafka.

Kafka's EndToEndLatency tool reports whole milliseconds, so a sub-millisecond median reads as 0
or 1 depending on rounding. This measures the same loop (produce one 1 KiB record, wait until a
long-polling consumer has it, repeat) with confluent-kafka (librdkafka) and `perf_counter_ns`:

    python -m bench.e2e_us [--kafka] [--records N]
"""

from __future__ import annotations

import argparse
import os
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.broker_proc import OdradekProcess
from bench.kafka_proc import KafkaProcess

TOPIC = "e2e-us"
PAYLOAD = b"x" * 1024


def measure(bootstrap: str, records: int, topic: str = "") -> list[float]:
    """Microseconds from produce() to the consumer's poll() returning that record, sorted.
    Into `topic` (one partition, made by the caller) or, without one, a new topic `e2e-us`."""
    if not topic:
        topic = TOPIC
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    prod = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 500,
            "enable.auto.commit": False,
        }
    )
    try:
        cons.subscribe([topic])
        prod.produce(topic, PAYLOAD)
        prod.flush(30)
        deadline = time.monotonic() + 60
        while cons.poll(1.0) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the first record was never read")
        lat: list[float] = []
        for _ in range(records):
            t0 = time.perf_counter_ns()
            prod.produce(topic, PAYLOAD)
            prod.poll(0)
            msg = cons.poll(30.0)
            if msg is None:
                raise RuntimeError("a record was not read within 30 s")
            lat.append((time.perf_counter_ns() - t0) / 1000)
            prod.poll(0)
        return sorted(lat)
    finally:
        cons.close()
        prod.flush(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kafka", action="store_true", help="measure Apache Kafka instead")
    ap.add_argument("--records", type=int, default=2000)
    args = ap.parse_args()
    broker: KafkaProcess | OdradekProcess = KafkaProcess() if args.kafka else OdradekProcess()
    with broker:
        broker.start()
        lat = measure(broker.bootstrap, args.records)
    name = "kafka" if args.kafka else "odradek"
    p50, p99, p999 = percentiles(lat)
    print(
        f"{name} e2e 1024 B acks=1 us: p50 {p50:.0f} p99 {p99:.0f} p99.9 {p999:.0f} "
        f"(load {os.getloadavg()[0]:.1f})"
    )


def percentiles(lat: list[float]) -> tuple[float, float, float]:
    """p50, p99 and p99.9 of sorted latencies (nearest rank below)."""
    n = len(lat)
    return lat[n // 2], lat[int(n * 0.99)], lat[min(n - 1, int(n * 0.999))]


if __name__ == "__main__":
    main()
