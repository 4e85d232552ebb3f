"""Fault injection through odradek.testing.Broker, observed by real clients."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, TopicPartition

from odradek.testing import Broker


def consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0
) -> list[tuple[int, int, bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out += [(tp.partition, m.offset, m.value) for m in msgs]
        # one more poll: nothing beyond what was expected may show up
        for tp, msgs in consumer.poll(timeout_ms=300).items():
            out += [(tp.partition, m.offset, m.value) for m in msgs]
        return out
    finally:
        consumer.close()


@pytest.fixture
def broker():
    with Broker(topics={"orders": 2}) as b:
        yield b


@pytest.mark.parametrize("error", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
def test_idempotent_producer_rides_through_injected_errors_exactly_once(broker, error):
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 0,
            "retry.backoff.ms": 20,
            "message.timeout.ms": 30000,
        }
    )
    failures = []
    for i in range(20):
        producer.produce(
            "orders",
            value=b"m%d" % i,
            partition=i % 2,
            on_delivery=lambda err, msg: err and failures.append(err),
        )
    producer.flush(10)
    broker.fail("produce", error, count=3)
    for i in range(20, 60):
        producer.produce(
            "orders",
            value=b"m%d" % i,
            partition=i % 2,
            on_delivery=lambda err, msg: err and failures.append(err),
        )
    assert producer.flush(30) == 0
    assert failures == []
    got = consume_all(broker.bootstrap, "orders", 2, 60)
    values = sorted(v for _, _, v in got)
    assert values == sorted(b"m%d" % i for i in range(60))  # each exactly once
    for p in (0, 1):
        in_part = [v for part, _, v in sorted(got) if part == p]
        assert in_part == [b"m%d" % i for i in range(p, 60, 2)]  # in order


def test_injected_fetch_errors_and_delays_are_survived(broker):
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("orders", value=b"x%d" % i, partition=0)
    producer.flush(10)
    broker.fail("fetch", "NOT_LEADER_OR_FOLLOWER", count=2)
    broker.delay("fetch", 300, count=2)
    got = consume_all(broker.bootstrap, "orders", 1, 10)
    assert [v for _, _, v in got] == [b"x%d" % i for i in range(10)]


def test_abrupt_restart_keeps_every_acknowledged_record(broker):
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    for i in range(500):
        producer.produce("orders", value=b"r%d" % i, partition=i % 2)
    assert producer.flush(10) == 0
    port = broker.port
    broker.restart(abrupt=True)
    assert broker.port == port
    for i in range(500, 510):
        producer.produce("orders", value=b"r%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    got = consume_all(broker.bootstrap, "orders", 2, 510)
    assert sorted(v for _, _, v in got) == sorted(b"r%d" % i for i in range(510))
    offsets = {p: [o for part, o, _ in sorted(got) if part == p] for p in (0, 1)}
    assert offsets[0] == list(range(255)) and offsets[1] == list(range(255))


def test_pause_holds_requests_until_resume(broker):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        broker.pause()
        import threading

        result: list[object] = []
        t = threading.Thread(target=lambda: result.append(admin.list_topics()))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not result  # held while paused
        broker.resume()
        t.join(10)
        assert result and "orders" in result[0]
    finally:
        admin.close()


def test_dropped_connections_reconnect(broker):
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    producer.produce("orders", value=b"a", partition=0)
    assert producer.flush(10) == 0
    assert broker.drop_connections() >= 1
    producer.produce("orders", value=b"b", partition=0)
    assert producer.flush(20) == 0
    got = consume_all(broker.bootstrap, "orders", 1, 2)
    assert [v for _, _, v in got] == [b"a", b"b"]


def test_consumer_group_survives_dropped_connections(broker):
    # idempotent: after a dropped connection librdkafka resends the produce requests that were
    # out, which a plain producer may write twice (the broker had appended them); the broker
    # deduplicates an idempotent producer's resends, so every record is in the log once
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "survivors",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["orders"])
    seen: list[bytes] = []

    def poll_until(n: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(set(seen)) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append(msg.value())
                consumer.commit(msg, asynchronous=False)

    try:
        for i in range(20):
            producer.produce("orders", value=b"g%d" % i, partition=i % 2)
        producer.flush(10)
        poll_until(20)
        assert len(seen) == 20
        for _ in range(2):
            assert broker.drop_connections() >= 1
            done = len(set(seen))
            for i in range(done, done + 10):
                producer.produce("orders", value=b"g%d" % i, partition=i % 2)
            producer.flush(20)
            poll_until(done + 10)
        # exactly once: each record read once, none re-read after the rejoin (offsets are
        # committed synchronously per record) and none written twice
        assert sorted(seen) == sorted(b"g%d" % i for i in range(40))
        assert consumer.assignment() and {tp.partition for tp in consumer.assignment()} == {0, 1}
    finally:
        consumer.close()
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        committed = admin.list_group_offsets("survivors")["survivors"]
        assert sum(meta.offset for meta in committed.values()) == 40
    finally:
        admin.close()


def test_injected_add_partitions_to_txn_error_reaches_the_partitions(
    odradek_fresh_broker: Broker,
) -> None:
    """AddPartitionsToTxn v3 and below carry only partition_error_code: an injected error goes
    there (before, the answer said every partition was added)."""
    from odradek.testing.raw import RawClient
    from odradek.wire import protocol

    odradek_fresh_broker.fail("AddPartitionsToTxn", "NOT_COORDINATOR")
    req = protocol.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="t",
        v3_and_below_producer_id=0,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[
            protocol.AddPartitionsToTxnRequest.fields["v3_and_below_topics"].data_class(
                name="orders", partitions=[0, 1]
            )
        ],
    )
    with RawClient(odradek_fresh_broker.bootstrap) as client:
        resp = client.request(req, 3)
    codes = [
        (t.name, p.partition_index, p.partition_error_code)
        for t in resp.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    assert codes == [("orders", 0, 16), ("orders", 1, 16)]  # NOT_COORDINATOR
