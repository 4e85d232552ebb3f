"""Produce v0-2 with magic 0/1 message sets (issue 16), up-converted to v2 batches.

One broker for the module. Old producers write with each codec they have: kafka-python with
api_version (0, 9) (Produce v1, magic 0), (0, 10, 0) and (0, 10, 1) (Produce v2, magic 1);
librdkafka (confluent-kafka, kcat) with api.version.request=false and
broker.version.fallback=0.9.0 (Produce v1, magic 0; a fallback of 0.10 or more makes librdkafka
ask ApiVersions and use magic 2). A modern consumer then reads the same keys, values and
timestamps (magic 0: none, -1), the stored batches keep the producer's codec, and the records
count in odradek_topic_produce_message_conversions. A LogAppendTime topic stamps the records
and Produce v2 answers with the stamp. Raw requests: a bad inner CRC, inner offsets going
backwards, a magic 0 message with a timestamp, a bad second message, mixed magics, a zstd
wrapper get CORRUPT_MESSAGE / INVALID_RECORD and append nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.batch import iter_batches
from odradek.wire.compression import GZIP, SNAPPY, ZSTD, compress
from odradek.wire.errors import ErrorCode
from odradek.wire.legacy_records import encode_message_set, write_message
from tests.broker.test_metrics import scrape

DEADLINE_S = 30.0
TS = 1_700_000_000_000
KP_CODECS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3}
OLD_APIS = [(0, 9), (0, 10, 0), (0, 10, 1)]
# librdkafka 2.x sizes its Metadata v0 parse buffer at 4x the response's bytes, too little for
# one short topic ("tmpabuf memory shortage", a client bug a 0.9 broker would meet too): a long
# topic name makes the response large enough.
RDK_TOPIC = "librdkafka-fallback-0.9.0-produces-magic-0-message-sets"
KCAT = shutil.which("kcat")
Produce = protocol.ProduceRequest


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config={"metrics.listen": "127.0.0.1:0"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = [NewTopic(t, 1, 1) for t in ("kp", RDK_TOPIC, "kcat", "raw")]
        topics.append(NewTopic("lat", 1, 1, config={"message.timestamp.type": "LogAppendTime"}))
        for fut in admin.create_topics(topics).values():
            fut.result(30)
        yield b


def consume(broker: Broker, topic: str, n: int) -> list[tuple[int, bytes | None, bytes, Any]]:
    """(offset, key, value, (timestamp type, timestamp)) of the first n records, by a modern
    client."""
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "modern", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes, Any]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value(), m.timestamp()))
        return out
    finally:
        c.close()


def stored_batches(broker: Broker, topic: str) -> list[tuple[int, int, int, int]]:
    """(base offset, records, codec, producer id) of each v2 batch in the partition, read with
    Fetch v4 up to the high watermark."""
    F = protocol.FetchRequest
    out: list[tuple[int, int, int, int]] = []
    offset = 0
    with RawClient(broker.bootstrap) as raw:
        while True:
            req = F(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                topics=[
                    F.FetchTopic(
                        topic=topic,
                        partitions=[
                            F.FetchTopic.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            )
            part = raw.request(req, 4).responses[0].partitions[0]
            assert part.error_code == 0
            for _p, h in iter_batches(part.records or b""):
                out.append((h.base_offset, h.records_count, h.compression, h.producer_id))
                offset = h.base_offset + h.records_count
            if offset >= part.high_watermark:
                return out


def conversions(broker: Broker, topic: str) -> float:
    """odradek_topic_produce_message_conversions for the topic, scraped."""
    key = ("odradek_topic_produce_message_conversions_total", (("topic", topic),))
    return scrape(broker.server.metrics.port).get(key, 0.0)


def test_kafka_python_old_producers_every_codec(broker: Broker) -> None:
    expected = []
    for api in OLD_APIS:
        for codec in KP_CODECS:
            p = KafkaProducer(
                bootstrap_servers=broker.bootstrap,
                api_version=api,
                compression_type=codec,
                linger_ms=1000,  # flush() sends the three records as one message set
            )
            try:
                futures = []
                for i in range(3):
                    key = None if i == 1 else b"k%d" % i
                    value = b"%r-%s-%d" % (api, str(codec).encode(), i)
                    futures.append(p.send("kp", key=key, value=value, timestamp_ms=TS + i))
                    # magic 0 has no timestamp: CreateTime -1 in the v2 batch, as Kafka's
                    ts = (1, -1) if api == (0, 9) else (1, TS + i)
                    expected.append((key, value, ts))
                p.flush(DEADLINE_S)
                offsets = [f.get(DEADLINE_S).offset for f in futures]
            finally:
                p.close()
            first = len(expected) - 3
            assert offsets == [first, first + 1, first + 2]
    got = consume(broker, "kp", len(expected))
    assert [(k, v, ts) for _o, k, v, ts in got] == expected
    assert [o for o, *_ in got] == list(range(len(expected)))
    # one v2 batch per message set, with the producer's codec and no producer id
    batches = stored_batches(broker, "kp")
    codecs = [c for _api in OLD_APIS for c in KP_CODECS.values()]
    assert batches == [(3 * i, 3, codec, -1) for i, codec in enumerate(codecs)]
    assert conversions(broker, "kp") == len(expected)


def test_log_append_time_topic(broker: Broker) -> None:
    before = int(time.time() * 1000)
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1), compression_type="gzip"
    )
    try:
        futures = [p.send("lat", value=b"v%d" % i, timestamp_ms=TS) for i in range(3)]
        p.flush(DEADLINE_S)
        stamps = {f.get(DEADLINE_S).timestamp for f in futures}  # Produce v2's log_append_time
    finally:
        p.close()
    after = int(time.time() * 1000)
    (stamp,) = stamps
    assert before <= stamp <= after
    got = consume(broker, "lat", 3)
    assert [(v, ts) for _o, _k, v, ts in got] == [(b"v%d" % i, (2, stamp)) for i in range(3)]


def test_librdkafka_fallback_producers(broker: Broker) -> None:
    """Fallback 0.9.0: Produce v1 with magic 0 (no timestamps); fallback 0.10.0: librdkafka asks
    ApiVersions after all and produces magic 2, timestamps kept."""
    expected = []
    errors: list[Any] = []
    runs = [("0.9.0", codec) for codec in ("none", "gzip", "snappy", "lz4")]
    runs.append(("0.10.0", "gzip"))
    for fallback, codec in runs:
        p = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "api.version.request": False,
                "broker.version.fallback": fallback,
                "compression.codec": codec,
                "linger.ms": 1000,
            }
        )
        for i in range(3):
            key, value = b"k%d" % i, b"rdk-%s-%s-%d" % (fallback.encode(), codec.encode(), i)
            p.produce(
                RDK_TOPIC,
                key=key,
                value=value,
                partition=0,
                timestamp=TS + i,  # magic 0 cannot carry it
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )
            expected.append((key, value, (1, -1 if fallback == "0.9.0" else TS + i)))
        p.poll(0)
        assert p.flush(DEADLINE_S) == 0
        assert not errors
    got = consume(broker, RDK_TOPIC, len(expected))
    assert [(k, v, ts) for _o, k, v, ts in got] == expected
    batches = stored_batches(broker, RDK_TOPIC)
    # one magic-0 message set per 0.9.0 run, with its codec
    assert [(n, c) for _b, n, c, _p in batches[:4]] == [(3, 0), (3, 1), (3, 2), (3, 3)]
    # the 0.10.0 run's records, in as many magic-2 batches as librdkafka made (a slow start can
    # split them; it sends a batch uncompressed when gzip would not make it smaller)
    assert sum(n for _b, n, _c, _p in batches[4:]) == 3
    assert conversions(broker, RDK_TOPIC) == 12  # the magic-2 records were not converted


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_fallback_0_9_producer(broker: Broker) -> None:
    assert KCAT is not None
    for codec in ("gzip", "snappy"):
        proc = subprocess.run(
            [KCAT, *broker.kcat_args(), "-P", "-t", "kcat", "-p", "0", "-K", ":", "-z", codec]
            + ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"],
            input=b"".join(b"k%d:kcat-%s-%d\n" % (i, codec.encode(), i) for i in range(3)),
            capture_output=True,
            timeout=DEADLINE_S,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    got = consume(broker, "kcat", 6)
    assert [(k, v) for _o, k, v, _ts in got] == [
        (b"k%d" % i, b"kcat-%s-%d" % (c, i)) for c in (b"gzip", b"snappy") for i in range(3)
    ]
    # each run's records in batches of its codec (one wrapper message per run, unless kcat's
    # linger ran out between lines on a loaded machine: then a batch per line)
    codecs = [c for _b, n, c, _p in stored_batches(broker, "kcat") for _ in range(n)]
    assert codecs == [GZIP] * 3 + [SNAPPY] * 3


# -- raw requests ------------------------------------------------------------------------------


def produce(raw: RawClient, records: bytes, version: int, acks: int = 1) -> Any:
    """The partition's answer (None for acks=0, which gets none)."""
    req = Produce(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            Produce.TopicProduceData(
                name="raw",
                partition_data=[
                    Produce.TopicProduceData.PartitionProduceData(index=0, records=records)
                ],
            )
        ],
    )
    if acks == 0:
        raw.send(raw.encode(req, version)[1])
        return None
    return raw.request(req, version).responses[0].partition_responses[0]


def wrapper(inner: bytes | bytearray, magic: int = 1, codec: int = GZIP, offset: int = 0) -> bytes:
    out = bytearray()
    write_message(out, offset, magic, codec, TS, None, compress(codec, inner))
    return bytes(out)


def bad_inner_crc() -> bytes:
    inner = bytearray(encode_message_set([(i, TS, None, b"v%d" % i) for i in range(3)], 1))
    inner[-1] ^= 0xFF
    return wrapper(inner)


def inner_offsets_backwards() -> bytes:
    inner = bytearray()
    for rel in (0, 2, 1):
        write_message(inner, rel, 1, 0, TS, None, b"v")
    return wrapper(inner, offset=2)


def magic0_with_timestamp() -> bytes:
    msg = bytearray(encode_message_set([(0, TS, b"k", b"v")], 1))
    msg[16] = 0  # magic 0 over magic 1's layout: the timestamp field is still there
    msg[12:16] = zlib.crc32(msg[16:]).to_bytes(4, "big")
    return bytes(msg)


def bad_second_message() -> bytes:
    good = encode_message_set([(0, TS, None, b"good")], 1)
    bad = bytearray(encode_message_set([(1, TS, None, b"bad")], 1))
    bad[-1] ^= 0xFF
    return good + bytes(bad)


def mixed_magic() -> bytes:
    return encode_message_set([(0, -1, None, b"a")], 0) + encode_message_set(
        [(1, TS, None, b"b")], 1
    )


def zstd_wrapper() -> bytes:
    out = bytearray()
    inner = encode_message_set([(0, TS, None, b"z")], 1)
    write_message(out, 0, 1, ZSTD, TS, None, compress(ZSTD, inner))
    return bytes(out)


HOSTILE = [
    (bad_inner_crc, ErrorCode.CORRUPT_MESSAGE),
    (inner_offsets_backwards, ErrorCode.INVALID_RECORD),
    (magic0_with_timestamp, ErrorCode.INVALID_RECORD),
    (bad_second_message, ErrorCode.CORRUPT_MESSAGE),
    (mixed_magic, ErrorCode.INVALID_RECORD),
    (zstd_wrapper, ErrorCode.INVALID_RECORD),
]


def test_hostile_legacy_sets_append_nothing(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as raw:
        ok = produce(raw, encode_message_set([(0, -1, b"k", b"first")], 0), 0)
        assert (ok.error_code, ok.base_offset) == (0, 0)
        for make, code in HOSTILE:
            for version in (0, 2):
                part = produce(raw, make(), version)
                assert part.error_code == code, (make.__name__, version, part)
        # a legacy set in Produce v3 is refused as before: v3 takes one magic-2 batch
        v3 = produce(raw, encode_message_set([(0, TS, None, b"v3")], 1), 3)
        assert v3.error_code == ErrorCode.INVALID_RECORD
        # acks=0: no answer, and the next request is answered in order
        snappy = wrapper(encode_message_set([(0, TS, None, b"a0")], 1), codec=SNAPPY)
        assert produce(raw, snappy, 2, acks=0) is None
        last = produce(raw, encode_message_set([(0, TS, None, b"last")], 1), 1)
        assert (last.error_code, last.base_offset) == (0, 2)
    with RawClient(broker.bootstrap) as raw:
        # acks=0 and an error: no answer to carry it, so the connection closes (as Kafka)
        assert produce(raw, bad_inner_crc(), 0, acks=0) is None
        assert raw.outcome() == "closed"
    got = consume(broker, "raw", 3)
    assert [(o, v) for o, _k, v, _ts in got] == [(0, b"first"), (1, b"a0"), (2, b"last")]
    assert conversions(broker, "raw") == 3
