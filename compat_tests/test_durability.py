"""Durability across restarts of a real `odradek serve` process: SIGTERM and kill -9.

- Every acknowledged record is there after a clean stop and after kill -9 (the page cache
  survives a killed process), the time index answers as before, and producing continues at the
  log end offset.
- A torn tail (garbage, half a batch, a batch with a bad CRC, zeros) appended to the active
  segment while the broker is down is cut off by recovery, and producing continues at the
  right offset.
- Idempotent producer state survives a restart: a retried batch (same producer id, epoch and
  base sequence) is answered as a duplicate with its original offset, a gap in sequence is
  OUT_OF_ORDER_SEQUENCE_NUMBER, and the next batch in sequence is appended.

Raw requests come from test_bad_input.py's RawClient; one test uses kafka-python's producer
held open across the restart, as an application would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import DeleteRecordsRequest

from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.test_bad_input import (
    GZIP,
    LATEST,
    LZ4,
    NONE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    SNAPPY,
    ZSTD,
    RawClient,
    Stored,
    as_stored,
    create_topic,
    fetch_all,
    init_producer_id,
    list_offset,
    make_specs,
    produce,
)
from odradek.wire.records import build_batch

pytestmark = pytest.mark.compat

StartBroker = Callable[..., BrokerProcess]
STOPS = ["sigterm", "kill-9"]
WAIT_S = 20.0


def stop(broker: BrokerProcess, how: str) -> None:
    if how == "sigterm":
        assert broker.stop() == 0, broker.log_tail()
    else:
        broker.kill()


def write_batches(
    client: RawClient,
    topic: str,
    partition: int,
    tag: str,
    codecs: tuple[int, ...] = (0, GZIP, SNAPPY, LZ4, ZSTD),
    per_batch: int = 4,
    base_ts: int | None = None,
) -> list[Stored]:
    """One acked batch per codec; the records as a consumer will see them."""
    base = int(time.time() * 1000) - 600_000 if base_ts is None else base_ts
    stored: list[Stored] = []
    _err, first = list_offset(client, topic, partition, LATEST)
    for n, codec in enumerate(codecs):
        specs = make_specs(f"{tag}{n}", per_batch, base_ts=base + 1000 * n)
        part = produce(client, topic, partition, build_batch(specs, compression=codec))
        assert part.error_code == NONE, part
        assert part.base_offset == first + len(stored)
        stored += as_stored(specs, part.base_offset)
    return stored


def active_segment(broker: BrokerProcess, topic: str, partition: int = 0) -> Path:
    segments = sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))
    assert segments, f"no segment files for {topic}-{partition} in {broker.data_dir}"
    return segments[-1]


# -- acknowledged records survive -----------------------------------------------------------------


@pytest.mark.parametrize("how", STOPS)
def test_acked_records_survive_restart(fresh_broker: StartBroker, how: str) -> None:
    broker = fresh_broker()
    topic = unique_name("durable")
    base_ts = int(time.time() * 1000) - 600_000
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic, partitions=2) == NONE
        before = {p: write_batches(c, topic, p, f"p{p}-", base_ts=base_ts) for p in (0, 1)}
    stop(broker, how)
    broker.start()
    with RawClient(broker.bootstrap) as c:
        for p in (0, 1):
            assert fetch_all(c, topic, p) == before[p]
            n = len(before[p])
            assert list_offset(c, topic, p, LATEST) == (NONE, n)
            assert list_offset(c, topic, p, -2) == (NONE, 0)
            # the time index answers after recovery: batch 3 starts at base + 3000
            assert list_offset(c, topic, p, base_ts + 3000) == (NONE, 12)
            assert list_offset(c, topic, p, base_ts + 10_000) == (NONE, -1)
            more = write_batches(c, topic, p, f"after-p{p}-", codecs=(LZ4,))
            assert more[0].offset == n
            assert fetch_all(c, topic, p) == before[p] + more


@pytest.mark.parametrize("how", STOPS)
def test_restart_twice_keeps_everything(fresh_broker: StartBroker, how: str) -> None:
    broker = fresh_broker({"log.segment.bytes": "1024"})  # several segments
    topic = unique_name("rolled")
    base_ts = int(time.time() * 1000) - 600_000
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
        stored = write_batches(c, topic, 0, "a", per_batch=10, base_ts=base_ts)
    stop(broker, how)
    broker.start()
    with RawClient(broker.bootstrap) as c:
        stored += write_batches(c, topic, 0, "b", per_batch=10, base_ts=base_ts + 100_000)
    stop(broker, how)
    broker.start()
    assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) > 1, "expected rolls"
    with RawClient(broker.bootstrap) as c:
        assert fetch_all(c, topic) == stored
        assert list_offset(c, topic, 0, LATEST) == (NONE, len(stored))
        # the time indexes of every segment answer: run "b" starts at offset 50
        assert list_offset(c, topic, 0, base_ts + 100_000) == (NONE, 50)
        assert list_offset(c, topic, 0, base_ts + 3_005) == (NONE, 35)  # mid-batch
        assert list_offset(c, topic, 0, base_ts + 200_000) == (NONE, -1)


def delete_records(client: RawClient, topic: str, partition: int, offset: int) -> tuple[int, int]:
    """(error_code, low watermark) of a DeleteRecords request."""
    T = DeleteRecordsRequest.DeleteRecordsTopic
    req = DeleteRecordsRequest(
        topics=[
            T(
                name=topic,
                partitions=[T.DeleteRecordsPartition(partition_index=partition, offset=offset)],
            )
        ],
        timeout_ms=10_000,
    )
    (part,) = client.request(req, 2).topics[0].partitions
    return part.error_code, part.low_watermark


def test_log_start_offset_survives_clean_restart(fresh_broker: StartBroker) -> None:
    # after kill -9 Kafka may fall back to an older log-start-offset checkpoint, so only the
    # clean stop promises this
    broker = fresh_broker()
    topic = unique_name("lso")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
        stored = write_batches(c, topic, 0, "d")
        assert delete_records(c, topic, 0, 6) == (NONE, 6)  # inside the second batch
    stop(broker, "sigterm")
    broker.start()
    with RawClient(broker.bootstrap) as c:
        assert list_offset(c, topic, 0, -2) == (NONE, 6)
        assert list_offset(c, topic, 0, LATEST) == (NONE, len(stored))
        assert fetch_all(c, topic, 0, 6) == stored[6:]


# -- a torn tail is cut off ------------------------------------------------------------------------


def _torn_tail(kind: str, next_offset: int) -> bytes:
    batch = bytearray(build_batch(make_specs("torn", 5), base_offset=next_offset))
    if kind == "garbage":
        return os.urandom(97)
    if kind == "partial-batch":
        return bytes(batch[: len(batch) // 2])
    if kind == "header-only":
        return bytes(batch[:61])
    if kind == "bad-crc-batch":
        batch[-2] ^= 0xFF
        return bytes(batch)
    if kind == "zeros":
        return b"\x00" * 4096
    raise ValueError(kind)


@pytest.mark.parametrize(
    "kind", ["garbage", "partial-batch", "header-only", "bad-crc-batch", "zeros"]
)
def test_torn_last_batch_is_cut_off_at_restart(fresh_broker: StartBroker, kind: str) -> None:
    broker = fresh_broker()
    topic = unique_name("torn")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
        stored = write_batches(c, topic, 0, "t")
    broker.kill()  # a crash mid-write leaves a torn tail
    segment = active_segment(broker, topic)
    good_size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(_torn_tail(kind, len(stored)))
    broker.start()
    with RawClient(broker.bootstrap) as c:
        assert list_offset(c, topic, 0, LATEST) == (NONE, len(stored))
        assert fetch_all(c, topic) == stored
        assert segment.stat().st_size == good_size, "the torn tail is still in the segment"
        more = write_batches(c, topic, 0, "after", codecs=(0, ZSTD))
        assert more[0].offset == len(stored)
        assert fetch_all(c, topic) == stored + more
    # and the repaired log survives one more unclean restart
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as c:
        assert fetch_all(c, topic) == stored + more


# -- idempotent producer state survives ------------------------------------------------------------


@pytest.mark.parametrize("segment_bytes", ["default", "200"], ids=["one-segment", "rolled"])
@pytest.mark.parametrize("how", STOPS)
def test_idempotent_producer_state_survives_restart(
    fresh_broker: StartBroker, how: str, segment_bytes: str
) -> None:
    # with 200-byte segments every batch rolls a segment: the state must come from snapshots
    # or from replaying every segment, not only the active one
    broker = fresh_broker(
        {} if segment_bytes == "default" else {"log.segment.bytes": segment_bytes}
    )
    topic = unique_name("idem")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
        pid, epoch = init_producer_id(c)
        assert pid >= 0 and epoch >= 0

        def batch(tag: str, count: int, seq: int, codec: int = 0) -> tuple[bytes, list]:
            specs = make_specs(tag, count)
            return build_batch(
                specs, compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq
            ), specs

        a, a_specs = batch("a", 3, 0)
        b, b_specs = batch("b", 2, 3, GZIP)
        c_batch, c_specs = batch("c", 4, 5, ZSTD)
        offsets = []
        for data in (a, b, c_batch):
            part = produce(c, topic, 0, data)
            assert part.error_code == NONE
            offsets.append(part.base_offset)
        assert offsets == [0, 3, 5]
        # a retry before the restart is a duplicate too
        dup = produce(c, topic, 0, b)
        assert (dup.error_code, dup.base_offset) == (NONE, 3)
    stored = as_stored(a_specs, 0) + as_stored(b_specs, 3) + as_stored(c_specs, 5)
    if segment_bytes != "default":
        assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) >= 3, "no rolls"

    stop(broker, how)
    broker.start()
    with RawClient(broker.bootstrap) as c:
        # retries of the last batch and of older ones (Kafka keeps five per producer)
        for data, offset in ((c_batch, 5), (b, 3), (a, 0)):
            part = produce(c, topic, 0, data)
            assert (part.error_code, part.base_offset) == (NONE, offset), (
                f"retry of the batch at {offset} after restart"
            )
        assert list_offset(c, topic, 0, LATEST) == (NONE, 9)
        gap, _ = batch("gap", 2, 20)
        assert produce(c, topic, 0, gap).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        d, d_specs = batch("d", 2, 9, LZ4)
        part = produce(c, topic, 0, d)
        assert (part.error_code, part.base_offset) == (NONE, 9)
        assert fetch_all(c, topic) == stored + as_stored(d_specs, 9)


@pytest.mark.parametrize("how", STOPS)
def test_kafka_python_producer_continues_across_restart(
    fresh_broker: StartBroker, how: str
) -> None:
    broker = fresh_broker()
    topic = unique_name("kp-restart")
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        linger_ms=5,
        compression_type="gzip",
        reconnect_backoff_max_ms=200,
        retry_backoff_ms=50,
    )
    try:
        first = [
            producer.send(topic, key=b"k%d" % i, value=b"before-%d" % i, partition=0)
            for i in range(20)
        ]
        producer.flush(timeout=WAIT_S)
        assert [f.get(timeout=WAIT_S).offset for f in first] == list(range(20))
        stop(broker, how)
        broker.start()
        second = [
            producer.send(topic, key=b"k%d" % i, value=b"after-%d" % i, partition=0)
            for i in range(20)
        ]
        producer.flush(timeout=WAIT_S)
        assert [f.get(timeout=WAIT_S).offset for f in second] == list(range(20, 40))
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 40:
            assert time.monotonic() < deadline, f"only {len(got)} of 40 records"
            for msgs in consumer.poll(timeout_ms=200).values():
                got.extend(msgs)
    finally:
        consumer.close()
    assert [m.offset for m in got] == list(range(40))
    assert [m.value for m in got] == [b"before-%d" % i for i in range(20)] + [
        b"after-%d" % i for i in range(20)
    ]
