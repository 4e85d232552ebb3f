"""kafka-python 3.0 against a real `odradek serve` process.

What a kafka-python user does: create topics with KafkaAdminClient or let a producer auto-create
them, produce with acks 0 / 1 / all and every codec (acks=all is kafka-python's idempotent
default), and read back from the beginning, from an offset, from a timestamp and from the end.
Every check is on what the user sees: each record back once, in order per partition, with its
key, value, headers and timestamp.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import TopicAlreadyExistsError
from kafka.protocol.consumer import OffsetSpec

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


def seen(msg: ConsumerRecord) -> Rec:
    return Rec(
        msg.partition, msg.key, msg.value, tuple((k, v) for k, v in msg.headers), msg.timestamp
    )


def assert_same(got: list, expected: list[Rec], start: dict[int, int] | None = None) -> None:
    """Per partition: exactly the expected records, in order, at consecutive offsets."""
    assert_consumed([(m.offset, seen(m)) for m in got], expected, start)


# -- client helpers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="compat-admin")
    yield client
    client.close()


def create_topic(
    admin: KafkaAdminClient,
    name: str,
    partitions: int = PARTITIONS,
    configs: dict[str, str] | None = None,
) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])


def produce(broker: BrokerProcess, topic: str, records: list[Rec], **config: object) -> list:
    """Send every record, wait for every acknowledgement; the RecordMetadata in send order."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=20, **config)
    try:
        futures = [
            producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in records
        ]
        producer.flush(timeout=WAIT_S)
        return [f.get(timeout=WAIT_S) for f in futures]
    finally:
        producer.close(timeout=10)


def consumer(broker: BrokerProcess) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )


def poll_n(cons: KafkaConsumer, n: int, timeout: float = WAIT_S) -> list:
    """Poll until `n` records arrived (failing at the deadline); returns everything polled."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} records within {timeout}s"
        # all the time left (poll returns once it has records): kafka-python 3.0.12 drops a
        # join round that completes between two short polls, so a group never settles
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        for msgs in cons.poll(timeout_ms=left_ms).values():
            got.extend(msgs)
    return got


def read_all(broker: BrokerProcess, topic: str, n: int, start: dict[int, int]) -> list:
    cons = consumer(broker)
    try:
        tps = [TopicPartition(topic, p) for p in start]
        cons.assign(tps)
        for tp in tps:
            cons.seek(tp, start[tp.partition])
        got = poll_n(cons, n)
        assert cons.poll(timeout_ms=100) == {}, "more records than were produced"
        return got
    finally:
        cons.close()


# -- admin and auto-creation ---------------------------------------------------------------------


def test_admin_create_describe_topics_and_cluster(admin: KafkaAdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=3)
    assert topic_name in admin.list_topics()
    (desc,) = admin.describe_topics([topic_name])
    assert desc["error_code"] == 0
    assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2]
    assert all(p["leader_id"] == 0 and p["replica_nodes"] == [0] for p in desc["partitions"])
    cluster = admin.describe_cluster()
    assert [b["broker_id"] for b in cluster["brokers"]] == [0]
    assert cluster["controller_id"] == 0 and cluster["cluster_id"]
    with pytest.raises(TopicAlreadyExistsError):
        create_topic(admin, topic_name)


def test_producer_auto_creates_topic_with_num_partitions(fresh_broker, topic_name: str) -> None:
    broker = fresh_broker({"num.partitions": "3"})
    records = make_records("auto", count=9, partitions=3)
    metas = produce(broker, topic_name, records)
    assert {m.partition for m in metas} == {0, 1, 2}
    cons = consumer(broker)
    try:
        assert cons.partitions_for_topic(topic_name) == {0, 1, 2}
    finally:
        cons.close()
    assert_same(read_all(broker, topic_name, 9, {0: 0, 1: 0, 2: 0}), records)


def test_auto_created_topic_uses_broker_default_partitions(
    broker: BrokerProcess, topic_name: str
) -> None:
    records = make_records("auto1", count=10, partitions=1)
    metas = produce(broker, topic_name, records)
    assert [m.offset for m in metas] == list(range(10))
    assert_same(read_all(broker, topic_name, 10, {0: 0}), records)


# -- produce: every acks x every codec ----------------------------------------------------------


@pytest.mark.parametrize("acks", ACKS, ids=lambda a: f"acks={a}")
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str, codec: str, acks: int | str
) -> None:
    create_topic(admin, topic_name)
    records = make_records(f"{codec}-{acks}")
    # acks=all keeps kafka-python's default, the idempotent producer; 0 and 1 must turn it off
    extra = {} if acks == "all" else {"acks": acks, "enable_idempotence": False}
    compression = None if codec == "none" else codec
    metas = produce(broker, topic_name, records, compression_type=compression, **extra)
    got = read_all(broker, topic_name, len(records), dict.fromkeys(range(PARTITIONS), 0))
    assert_same(got, records)
    if acks != 0:
        offsets = {(m.partition, m.offset) for m in metas}
        assert offsets == {(m.partition, m.offset) for m in got}


# -- reading: a topic written once per codec, read in several ways ------------------------------


@pytest.fixture(scope="module", params=CODECS)
def written(
    request: pytest.FixtureRequest, broker: BrokerProcess, admin: KafkaAdminClient
) -> Written:
    """A 3-partition topic holding COUNT records with timestamps 10 ms apart."""
    codec = request.param
    topic = f"kp-read-{codec}-{time.monotonic_ns()}"
    create_topic(admin, topic)
    base_ts = int(time.time() * 1000) - 3_600_000
    records = make_records(codec, base_ts=base_ts, step_ms=10)
    produce(broker, topic, records, compression_type=None if codec == "none" else codec)
    return Written(topic, records, base_ts)


def test_read_from_offset(broker: BrokerProcess, written: Written) -> None:
    # offset 7 is inside a batch: the client skips the batch's earlier records
    start = dict.fromkeys(range(PARTITIONS), 7)
    expected = [r for p, rs in by_partition(written.records).items() for r in rs[start[p] :]]
    got = read_all(broker, written.topic, len(expected), start)
    assert_same(got, expected, start)


def test_read_from_timestamp(broker: BrokerProcess, written: Written) -> None:
    tps = [TopicPartition(written.topic, p) for p in range(PARTITIONS)]
    cons = consumer(broker)
    try:
        # record i has timestamp base + 10 i and sits at offset i // 3 of partition i % 3
        target = written.base_ts + 10 * 31 - 5  # just before record 31 (partition 1, offset 10)
        found = cons.offsets_for_times(dict.fromkeys(tps, target))
        assert found[tps[1]].offset == 10
        assert found[tps[1]].timestamp == written.base_ts + 310
        assert found[tps[0]].offset == 11 and found[tps[2]].offset == 10  # records 33 and 32
        exact = cons.offsets_for_times({tps[2]: written.base_ts + 20})
        assert exact[tps[2]].offset == 0
        before_all = cons.offsets_for_times({tps[0]: 0})
        assert before_all[tps[0]].offset == 0
        past_last = cons.offsets_for_times({tps[0]: written.base_ts + 10 * COUNT + 1000})
        assert past_last[tps[0]] is None
        cons.assign([tps[1]])
        cons.seek(tps[1], found[tps[1]].offset)
        got = poll_n(cons, COUNT // PARTITIONS - 10)
        assert seen(got[0]) == written.records[31]
        assert [m.offset for m in got] == list(range(10, COUNT // PARTITIONS))
    finally:
        cons.close()


def test_list_offsets_earliest_latest(
    broker: BrokerProcess, admin: KafkaAdminClient, written: Written
) -> None:
    tps = [TopicPartition(written.topic, p) for p in range(PARTITIONS)]
    per_part = {p: len(rs) for p, rs in by_partition(written.records).items()}
    cons = consumer(broker)
    try:
        assert cons.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        assert cons.end_offsets(tps) == {tp: per_part[tp.partition] for tp in tps}
    finally:
        cons.close()
    latest = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
    assert {tp: o.offset for tp, o in latest.items()} == {tp: per_part[tp.partition] for tp in tps}
    earliest = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
    assert {tp: o.offset for tp, o in earliest.items()} == dict.fromkeys(tps, 0)


def test_log_start_offset_moves_inside_a_batch(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    records = make_records("dr", count=30, partitions=1)
    for chunk in range(3):  # three flushes: three batches of ten
        produce(broker, topic_name, records[chunk * 10 : chunk * 10 + 10], compression_type="lz4")
    tp = TopicPartition(topic_name, 0)
    admin.delete_records({tp: 15})  # the middle of the second batch
    cons = consumer(broker)
    try:
        assert cons.beginning_offsets([tp]) == {tp: 15}
        assert cons.end_offsets([tp]) == {tp: 30}
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = poll_n(cons, 15)
        assert [m.offset for m in got] == list(range(15, 30))
        assert [seen(m) for m in got] == records[15:]
    finally:
        cons.close()


def test_read_from_end_sees_only_new_records(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=2)
    old = make_records("old", count=10, partitions=2)
    produce(broker, topic_name, old)
    tps = [TopicPartition(topic_name, p) for p in range(2)]
    cons = consumer(broker)
    try:
        cons.assign(tps)
        cons.seek_to_end(*tps)
        assert [cons.position(tp) for tp in tps] == [5, 5]
        assert cons.poll(timeout_ms=200) == {}
        new = make_records("new", count=6, partitions=2)
        produce(broker, topic_name, new, compression_type="zstd")
        got = poll_n(cons, 6)
        assert_same(got, new, {0: 5, 1: 5})
    finally:
        cons.close()


def test_group_member_sees_partitions_added_to_its_topic(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    """A subscribed member learns of new partitions by its periodic Metadata refresh
    (metadata.max.age.ms, 5 min by default, shortened here to keep the test short): the leader
    sees the partition count change, the group rebalances and the new partitions are read from
    the earliest offset. A broker answering stale Metadata after CreatePartitions (a cached
    answer, a partition count read before the change) never gets the record of partition 3
    to the consumer."""
    create_topic(admin, topic_name, partitions=2)
    cons = KafkaConsumer(
        topic_name,
        bootstrap_servers=broker.bootstrap,
        group_id=topic_name,
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
    )
    try:
        produce(broker, topic_name, [Rec(1, b"k", b"before", (), int(time.time() * 1000))])
        assert [m.value for m in poll_n(cons, 1)] == [b"before"]
        assert cons.partitions_for_topic(topic_name) == {0, 1}
        admin.create_partitions({topic_name: NewPartitions(total_count=4)})
        produce(broker, topic_name, [Rec(3, b"k", b"after", (), int(time.time() * 1000))])
        assert [(m.partition, m.value) for m in poll_n(cons, 1)] == [(3, b"after")]
        assert {tp.partition for tp in cons.assignment()} == {0, 1, 2, 3}
    finally:
        cons.close()


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_record_larger_than_fetch_limits_still_arrives(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str, codec: str
) -> None:
    # KIP-74: the first batch is returned whole even when it exceeds max_bytes
    create_topic(admin, topic_name, partitions=1)
    big = Rec(0, b"big", bytes(range(256)) * 800, (("h", b"1"),), int(time.time() * 1000))
    small = make_records("small", count=3, partitions=1)
    produce(
        broker,
        topic_name,
        [big, *small],
        compression_type=None if codec == "none" else codec,
        batch_size=1024,
    )
    cons = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
    )
    try:
        tp = TopicPartition(topic_name, 0)
        cons.assign([tp])
        cons.seek(tp, 0)
        got = poll_n(cons, 4)
    finally:
        cons.close()
    assert [m.offset for m in got] == [0, 1, 2, 3]
    assert [seen(m) for m in got] == [big, *small]


def test_out_of_range_position_resets_to_earliest(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    # a position past the log end or before the log start is OFFSET_OUT_OF_RANGE; the client
    # then applies auto_offset_reset
    create_topic(admin, topic_name, partitions=1)
    records = make_records("oor", count=10, partitions=1)
    produce(broker, topic_name, records)
    admin.delete_records({TopicPartition(topic_name, 0): 4})
    tp = TopicPartition(topic_name, 0)
    for position in (1000, 2):
        cons = consumer(broker)
        try:
            cons.assign([tp])
            cons.seek(tp, position)
            got = poll_n(cons, 6)
            assert [m.offset for m in got] == list(range(4, 10)), position
            assert [seen(m) for m in got] == records[4:]
        finally:
            cons.close()
