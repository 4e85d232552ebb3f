"""The admin endpoint's clock and disk faults, as the Jepsen nemesis drives them on a broker
process: `POST /clock` shifts the broker's wall clock (what LogAppendTime stamps and transaction
timeouts follow) and back; `POST /faults/disk` makes the log dir's writes fail with EIO, which
takes it offline."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from odradek import clock
from odradek.testing import Broker

JUMP_MS = 3 * 3600 * 1000
DEADLINE_S = 20.0


@pytest.fixture
def broker() -> Iterator[Broker]:
    config = {
        "odradek.admin.listen": "127.0.0.1:0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    }
    with Broker(config=config) as b:
        try:
            yield b
        finally:
            clock.set_offset_ms(0)  # the clock is the process's, shared with other tests


def admin(b: Broker, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
    base = b.call(lambda s: s.admin_http.url)
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        answer: dict[str, object] = json.load(resp)
        return answer


def produce_one(b: Broker, topic: str, value: bytes) -> KafkaError | None:
    p = Producer({"bootstrap.servers": b.bootstrap, "retries": 0, "message.timeout.ms": 10000})
    errors: list[KafkaError | None] = []
    p.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(DEADLINE_S)
    assert len(errors) == 1
    return errors[0]


def test_log_append_time_follows_a_jumped_clock_both_ways(broker: Broker) -> None:
    topic = broker.create_topic("stamped", config={"message.timestamp.type": "LogAppendTime"})
    windows = []
    for offset in (-JUMP_MS, JUMP_MS, 0):
        answer = admin(broker, "/clock", {"offset_ms": offset})
        assert answer["offset_ms"] == offset
        before = int(time.time() * 1000)
        assert produce_one(broker, topic, str(offset).encode()) is None
        windows.append((before + offset, int(time.time() * 1000) + offset))
    assert admin(broker, "/clock")["offset_ms"] == 0
    # `odradek fault clock` is the endpoint's client
    url = broker.call(lambda s: s.admin_http.url)
    argv = [sys.executable, "-m", "odradek", "fault", "clock", "--admin", url, "--json"]
    shown = json.loads(subprocess.run([*argv, "-60000"], capture_output=True, check=True).stdout)
    assert shown["offset_ms"] == -60000 == clock.offset_ms()
    clock.set_offset_ms(0)

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "clock", "log_level": 0})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 3 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.timestamp())
    finally:
        c.close()
    assert len(got) == 3
    for (kind, ts), (low, high) in zip(got, windows, strict=True):
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert low <= ts <= high, (ts, low, high)


def test_injected_eio_takes_the_log_dir_offline_until_cleared_and_restarted(
    broker: Broker,
) -> None:
    topic = broker.create_topic("eio")
    assert produce_one(broker, topic, b"before") is None
    assert admin(broker, "/faults/disk", {"error": "EIO", "ops": ["write"]}) == {"offline_dirs": []}
    error = produce_one(broker, topic, b"during")
    assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR
    # clearing the fault does not bring the dir back: as Kafka's, that takes a restart
    offline = admin(broker, "/faults/disk", {"error": None})["offline_dirs"]
    assert offline == broker.call(lambda s: s.logs.dirs)
    for bad in ({"error": "EIO", "ops": ["read"]}, {"error": "ENOTANERRNO"}, {"ops": []}):
        with pytest.raises(urllib.error.HTTPError) as raised:
            admin(broker, "/faults/disk", bad)
        assert raised.value.code == 400
    broker.restart(abrupt=True)
    assert produce_one(broker, topic, b"after") is None


def test_a_forward_jump_times_out_the_open_transaction_as_kafkas_would(broker: Broker) -> None:
    """Kafka's transaction coordinator times transactions out by its wall clock
    (TransactionStateManager: time.milliseconds()): a jump past transaction.timeout.ms aborts
    the open one and fences its producer."""
    topic = broker.create_topic("txn-jump")
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "jumper",
            "transaction.timeout.ms": 60000,
            "log_level": 0,
        }
    )
    p.init_transactions(DEADLINE_S)
    p.begin_transaction()
    p.produce(topic, b"in doubt")
    p.flush(DEADLINE_S)

    def state() -> str:
        return broker.call(lambda s: s.txn_coordinator.txns["jumper"].state.display)

    assert state() == "Ongoing"
    admin(broker, "/clock", {"offset_ms": 5 * 60 * 1000})
    deadline = time.monotonic() + DEADLINE_S
    while state() == "Ongoing" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state() in ("PrepareAbort", "CompleteAbort")
    with pytest.raises(KafkaException):
        p.commit_transaction(DEADLINE_S)
