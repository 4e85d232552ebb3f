"""The pytest plugin, used from a throwaway test project as a user would."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = '''
from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def test_roundtrip(odradek_broker, odradek_topic):
    topic = odradek_topic(partitions=2)
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap)
    for i in range(10):
        producer.send(topic, value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=odradek_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got = sorted(m.value for m in consumer)
    consumer.close()
    assert got == sorted(b"v%d" % i for i in range(10))


def test_topics_are_unique(odradek_topic):
    assert odradek_topic() != odradek_topic()


def test_own_broker_with_faults(odradek_broker_factory):
    broker = odradek_broker_factory(topics={"t": 1})
    broker.fail("metadata", "LEADER_NOT_AVAILABLE", count=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("t", b"x").get(timeout=20)
    producer.close()
'''


def test_plugin_fixtures_work_in_a_user_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=3)


def test_plugin_is_registered_by_entry_point() -> None:
    from importlib.metadata import entry_points

    names = {ep.value for ep in entry_points(group="pytest11")}
    assert "odradek.testing.pytest_plugin" in names
