"""aiokafka against a real `odradek serve` process.

aiokafka speaks only the non-flexible request versions, so it exercises the broker's older
encodings: CreateTopics through AIOKafkaAdminClient, auto-creation through the producer's
metadata request, produce with acks 0 / 1 / all and every codec (acks=all with
enable_idempotence=True), and reads from the beginning, an offset, a timestamp and the end,
with a consumer that has no group. Each test drives one event loop with `asyncio.run`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import TopicAlreadyExistsError

from compat_tests.harness import BrokerProcess
from compat_tests.records import (
    COUNT,
    PARTITIONS,
    Rec,
    Written,
    assert_consumed,
    by_partition,
    make_records,
)

pytestmark = pytest.mark.compat

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = [0, 1, "all"]
WAIT_S = 20.0

T = TypeVar("T")


def seen(msg: Any) -> Rec:
    return Rec(msg.partition, msg.key, msg.value, tuple(msg.headers), msg.timestamp)


def assert_same(got: list, expected: list[Rec], start: dict[int, int] | None = None) -> None:
    """Per partition: exactly the expected records, in order, at consecutive offsets."""
    assert_consumed([(m.offset, seen(m)) for m in got], expected, start)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run one test body in a fresh event loop, bounded by a deadline."""

    async def bounded() -> T:
        return await asyncio.wait_for(fn(), timeout=3 * WAIT_S)

    return asyncio.run(bounded())


# -- client helpers ------------------------------------------------------------------------------


async def create_topic(broker: BrokerProcess, name: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def produce(broker: BrokerProcess, topic: str, records: list[Rec], **config: Any) -> list:
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=20, **config)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers),
            )
            for r in records
        ]
        return list(await asyncio.wait_for(asyncio.gather(*futures), WAIT_S))
    finally:
        await producer.stop()


def consumer(broker: BrokerProcess) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )


async def poll_n(cons: AIOKafkaConsumer, n: int, timeout: float = WAIT_S) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} records within {timeout}s"
        for msgs in (await cons.getmany(timeout_ms=200)).values():
            got.extend(msgs)
    return got


async def read_all(broker: BrokerProcess, topic: str, n: int, start: dict[int, int]) -> list:
    cons = consumer(broker)
    await cons.start()
    try:
        tps = [TopicPartition(topic, p) for p in start]
        cons.assign(tps)
        for tp in tps:
            cons.seek(tp, start[tp.partition])
        got = await poll_n(cons, n)
        assert await cons.getmany(timeout_ms=100) == {}, "more records than were produced"
        return got
    finally:
        await cons.stop()


# -- admin and auto-creation ---------------------------------------------------------------------


def test_admin_create_describe_topics_and_cluster(broker: BrokerProcess, topic_name: str) -> None:
    async def body() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic_name, 3, 1)])
            assert topic_name in await admin.list_topics()
            (desc,) = await admin.describe_topics([topic_name])
            assert desc["error_code"] == 0
            assert sorted(p["partition"] for p in desc["partitions"]) == [0, 1, 2]
            assert all(p["leader"] == 0 for p in desc["partitions"])
            cluster = await admin.describe_cluster()
            assert [b["node_id"] for b in cluster["brokers"]] == [0]
            assert cluster["controller_id"] == 0
            again = await admin.create_topics([NewTopic(topic_name, 1, 1)])
            assert [e[:2] for e in again.topic_errors] == [
                (topic_name, TopicAlreadyExistsError.errno)
            ]
        finally:
            await admin.close()

    run(body)


def test_producer_auto_creates_topic(broker: BrokerProcess, topic_name: str) -> None:
    async def body() -> None:
        records = make_records("auto", count=10, partitions=1)
        metas = await produce(broker, topic_name, records, enable_idempotence=True)
        assert [m.offset for m in metas] == list(range(10))
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            (desc,) = await admin.describe_topics([topic_name])
        finally:
            await admin.close()
        # auto-created with the broker's num.partitions (1 by default)
        assert [p["partition"] for p in desc["partitions"]] == [0]
        assert_same(await read_all(broker, topic_name, 10, {0: 0}), records)

    run(body)


# -- produce: every acks x every codec ----------------------------------------------------------


@pytest.mark.parametrize("acks", ACKS, ids=lambda a: f"acks={a}")
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    broker: BrokerProcess, topic_name: str, codec: str, acks: int | str
) -> None:
    async def body() -> None:
        await create_topic(broker, topic_name)
        records = make_records(f"{codec}-{acks}")
        metas = await produce(
            broker,
            topic_name,
            records,
            acks=acks,
            enable_idempotence=acks == "all",
            compression_type=None if codec == "none" else codec,
        )
        got = await read_all(broker, topic_name, len(records), dict.fromkeys(range(PARTITIONS), 0))
        assert_same(got, records)
        if acks != 0:
            assert {(m.partition, m.offset) for m in metas} == {
                (m.partition, m.offset) for m in got
            }

    run(body)


# -- reading: a topic written once per codec, read in several ways ------------------------------


@pytest.fixture(scope="module", params=CODECS)
def written(request: pytest.FixtureRequest, broker: BrokerProcess) -> Written:
    """A 3-partition topic holding COUNT records with timestamps 10 ms apart."""
    codec = request.param
    topic = f"aio-read-{codec}-{uuid.uuid4().hex[:8]}"
    base_ts = int(time.time() * 1000) - 3_600_000
    records = make_records(codec, base_ts=base_ts, step_ms=10)

    async def fill() -> None:
        await create_topic(broker, topic)
        await produce(
            broker,
            topic,
            records,
            enable_idempotence=True,
            compression_type=None if codec == "none" else codec,
        )

    run(fill)
    return Written(topic, records, base_ts)


def test_read_from_offset(broker: BrokerProcess, written: Written) -> None:
    start = dict.fromkeys(range(PARTITIONS), 7)  # inside a batch
    expected = [r for p, rs in by_partition(written.records).items() for r in rs[start[p] :]]
    got = run(lambda: read_all(broker, written.topic, len(expected), start))
    assert_same(got, expected, start)


def test_read_from_timestamp(broker: BrokerProcess, written: Written) -> None:
    tps = [TopicPartition(written.topic, p) for p in range(PARTITIONS)]

    async def body() -> None:
        cons = consumer(broker)
        await cons.start()
        try:
            # record i has timestamp base + 10 i and sits at offset i // 3 of partition i % 3
            found = await cons.offsets_for_times(dict.fromkeys(tps, written.base_ts + 305))
            assert [found[tp].offset for tp in tps] == [11, 10, 10]  # records 33, 31, 32
            assert found[tps[1]].timestamp == written.base_ts + 310
            past = await cons.offsets_for_times({tps[0]: written.base_ts + 10 * COUNT + 1000})
            assert past[tps[0]] is None
            cons.assign([tps[1]])
            cons.seek(tps[1], found[tps[1]].offset)
            got = await poll_n(cons, COUNT // PARTITIONS - 10)
            assert seen(got[0]) == written.records[31]
            assert [m.offset for m in got] == list(range(10, COUNT // PARTITIONS))
        finally:
            await cons.stop()

    run(body)


def test_list_offsets_earliest_latest(broker: BrokerProcess, written: Written) -> None:
    tps = [TopicPartition(written.topic, p) for p in range(PARTITIONS)]
    per_part = {p: len(rs) for p, rs in by_partition(written.records).items()}

    async def body() -> None:
        cons = consumer(broker)
        await cons.start()
        try:
            assert await cons.beginning_offsets(tps) == dict.fromkeys(tps, 0)
            assert await cons.end_offsets(tps) == {tp: per_part[tp.partition] for tp in tps}
        finally:
            await cons.stop()

    run(body)


def test_log_start_offset_moves_inside_a_batch(broker: BrokerProcess, topic_name: str) -> None:
    records = make_records("dr", count=30, partitions=1)
    tp = TopicPartition(topic_name, 0)

    async def body() -> None:
        await create_topic(broker, topic_name, partitions=1)
        for chunk in range(3):  # three sends of ten: three batches
            await produce(
                broker, topic_name, records[chunk * 10 : chunk * 10 + 10], compression_type="gzip"
            )
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            low = await admin.delete_records({tp: RecordsToDelete(before_offset=15)})
            assert low == {tp: 15}
        finally:
            await admin.close()
        cons = consumer(broker)
        await cons.start()
        try:
            assert await cons.beginning_offsets([tp]) == {tp: 15}
            assert await cons.end_offsets([tp]) == {tp: 30}
            cons.assign([tp])
            await cons.seek_to_beginning(tp)
            got = await poll_n(cons, 15)
            assert [m.offset for m in got] == list(range(15, 30))
            assert [seen(m) for m in got] == records[15:]
        finally:
            await cons.stop()

    run(body)


def test_read_from_end_sees_only_new_records(broker: BrokerProcess, topic_name: str) -> None:
    tps = [TopicPartition(topic_name, p) for p in range(2)]

    async def body() -> None:
        await create_topic(broker, topic_name, partitions=2)
        await produce(broker, topic_name, make_records("old", count=10, partitions=2))
        cons = consumer(broker)
        await cons.start()
        try:
            cons.assign(tps)
            await cons.seek_to_end(*tps)
            assert [await cons.position(tp) for tp in tps] == [5, 5]
            assert await cons.getmany(timeout_ms=200) == {}
            new = make_records("new", count=6, partitions=2)
            await produce(broker, topic_name, new, compression_type="lz4")
            assert_same(await poll_n(cons, 6), new, {0: 5, 1: 5})
        finally:
            await cons.stop()

    run(body)
