"""The pytest plugin, used from a throwaway test project as a user would."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
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
"""


def test_plugin_fixtures_work_in_a_user_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=3)


def test_plugin_is_registered_by_entry_point() -> None:
    from importlib.metadata import entry_points

    names = {ep.value for ep in entry_points(group="pytest11")}
    assert "odradek.testing.pytest_plugin" in names


def test_readme_example_runs(pytester: pytest.Pytester) -> None:
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Testing with odradek", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    pytester.makepyfile(test_readme=code)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=1)


XDIST_TESTS = """
import os
import pathlib


def _record(odradek_broker, odradek_topic, tag):
    topic = odradek_topic()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    out = pathlib.Path(os.environ["OUT_DIR"]) / f"{tag}-{worker}"
    out.write_text(f"{odradek_broker.bootstrap} {topic}")


def test_a(odradek_broker, odradek_topic):
    _record(odradek_broker, odradek_topic, "a")


def test_b(odradek_broker, odradek_topic):
    _record(odradek_broker, odradek_topic, "b")
"""


def test_each_xdist_worker_gets_its_own_broker(
    pytester: pytest.Pytester, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("OUT_DIR", str(tmp_path))
    pytester.makepyfile(test_x=XDIST_TESTS)
    result = pytester.runpytest_subprocess("-q", "-n", "2", "--dist", "each")
    result.assert_outcomes(passed=4)
    # --dist each: both workers ran both tests
    seen = {p.name: p.read_text().split() for p in tmp_path.iterdir()}
    assert sorted(seen) == ["a-gw0", "a-gw1", "b-gw0", "b-gw1"]
    # one session broker per worker, shared by that worker's tests, different between workers
    assert seen["a-gw0"][0] == seen["b-gw0"][0] and seen["a-gw1"][0] == seen["b-gw1"][0]
    assert seen["a-gw0"][0] != seen["a-gw1"][0]
    # topic names never collide
    assert len({v[1] for v in seen.values()}) == 4


CLUSTER_TESTS = """
import os
import socket

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

STARTED = []


def test_cluster_fails_over(odradek_cluster):
    cluster = odradek_cluster(
        brokers=3, topics={"orders": (1, 3)}, config={"min.insync.replicas": 2}
    )
    STARTED.append((cluster.data_dir, cluster.bootstrap))
    assert cluster.running() == [0, 1, 2]
    assert len(cluster.partition("orders").replicas) == 3
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=20)
    producer.send("orders", b"before").get(timeout=30)
    leader = cluster.leader("orders")
    cluster.kill(leader)
    cluster.wait_for_leader("orders", not_on=leader)
    producer.send("orders", b"after").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("orders", 0)])
    consumer.seek_to_beginning()
    got = [m.value for m in consumer]
    consumer.close()
    assert got == [b"before", b"after"]


def test_fast_failover_unless_configured(odradek_cluster):
    cluster = odradek_cluster(brokers=2, config={"replica.lag.time.max.ms": 2500})
    STARTED.append((cluster.data_dir, cluster.bootstrap))
    get = lambda key: cluster.call(lambda c: c.brokers[1].config.get(key))
    assert get("replica.lag.time.max.ms") == 2500
    assert get("replica.fetch.wait.max.ms") == 100
    assert get("group.initial.rebalance.delay.ms") == 0


def test_clusters_are_stopped_after_their_test():
    assert len(STARTED) == 2
    for data_dir, bootstrap in STARTED:
        assert not os.path.exists(data_dir)
        for address in bootstrap.split(","):
            host, port = address.rsplit(":", 1)
            with socket.socket() as s:
                assert s.connect_ex((host, int(port))) != 0
"""


def test_cluster_fixture_in_a_user_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cluster=CLUSTER_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:randomly")
    result.assert_outcomes(passed=3)


PLAIN_TEST = """
import sys


def test_plain():
    # collection is over and the plugin is loaded: neither the broker nor kafka-python came in
    assert "odradek.testing.pytest_plugin" in sys.modules
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "kafka" or m.startswith(
        ("odradek.broker", "odradek.testing.broker", "odradek.wire")))
    assert loaded == []
"""


def test_plugin_adds_no_warnings_or_imports_to_a_plain_test(pytester: pytest.Pytester) -> None:
    """Issue 13: a test that uses no fixture of the plugin sees neither kafka-python's
    deprecation warnings nor the broker's import time (the run said `1 passed, 218 warnings`)."""
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "warnings" not in out and "Warning" not in out, out


FIXTURE_TEST = """
def test_uses_broker(odradek_broker, odradek_topic):
    assert odradek_topic()
    assert odradek_broker.bootstrap
"""


def test_plugin_fixture_import_adds_no_warnings(pytester: pytest.Pytester) -> None:
    """The fixtures import the broker (and kafka-python's schemas) on first use, quietly."""
    pytester.makepyfile(test_fixture=FIXTURE_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "warnings" not in out and "Warning" not in out, out
