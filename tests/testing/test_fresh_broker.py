"""A broker per test at scale (issue 17): the `odradek_fresh_broker` fixture and the shared
event-loop thread under `Broker(shared_loop=True)`.

A user's session of many tests, each with its own broker used by a real client, passes with
every broker isolated (own port, nothing another test produced) and leaves nothing behind: no
broker thread, no open file or socket, no listening port, no data dir. How fast it runs is
`python -m bench.startup`'s business, not this test's.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import socket
import threading

import confluent_kafka
import pytest

from odradek.testing import Broker
from odradek.testing.loop_thread import SHARED_NAME, shared_loop_running, stop_shared_loop

pytest_plugins = ["pytester"]

TESTS = 50

SESSION_CONFTEST = """
import json, os, socket, threading

import pytest

SEEN = []  # (port, data dir) of every test's broker
BASELINE = {}


@pytest.fixture
def broker(odradek_fresh_broker):
    SEEN.append((odradek_fresh_broker.port, odradek_fresh_broker.data_dir))
    yield odradek_fresh_broker
    if len(SEEN) == 1:  # the first test is over: what is open from now on is the baseline
        BASELINE["fds"] = len(os.listdir("/proc/self/fd"))


@pytest.hookimpl(trylast=True)  # after the odradek plugin's own sessionfinish
def pytest_sessionfinish(session):
    def listening(port):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    report = {
        "dirs": [d for _, d in SEEN],
        "still_listening": [port for port, _ in SEEN if listening(port)],
        "dirs_left": [d for _, d in SEEN if os.path.exists(d)],
        "threads": sorted(t.name for t in threading.enumerate()),
        "fds_after_first": BASELINE.get("fds"),
        "fds_at_end": len(os.listdir("/proc/self/fd")),
    }
    with open(os.environ["ODRADEK_REPORT"], "w") as f:
        json.dump(report, f)
"""

SESSION_TESTS = """
import confluent_kafka
import pytest

CLIENT = {"socket.nagle.disable": True, "enable.metrics.push": False, "fetch.wait.max.ms": 10}
TESTS = {tests}


@pytest.mark.parametrize("n", range(TESTS))
def test_own_broker(broker, n):
    # every test uses the same topic name and group: a broker shared between tests would show
    # the records (or the committed offsets) of the tests before
    broker.create_topic("orders")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, **CLIENT})
    producer.produce("orders", b"record of test %d" % n)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", **CLIENT}
    )
    consumer.assign([confluent_kafka.TopicPartition("orders", 0, 0)])
    try:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (0, b"record of test %d" % n)
    finally:
        consumer.close()
"""


def test_a_session_of_tests_each_with_its_own_broker(
    pytester: pytest.Pytester, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report_path = tmp_path / "report.json"
    pytester.makeconftest(SESSION_CONFTEST)
    pytester.makepyfile(test_many=SESSION_TESTS.replace("{tests}", str(TESTS)))
    monkeypatch.setenv("ODRADEK_REPORT", str(report_path))
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=TESTS)
    report = json.loads(report_path.read_text())
    assert len(set(report["dirs"])) == TESTS  # a broker of its own for every test
    assert report["still_listening"] == []
    assert report["dirs_left"] == []
    assert SHARED_NAME not in report["threads"], report["threads"]
    # every broker's sockets, epoll and data-dir lock are closed again
    assert report["fds_at_end"] <= report["fds_after_first"], report


async def _forever() -> None:
    await asyncio.Event().wait()


def _roundtrip(broker: Broker, value: bytes) -> bytes | None:
    client = {"bootstrap.servers": broker.bootstrap, "socket.nagle.disable": True}
    producer = confluent_kafka.Producer(client)
    producer.produce("t", value)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        {**client, "group.id": "g", "enable.auto.commit": False, "fetch.wait.max.ms": 10}
    )
    consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
    try:
        message = consumer.poll(10)
        return None if message is None or message.error() else message.value()
    finally:
        consumer.close()


def test_shared_loop_brokers_stop_alone_and_leave_no_task() -> None:
    """A shared-loop broker's stop ends the tasks it started and nothing of its neighbour's;
    the neighbour keeps serving; a broker that fails to start leaves the loop usable."""
    first = Broker(topics={"t": 1}, shared_loop=True, tmpfs=True).start()
    second = Broker(topics={"t": 1}, shared_loop=True).start()
    try:
        assert first.call(lambda s: threading.current_thread().name) == SHARED_NAME
        assert second.call(lambda s: threading.current_thread().name) == SHARED_NAME
        left = first.call(lambda s: asyncio.get_running_loop().create_task(_forever()))
        kept = second.call(lambda s: asyncio.get_running_loop().create_task(_forever()))
        first.stop()
        assert not os.path.exists(first.data_dir)
        assert second.call(lambda s: (left.cancelled(), kept.done())) == (True, False)
        assert _roundtrip(second, b"still here") == b"still here"

        # the port is taken: the start fails, and what it had taken is let go
        clash = Broker(port=second.port, shared_loop=True)
        with pytest.raises(OSError):
            clash.start()
        with Broker(data_dir=clash.data_dir, shared_loop=True) as again:  # dir not locked
            assert again.port != second.port
        clash.stop()
    finally:
        first.stop()
        second.stop()
    assert kept.cancelled() and not os.path.exists(second.data_dir)
    stop_shared_loop()
    assert not shared_loop_running()
    assert SHARED_NAME not in {t.name for t in threading.enumerate()}
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", second.port)) != 0


def test_first_coordinator_lookup_is_answered_once_the_topic_exists() -> None:
    """The first FindCoordinator of a new broker (group or transaction) starts creating the
    internal topic and is answered with the coordinator once it exists, rather than with
    COORDINATOR_NOT_AVAILABLE and a client backoff (a second with librdkafka) per new broker."""
    from odradek.testing.raw import RawClient
    from odradek.wire import protocol
    from odradek.wire.errors import ErrorCode

    # Kafka's default 50 partitions per internal topic: opened one per event-loop iteration
    with Broker(shared_loop=True, tmpfs=True) as broker:
        with RawClient(broker.bootstrap) as client:
            for key_type, topic in ((0, "__consumer_offsets"), (1, "__transaction_state")):
                req = protocol.FindCoordinatorRequest(key="k", key_type=key_type)
                resp = client.request(req, 1)
                assert (resp.error_code, resp.port) == (ErrorCode.NONE, broker.port), topic
                assert broker.call(lambda s, t=topic: s.topics.info(t) is not None)
