"""A Fetch answer of several MiB of file regions to a reader that takes it slowly: the broker
sends each region on the socket while it takes it (os.sendfile under TCP_CORK) and hands the
rest to the event loop when the socket is full; the reader gets every batch, in order, whole."""

from __future__ import annotations

import os
import socket

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.batch import crc_ok, parse_header
from odradek.wire.records import build_batch, decode_records
from tests.broker.test_fetch_sessions import V, fetch_request

BATCHES = 10
RECORDS = 90
VALUE = 10_000  # 90 x 10 kB: a 0.9 MB batch, under message.max.bytes


def produce_batch(client: RawClient, topic: str, values: list[bytes]) -> None:
    batch = build_batch([(None, v, [], 0) for v in values])
    PR = protocol.ProduceRequest
    part = PR.TopicProduceData.PartitionProduceData(index=0, records=batch)
    req = PR(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[PR.TopicProduceData(name=topic, partition_data=[part])],
    )
    resp = client.request(req, 9)
    assert resp.responses[0].partition_responses[0].error_code == 0


def test_a_multi_megabyte_answer_to_a_slow_reader_arrives_whole() -> None:
    sent = [[os.urandom(VALUE) for _ in range(RECORDS)] for _ in range(BATCHES)]
    with Broker(topics={"big": 1}) as broker, RawClient(broker.bootstrap) as client:
        for values in sent:
            produce_batch(client, "big", values)
        # a 256 KiB receive buffer: the 9 MB answer is more than it and the broker's send buffer
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        req = fetch_request(
            0, -1, [("big", 0, 0)], max_bytes=64 << 20, partition_max_bytes=64 << 20
        )
        resp = client.request(req, V)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0
    data = memoryview(p.records)
    pos = 0
    got: list[list[bytes]] = []
    while pos < len(data):
        header = parse_header(data, pos)
        assert crc_ok(data, pos, header)
        _, records = decode_records(data, pos)
        got.append([bytes(r.value or b"") for r in records])
        pos += header.size
    assert pos == len(data)
    assert got == sent


def test_the_brokers_fetch_max_bytes_caps_what_a_consumer_asks_for() -> None:
    """Kafka's broker config fetch.max.bytes bounds every Fetch answer whatever max_bytes the
    request carries (the first batch still goes whole, KIP-74); the rest comes on the next Fetch."""
    sent = [[os.urandom(VALUE) for _ in range(RECORDS)] for _ in range(3)]
    batch_size = len(build_batch([(None, v, [], 0) for v in sent[0]]))
    config = {"fetch.max.bytes": batch_size + batch_size // 2}
    with Broker(topics={"big": 1}, config=config) as broker, RawClient(broker.bootstrap) as c:
        for values in sent:
            produce_batch(c, "big", values)
        req = fetch_request(
            0, -1, [("big", 0, 0)], max_bytes=64 << 20, partition_max_bytes=64 << 20
        )
        p = c.request(req, V).responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 3 * RECORDS
    data = memoryview(p.records)
    # the answer stops at the cap (its tail a partial batch, as Kafka's file slice leaves it,
    # which clients drop); without the cap it carried all three batches
    assert len(data) == config["fetch.max.bytes"]
    header = parse_header(data, 0)
    assert crc_ok(data, 0, header) and header.last_offset_delta == RECORDS - 1
