"""The broker-process harness itself: start, ready line, SIGTERM, kill -9, restart, bad config."""

from __future__ import annotations

import re
import signal
import socket
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer

from compat_tests.harness import BrokerError, BrokerProcess, free_port, unique_name

FreshBroker = Callable[..., BrokerProcess]


def _accepts_connections(broker: BrokerProcess) -> bool:
    try:
        with socket.create_connection((broker.host, broker.port), timeout=5):
            return True
    except OSError:
        return False


def test_session_broker_answers_a_real_client(broker: BrokerProcess) -> None:
    assert broker.running
    assert broker.bootstrap == f"127.0.0.1:{broker.port}"
    assert broker.ready_line is not None and "odradek ready" in broker.ready_line
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        assert isinstance(consumer.topics(), set)
    finally:
        consumer.close()


@pytest.mark.parametrize("broker", [{"num.partitions": "3"}], indirect=True)
def test_session_broker_takes_overrides(broker: BrokerProcess) -> None:
    assert broker.running
    assert "num.partitions=3" in broker.command()


def test_sigterm_stops_cleanly(fresh_broker: FreshBroker) -> None:
    b = fresh_broker()
    assert _accepts_connections(b)
    assert b.stop() == 0
    assert not b.running
    assert not _accepts_connections(b)


def test_kill_and_restart_keep_port_and_data_dir(fresh_broker: FreshBroker) -> None:
    b = fresh_broker()
    port, data_dir = b.port, b.data_dir
    assert b.kill() == -signal.SIGKILL
    b.start()
    assert (b.port, b.data_dir) == (port, data_dir)
    assert _accepts_connections(b)
    b.restart()
    assert b.port == port and _accepts_connections(b)
    assert b.restart(hard=True) is b and b.starts == 4
    assert b.log_text().count("==== start #") == 4


def test_failed_start_raises_with_the_broker_log(fresh_broker: FreshBroker) -> None:
    with pytest.raises(BrokerError) as info:
        # a value the broker refuses (an unknown key is only warned about, as Kafka does)
        fresh_broker({"num.partitions": "many"})
    message = str(info.value)
    assert "before it was ready" in message
    assert "num.partitions" in message  # the broker's own complaint, from its log


def test_busy_fixed_port_is_reported(fresh_broker: FreshBroker) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(BrokerError, match="cannot listen"):
            fresh_broker(port=busy.getsockname()[1])


def test_free_port_and_unique_names() -> None:
    assert 0 < free_port() < 65536
    names = {unique_name("test_x[gzip-3 brokers]") for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"[A-Za-z0-9-]{1,120}", n) for n in names)


def test_topic_name_is_a_legal_kafka_name(topic_name: str) -> None:
    assert re.fullmatch(r"[A-Za-z0-9-]+", topic_name)
    assert topic_name.startswith("test_topic_name".replace("_", "-"))
