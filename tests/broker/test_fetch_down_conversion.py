"""Fetch v0-3 (issue 16): old clients read v2 batches down-converted to magic 0/1 message sets.

One broker for the module. Records (keys, null keys, timestamps, headers) are produced by a
modern client with each codec; kafka-python with an old `api_version` (Fetch v1 / magic 0 for
0.9, v2 and v3 / magic 1 for 0.10.0 and 0.10.1), librdkafka (confluent-kafka, kcat) with
api.version.request=false and broker.version.fallback=0.9.0 read them from the beginning and
from an offset, and see what a modern consumer sees (timestamps from magic 1 on, headers never).
Transactions: an old fetcher never gets aborted or undecided data. Raw requests check the
answers' framing rules (zstd refused, a first message larger than the limit sent whole).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.protocol.consumer.fetch import FetchRequest

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire.errors import ErrorCode
from odradek.wire.legacy_records import decode_message_set
from tests.broker.test_metrics import scrape

CODECS = {"gz": "gzip", "sn": "snappy", "lz": "lz4", "no": "none", "la": "gzip"}
N = 60
FROM = 25  # the offset consumers seek to
DEADLINE_S = 30.0

# (key, value, headers) of record i; every 10th key is null
Row = tuple[int, bytes | None, bytes, int | None]


def record(i: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    key = None if i % 10 == 0 else b"k%d" % i
    return key, b"value-%d-" % i + bytes(i * 7), [("h", b"%d" % i)]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config={"metrics.listen": "127.0.0.1:0"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = [NewTopic(t, 1, 1) for t in CODECS if t != "la"]
        topics.append(NewTopic("la", 1, 1, config={"message.timestamp.type": "LogAppendTime"}))
        topics += [NewTopic("zs", 1, 1), NewTopic("txn", 1, 1), NewTopic("big", 1, 1)]
        for fut in admin.create_topics(topics).values():
            fut.result(30)
        for topic, codec in CODECS.items():
            p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec})
            for i in range(N):
                key, value, headers = record(i)
                p.produce(
                    topic, key=key, value=value, headers=headers, timestamp=1_700_000_000_000 + i
                )
                if i % 20 == 19:
                    assert p.flush(30) == 0  # three batches
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "zstd"})
        p.produce("zs", value=b"z" * 100)
        assert p.flush(30) == 0
        yield b


_MODERN: dict[tuple[str, str], list[tuple[int, bytes | None, bytes, int, Any]]] = {}


def modern(broker: Broker, topic: str) -> list[tuple[int, bytes | None, bytes, int, Any]]:
    """What a current client reads: (offset, key, value, timestamp, headers)."""
    key = (broker.bootstrap, topic)
    if key not in _MODERN:
        _MODERN[key] = _read_modern(broker, topic)
    return _MODERN[key]


def _read_modern(broker: Broker, topic: str) -> list[tuple[int, bytes | None, bytes, int, Any]]:
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "modern", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes, int, Any]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < N and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append((m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()))
        return out
    finally:
        c.close()


def old_kafka_python(
    broker: Broker, api_version: tuple[int, ...], topics: list[str], seek: int | None
) -> dict[str, list[Row]]:
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=2048,  # several fetches, and cut / padded answers
    )
    try:
        tps = [KTP(t, 0) for t in topics]
        c.assign(tps)
        for tp in tps:  # explicit, so no ListOffsets is needed
            c.seek(tp, seek or 0)
        want = N - (seek or 0)
        got: dict[str, list[Row]] = {t: [] for t in topics}
        deadline = time.monotonic() + DEADLINE_S
        while any(len(v) < want for v in got.values()) and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    assert not m.headers  # the old formats have none
                    got[tp.topic].append((m.offset, m.key, m.value, m.timestamp))
        return got
    finally:
        c.close()


@pytest.mark.parametrize(
    "api_version,timestamps", [((0, 9), False), ((0, 10, 0), True), ((0, 10, 1), True)]
)
def test_kafka_python_old_versions_read_what_modern_clients_read(
    broker: Broker, api_version: tuple[int, ...], timestamps: bool
) -> None:
    topics = list(CODECS)
    expected = {t: modern(broker, t) for t in topics}
    for t in topics:
        assert len(expected[t]) == N
        assert all(h == [("h", b"%d" % o)] for o, _k, _v, _ts, h in expected[t])
    assert expected["la"][0][3] != 1_700_000_000_000  # LogAppendTime: the broker's clock
    for seek in (None, FROM):
        got = old_kafka_python(broker, api_version, topics, seek)
        for t in topics:
            want = [
                (o, k, v, ts if timestamps else None)
                for o, k, v, ts, _h in expected[t]
                if o >= (seek or 0)
            ]
            assert got[t] == want, (t, seek)


def test_librdkafka_fallback_0_9_reads_magic_0(broker: Broker) -> None:
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "old-rdkafka",
        "enable.auto.commit": False,
        "api.version.request": False,
        "broker.version.fallback": "0.9.0",
        "max.partition.fetch.bytes": 2048,
    }
    # one topic per consumer: librdkafka fails to parse a Metadata v0 answer naming two
    for topic, start in (("gz", OFFSET_BEGINNING), ("lz", FROM)):
        first = 0 if start == OFFSET_BEGINNING else start
        c = Consumer(conf)
        try:
            c.assign([TopicPartition(topic, 0, start)])
            got: list[tuple[int, bytes | None, bytes]] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < N - first and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                assert not m.error(), m.error()
                assert m.headers() is None
                got.append((m.offset(), m.key(), m.value()))
        finally:
            c.close()
        want = [(o, k, v) for o, k, v, _ts, _h in modern(broker, topic) if o >= first]
        assert got == want, topic


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_fallback_0_9_reads_from_an_offset(broker: Broker) -> None:
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-X", "api.version.request=false"]
        + ["-X", "broker.version.fallback=0.9.0", "-C", "-t", "sn", "-o", str(FROM), "-e"]
        + ["-f", "%o %k %S\n"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    want = []
    for i in range(FROM, N):
        key, value, _h = record(i)
        want.append(f"{i} {(key or b'').decode()} {len(value)}")
    assert lines == want


def test_aborted_and_open_transactions_are_not_delivered_to_old_fetchers(broker: Broker) -> None:
    def txn_producer(tid: str) -> Producer:
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        p.init_transactions(30)
        return p

    p = txn_producer("t1")
    p.begin_transaction()
    p.produce("txn", value=b"committed-1")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("txn", value=b"aborted")
    assert p.flush(30) == 0  # in the log before the abort (else librdkafka drops it unsent)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("txn", value=b"committed-2")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("txn", value=b"open-then-committed")
    p.flush(30)

    def read(want: int) -> list[bytes]:
        c = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            api_version=(0, 10, 1),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            c.assign([KTP("txn", 0)])
            c.seek(KTP("txn", 0), 0)
            values: list[bytes] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(values) < want and time.monotonic() < deadline:
                for msgs in c.poll(timeout_ms=300).values():
                    values += [m.value for m in msgs]
            return values
        finally:
            c.close()

    # the open transaction holds back what follows (an old fetcher reads up to the last stable
    # offset); the aborted record is left out, as are the markers
    for version in range(4):
        with RawClient(broker.bootstrap) as raw:
            part = fetch(raw, version, "txn", 0, 1 << 20)
        assert [m.value for m in complete_messages(part.records)] == [
            b"committed-1",
            b"committed-2",
        ]
    p.commit_transaction(30)
    assert read(3) == [b"committed-1", b"committed-2", b"open-then-committed"]


def complete_messages(records: bytes) -> list[Any]:
    """The messages of a v0-3 answer as a client reads them: a trailing partial message (a cut
    conversion or the padding) is dropped."""
    pos = 0
    while pos + 12 <= len(records):
        size = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        if pos + 12 + size > len(records):
            break
        pos += 12 + size
    return decode_message_set(records[:pos])


def fetch(raw: RawClient, version: int, topic: str, offset: int, part_max: int) -> Any:
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=part_max
                    )
                ],
            )
        ],
    )
    return raw.request(req, version).responses[0].partitions[0]


def test_raw_answers_zstd_refused_and_first_message_whole(broker: Broker) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("big", key=b"k", value=b"x" * 5000)
    assert p.flush(30) == 0
    p.produce("big", key=b"k2", value=b"y")
    assert p.flush(30) == 0
    with RawClient(broker.bootstrap) as raw:
        zstd = fetch(raw, 3, "zs", 0, 1 << 20)
        assert zstd.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
            # a limit far below the first message: it still comes whole (and alone)
            part = fetch(raw, version, "big", 0, 100)
            assert part.error_code == 0
            msgs = complete_messages(part.records)
            assert [(m.offset, m.magic, m.key, len(m.value)) for m in msgs] == [
                (0, magic, b"k", 5000)
            ]
            # gzip, three batches: a limit in the middle of the second gives whole messages
            part = fetch(raw, version, "gz", 0, 1500)
            offsets = [m.offset for m in complete_messages(part.records)]
            assert offsets and offsets == list(range(len(offsets)))


def test_down_conversion_metric_counts_records(broker: Broker) -> None:
    def converted() -> float:
        key = ("odradek_topic_fetch_message_conversions_total", (("topic", "no"),))
        return scrape(broker.server.metrics.port).get(key, 0.0)

    before = converted()
    got = old_kafka_python(broker, (0, 10, 1), ["no"], FROM)
    assert len(got["no"]) == N - FROM
    assert converted() >= before + N - FROM
