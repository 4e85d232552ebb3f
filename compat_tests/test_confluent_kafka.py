"""confluent-kafka (librdkafka) against a real `odradek serve` process.

Topics are created with the AdminClient or auto-created by the producer; records go out with
acks 0 / 1 / all and every codec (acks=all with enable.idempotence=true), and come back through a
consumer that only assigns (no group protocol): from the beginning, from an offset, from a
timestamp and from the end. ListOffsets is checked through `get_watermark_offsets`,
`offsets_for_times` and `AdminClient.list_offsets`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

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
ACKS = ["0", "1", "all"]
WAIT_S = 20.0


def seen(msg: Message) -> Rec:
    ts_type, ts = msg.timestamp()
    assert ts_type == 1, "CreateTime expected"  # TIMESTAMP_CREATE_TIME
    return Rec(msg.partition(), msg.key(), msg.value(), tuple(msg.headers() or ()), ts)


def assert_same(
    got: list[Message], expected: list[Rec], start: dict[int, int] | None = None
) -> None:
    """Per partition: exactly the expected records, in order, at consecutive offsets."""
    assert_consumed([(m.offset(), seen(m)) for m in got], expected, start)


# -- client helpers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(admin: AdminClient, name: str, partitions: int = PARTITIONS) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)], operation_timeout=WAIT_S
    )
    futures[name].result(timeout=WAIT_S)


def produce(broker: BrokerProcess, topic: str, records: list[Rec], **config: str) -> list[Message]:
    """Produce every record and wait for every delivery report; the reports in send order."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, **config})
    reports: dict[int, Message] = {}
    errors: list[KafkaError] = []

    def report(i: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err)
            reports[i] = msg

        return on_delivery

    for i, r in enumerate(records):
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp,
            headers=list(r.headers),
            on_delivery=report(i),
        )
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0, "records still queued after flush"
    assert not errors, errors
    return [reports[i] for i in range(len(records))]


def consumer(broker: BrokerProcess, **config: object) -> Consumer:
    # librdkafka wants a group.id even for a consumer that only assigns; it joins no group
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"unused-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
            **config,
        }
    )


def poll_n(cons: Consumer, n: int, timeout: float = WAIT_S) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} records within {timeout}s"
        for msg in cons.consume(num_messages=n - len(got), timeout=0.2):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            got.append(msg)
    return got


def read_all(broker: BrokerProcess, topic: str, n: int, start: dict[int, int]) -> list[Message]:
    cons = consumer(broker)
    try:
        cons.assign([TopicPartition(topic, p, off) for p, off in start.items()])
        got = poll_n(cons, n)
        extra = [m for m in cons.consume(num_messages=10, timeout=0.1) if m.error() is None]
        assert not extra, "more records than were produced"
        return got
    finally:
        cons.close()


# -- admin and auto-creation ---------------------------------------------------------------------


def test_admin_create_describe_topics_and_cluster(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=3)
    md = admin.list_topics(topic=topic_name, timeout=WAIT_S)
    topic = md.topics[topic_name]
    assert topic.error is None
    assert sorted(topic.partitions) == [0, 1, 2]
    assert all(
        p.leader == 0 and p.replicas == [0] and p.isrs == [0] for p in topic.partitions.values()
    )
    assert list(md.brokers) == [0] and md.controller_id == 0
    cluster = admin.describe_cluster().result(timeout=WAIT_S)
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0
    assert cluster.cluster_id
    again = admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name]
    with pytest.raises(KafkaException) as exc:
        again.result(timeout=WAIT_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_producer_auto_creates_topic(broker: BrokerProcess, topic_name: str) -> None:
    records = make_records("auto", count=10, partitions=1)
    reports = produce(broker, topic_name, records, **{"enable.idempotence": "true"})
    assert [m.offset() for m in reports] == list(range(10))
    # auto-created with the broker's num.partitions (1 by default)
    cons = consumer(broker)
    try:
        md = cons.list_topics(topic_name, timeout=WAIT_S)
    finally:
        cons.close()
    assert sorted(md.topics[topic_name].partitions) == [0]
    assert_same(read_all(broker, topic_name, 10, {0: OFFSET_BEGINNING}), records)


# -- produce: every acks x every codec ----------------------------------------------------------


@pytest.mark.parametrize("acks", ACKS, ids=lambda a: f"acks={a}")
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    broker: BrokerProcess, admin: AdminClient, topic_name: str, codec: str, acks: str
) -> None:
    create_topic(admin, topic_name)
    records = make_records(f"{codec}-{acks}")
    reports = produce(
        broker,
        topic_name,
        records,
        **{
            "compression.type": codec,
            "acks": acks,
            "enable.idempotence": "true" if acks == "all" else "false",
        },
    )
    got = read_all(broker, topic_name, len(records), dict.fromkeys(range(PARTITIONS), 0))
    assert_same(got, records)
    if acks != "0":
        assert {(m.partition(), m.offset()) for m in reports} == {
            (m.partition(), m.offset()) for m in got
        }


# -- reading: a topic written once per codec, read in several ways ------------------------------


@pytest.fixture(scope="module", params=CODECS)
def written(request: pytest.FixtureRequest, broker: BrokerProcess, admin: AdminClient) -> Written:
    """A 3-partition topic holding COUNT records with timestamps 10 ms apart."""
    codec = request.param
    topic = f"ck-read-{codec}-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic)
    base_ts = int(time.time() * 1000) - 3_600_000
    records = make_records(codec, base_ts=base_ts, step_ms=10)
    produce(broker, topic, records, **{"compression.type": codec, "enable.idempotence": "true"})
    return Written(topic, records, base_ts)


def test_read_from_offset(broker: BrokerProcess, written: Written) -> None:
    start = dict.fromkeys(range(PARTITIONS), 7)  # inside a batch
    expected = [r for p, rs in by_partition(written.records).items() for r in rs[start[p] :]]
    assert_same(read_all(broker, written.topic, len(expected), start), expected, start)


def test_read_from_timestamp(broker: BrokerProcess, written: Written) -> None:
    # record i has timestamp base + 10 i and sits at offset i // 3 of partition i % 3
    target = written.base_ts + 305  # just before record 31 (partition 1, offset 10)
    cons = consumer(broker)
    try:
        found = cons.offsets_for_times(
            [TopicPartition(written.topic, p, target) for p in range(PARTITIONS)], timeout=WAIT_S
        )
        assert [tp.offset for tp in found] == [11, 10, 10]  # records 33, 31, 32
        past = cons.offsets_for_times(
            [TopicPartition(written.topic, 0, written.base_ts + 10 * COUNT + 1000)], timeout=WAIT_S
        )
        assert past[0].offset == -1  # OFFSET_END: no such record
        cons.assign([found[1]])
        got = poll_n(cons, COUNT // PARTITIONS - 10)
        assert seen(got[0]) == written.records[31]
        assert [m.offset() for m in got] == list(range(10, COUNT // PARTITIONS))
    finally:
        cons.close()


def test_list_offsets_earliest_latest(
    broker: BrokerProcess, admin: AdminClient, written: Written
) -> None:
    per_part = {p: len(rs) for p, rs in by_partition(written.records).items()}
    tps = [TopicPartition(written.topic, p) for p in range(PARTITIONS)]
    cons = consumer(broker)
    try:
        for tp in tps:
            assert cons.get_watermark_offsets(tp, timeout=WAIT_S) == (0, per_part[tp.partition])
    finally:
        cons.close()

    def listed(spec: OffsetSpec) -> dict[int, tuple[int, int]]:
        futures = admin.list_offsets(dict.fromkeys(tps, spec), request_timeout=WAIT_S)
        out = {}
        for tp, fut in futures.items():
            info = fut.result(timeout=WAIT_S)
            out[tp.partition] = (info.offset, info.timestamp)
        return out

    assert {p: o for p, (o, _ts) in listed(OffsetSpec.earliest()).items()} == dict.fromkeys(
        range(PARTITIONS), 0
    )
    assert {p: o for p, (o, _ts) in listed(OffsetSpec.latest()).items()} == per_part
    found = listed(OffsetSpec.for_timestamp(written.base_ts + 305))
    assert found == {
        0: (11, written.base_ts + 330),
        1: (10, written.base_ts + 310),
        2: (10, written.base_ts + 320),
    }
    past = listed(OffsetSpec.for_timestamp(written.base_ts + 10 * COUNT + 1000))
    assert {p: o for p, (o, _ts) in past.items()} == dict.fromkeys(range(PARTITIONS), -1)
    newest = listed(OffsetSpec.max_timestamp())
    last = written.records[-1]  # record 59: partition 2, offset 19
    assert newest[last.partition] == (19, last.timestamp)


def test_log_start_offset_moves_inside_a_batch(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    records = make_records("dr", count=30, partitions=1)
    for chunk in range(3):  # three flushes: three batches of ten
        produce(
            broker,
            topic_name,
            records[chunk * 10 : chunk * 10 + 10],
            **{"compression.type": "snappy"},
        )
    deleted = admin.delete_records([TopicPartition(topic_name, 0, 15)], request_timeout=WAIT_S)
    for fut in deleted.values():
        fut.result(timeout=WAIT_S)
    cons = consumer(broker)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=WAIT_S) == (15, 30)
        cons.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        got = poll_n(cons, 15)
        assert [m.offset() for m in got] == list(range(15, 30))
        assert [seen(m) for m in got] == records[15:]
    finally:
        cons.close()


def test_read_from_end_sees_only_new_records(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=2)
    produce(broker, topic_name, make_records("old", count=10, partitions=2))
    cons = consumer(broker, **{"enable.partition.eof": True})
    try:
        cons.assign([TopicPartition(topic_name, p, OFFSET_END) for p in range(2)])
        # the end is resolved when each partition reports EOF; only then produce more
        at_end: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while at_end != {0, 1}:
            assert time.monotonic() < deadline, f"EOF only for {at_end}"
            msg = cons.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is not None, f"an old record arrived: offset {msg.offset()}"
            assert msg.error().code() == KafkaError._PARTITION_EOF
            assert msg.offset() == 5
            at_end.add(msg.partition())
        new = make_records("new", count=6, partitions=2)
        produce(broker, topic_name, new, **{"compression.type": "gzip"})
        assert_same(poll_n(cons, 6), new, {0: 5, 1: 5})
    finally:
        cons.close()


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_record_larger_than_fetch_limits_still_arrives(
    broker: BrokerProcess, admin: AdminClient, topic_name: str, codec: str
) -> None:
    # KIP-74: the first batch is returned whole even when it exceeds the fetch limits
    create_topic(admin, topic_name, partitions=1)
    big = Rec(0, b"big", bytes(range(256)) * 800, (("h", b"1"),), int(time.time() * 1000))
    small = make_records("small", count=3, partitions=1)
    produce(broker, topic_name, [big, *small], **{"compression.type": codec})
    cons = consumer(
        broker,
        **{"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024, "message.max.bytes": 1000},
    )
    try:
        cons.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        got = poll_n(cons, 4)
    finally:
        cons.close()
    assert [m.offset() for m in got] == [0, 1, 2, 3]
    assert [seen(m) for m in got] == [big, *small]
