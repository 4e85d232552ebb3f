"""A transactional producer that reuses sequence 0 after an abort, in the same epoch: what
odradek and Apache Kafka 4.4 answer, in raw requests (the Jepsen soak's seed 73, docs/jepsen.md).

Transactions v1 (AddPartitionsToTxn v3, EndTxn v3: the epoch stays after an abort, as
librdkafka's): a batch with sequence 0 in a transaction that is aborted, then in the next
transaction of the same producer id and epoch another batch (another value) with sequence 0
again. Kafka's ProducerStateManager keeps the aborted batch's metadata (sequence range 0-0 at
its offset) and takes the new batch for a retry of it: the produce succeeds with the aborted
batch's offset and nothing is written, so the committed transaction holds no record and a
read_committed consumer reads neither value. A client that reuses a sequence this way loses
the second write while it is acknowledged; odradek answers the same as Kafka.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from compat_tests.reference.raw_requests import send, until_settled
from odradek.wire import protocol
from odradek.wire.records import build_batch

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS,
# NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION: not yet, try again
RETRY = (14, 15, 16, 51, 6, 5, 3)


def _until(call: Callable[[], Any], error: Callable[[Any], int]) -> Any:
    return until_settled(call, error, RETRY)


def _produce(bootstrap: str, topic: str, txn: str, pid: int, epoch: int, value: bytes) -> Any:
    batch = build_batch(
        [(None, value, [], int(time.time() * 1000))],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    spec = {
        "transactional_id": txn,
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    resp = _until(
        lambda: send(bootstrap, protocol._REQUESTS[0], spec, 9),
        lambda r: r.responses[0].partition_responses[0].error_code,
    )
    return resp.responses[0].partition_responses[0]


def _add_partition(bootstrap: str, topic: str, txn: str, pid: int, epoch: int) -> int:
    spec = {
        "v3_and_below_transactional_id": txn,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }
    resp = _until(
        lambda: send(bootstrap, protocol._REQUESTS[24], spec, 3),
        lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
    )
    return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def _end(bootstrap: str, txn: str, pid: int, epoch: int, commit: bool) -> int:
    spec = {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch}
    resp = _until(
        lambda: send(bootstrap, protocol._REQUESTS[26], {**spec, "committed": commit}, 3),
        lambda r: r.error_code,
    )
    return int(resp.error_code)


def _read(bootstrap: str, topic: str, isolation: str, end: int) -> list[tuple[int, str]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reuse-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    out: list[tuple[int, str]] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for msg in c.consume(10, 0.2):
                if msg.error() is None:
                    out.append((msg.offset() or 0, (msg.value() or b"").decode()))
            if c.position([TopicPartition(topic, 0)])[0].offset >= end:
                return out
        raise AssertionError(f"{isolation} read of {topic} did not reach offset {end}: {out}")
    finally:
        c.close()


def _high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reuse-hw", "log_level": 0})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)[1])
    finally:
        c.close()


def scenario(bootstrap: str) -> dict[str, Any]:
    """What the broker answers and what readers read, as a dict both brokers must match."""
    token = uuid.uuid4().hex[:8]
    topic, txn = f"reuse_{token}", f"reuse-{token}"
    created = send(
        bootstrap,
        protocol._REQUESTS[19],
        {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}]},
        5,
    )
    assert not isinstance(created, str) and created.topics[0].error_code == 0, created
    # the first FindCoordinator for a transactional id creates the transaction state topic
    found = _until(
        lambda: send(bootstrap, protocol._REQUESTS[10], {"key": txn, "key_type": 1}, 2),
        lambda r: r.error_code,
    )
    assert found.error_code == 0, found
    init = _until(
        lambda: send(
            bootstrap,
            protocol._REQUESTS[22],
            {"transactional_id": txn, "transaction_timeout_ms": 60_000},
            3,
        ),
        lambda r: r.error_code,
    )
    assert init.error_code == 0, init
    pid, epoch = init.producer_id, init.producer_epoch
    out: dict[str, Any] = {}
    out["add 1"] = _add_partition(bootstrap, topic, txn, pid, epoch)
    first = _produce(bootstrap, topic, txn, pid, epoch, b"aborted")
    out["produce 1 (sequence 0)"] = (first.error_code, first.base_offset)
    out["abort"] = _end(bootstrap, txn, pid, epoch, commit=False)
    out["add 2 (same epoch)"] = _add_partition(bootstrap, topic, txn, pid, epoch)
    second = _produce(bootstrap, topic, txn, pid, epoch, b"committed")
    out["produce 2 (sequence 0 again)"] = (second.error_code, second.base_offset)
    out["commit"] = _end(bootstrap, txn, pid, epoch, commit=True)
    end = _high_watermark(bootstrap, topic)
    out["high watermark"] = end
    out["read_committed"] = _read(bootstrap, topic, "read_committed", end)
    out["read_uncommitted"] = _read(bootstrap, topic, "read_uncommitted", end)
    return out


EXPECTED = {
    "add 1": 0,
    "produce 1 (sequence 0)": (0, 0),
    "abort": 0,
    "add 2 (same epoch)": 0,
    # a retry of the aborted batch, as Kafka's ProducerStateManager sees it: acknowledged at
    # the aborted batch's offset, not written
    "produce 2 (sequence 0 again)": (0, 0),
    "commit": 0,
    "high watermark": 3,  # the aborted record, the abort marker, the commit marker
    "read_committed": [],
    "read_uncommitted": [(0, "aborted")],
}


def test_sequence_reused_after_an_abort_is_a_duplicate_of_the_aborted_batch(
    either_broker: str,
) -> None:
    assert scenario(either_broker) == EXPECTED
