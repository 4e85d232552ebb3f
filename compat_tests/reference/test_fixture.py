"""The reference fixtures themselves: each starts a real Apache Kafka that clients can use."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import unique_name
from compat_tests.reference.kafka_ref import KafkaReference


def _round_trip(bootstrap: str, topic: str, replicas: int) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replicas)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 3:
                break
    finally:
        consumer.close()
    return got


def test_kafka44_serves_records_and_describes_one_broker(kafka44: KafkaReference) -> None:
    md = AdminClient({"bootstrap.servers": kafka44.bootstrap}).list_topics(timeout=30)
    assert md.cluster_id == kafka44.cluster_id
    assert sorted(md.brokers) == [1]
    assert _round_trip(kafka44.bootstrap, unique_name("ref44"), 1) == [b"v0", b"v1", b"v2"]


def test_kafka39_serves_records(kafka39: KafkaReference) -> None:
    md = AdminClient({"bootstrap.servers": kafka39.bootstrap}).list_topics(timeout=30)
    assert md.cluster_id == kafka39.cluster_id
    assert _round_trip(kafka39.bootstrap, unique_name("ref39"), 1) == [b"v0", b"v1", b"v2"]


def test_kafka44_cluster_replicates_to_three_brokers(kafka44_cluster: KafkaReference) -> None:
    bootstrap = kafka44_cluster.bootstrap
    topic = unique_name("ref44c")
    assert _round_trip(bootstrap, topic, 3) == [b"v0", b"v1", b"v2"]
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    assert sorted(md.brokers) == [1, 2, 3]
    assert sorted(md.topics[topic].partitions[0].replicas) == [1, 2, 3]


def test_tools_run_from_the_reference_classpath(kafka44: KafkaReference) -> None:
    done = kafka44.run_class(
        "org.apache.kafka.tools.ClusterTool", "cluster-id", "--bootstrap-server", kafka44.bootstrap
    )
    assert done.returncode == 0, done.stderr.decode()
    assert kafka44.cluster_id in done.stdout.decode()
