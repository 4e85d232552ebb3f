"""Transactions through an in-process broker: raw requests (WriteTxnMarkers, AddPartitionsToTxn
v4+ batches and verify_only, old-version error mapping, the produce check, DescribeProducers)
and a crash between PrepareCommit/PrepareAbort and the markers, finished by the reload."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)

from odradek.coordinator.txn.state import TxnState
from odradek.testing import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

TOPIC = "t"
SMALL = {"transaction.state.log.num.partitions": 3}  # faster to create and to recover


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(topics={TOPIC: 2}, config=SMALL) as b:
        yield b


@pytest.fixture
def kadmin(broker: Broker) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


def send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def open_transaction(broker: Broker, tid: str, partitions: tuple[int, ...] = (0,)) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions(20)
    p.begin_transaction()
    for i in partitions:
        p.produce(TOPIC, value=b"v%d" % i, partition=i)
    assert p.flush(20) == 0
    return p


def producer_of(broker: Broker, tid: str) -> tuple[int, int]:
    md = broker.call(lambda s: s.txn_coordinator.txns[tid])
    return md.producer_id, md.producer_epoch


def offsets(broker: Broker, index: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of a partition of TOPIC."""
    return broker.call(
        lambda s: (
            s.topics.get(TOPIC, index).last_stable_offset,
            s.topics.get(TOPIC, index).high_watermark,
        )
    )


def read_committed(broker: Broker, partitions: int = 2) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "r",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    out, eof = [], set()
    try:
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 15
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
                continue
            out.append(m.value())
    finally:
        c.close()
    return out


def test_write_txn_markers_ends_a_transaction(broker: Broker, kadmin: KafkaAdminClient) -> None:
    p = open_transaction(broker, "w1", (0, 1))
    pid, epoch = producer_of(broker, "w1")
    assert offsets(broker, 0) == (0, 1)
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    Topic = Marker.WritableTxnMarkerTopic

    def write(ep: int, topic: str = TOPIC, parts: tuple[int, ...] = (0,)) -> list[int]:
        resp = send(
            kadmin,
            WriteTxnMarkersRequest(
                markers=[
                    Marker(
                        producer_id=pid,
                        producer_epoch=ep,
                        transaction_result=False,
                        topics=[Topic(name=topic, partition_indexes=list(parts))],
                        coordinator_epoch=0,
                    )
                ]
            ),
        )
        return [q.error_code for t in resp.markers[0].topics for q in t.partitions]

    assert write(epoch) == [ErrorCode.NONE]
    assert offsets(broker, 0) == (2, 2)  # the abort marker ended it: LSO moves on
    aborted = broker.call(
        lambda s: [
            (a.producer_id, a.first_offset)
            for a in s.topics.get(TOPIC, 0).log.aborted_transactions(0, 2)
        ]
    )
    assert aborted == [(pid, 0)]
    assert write(epoch - 1, parts=(1,)) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert write(epoch, topic="nope") == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert offsets(broker, 1) == (0, 1)
    del p


def test_produce_outside_the_transaction_is_refused(
    broker: Broker, kadmin: KafkaAdminClient
) -> None:
    p = open_transaction(broker, "p1", (0,))
    pid, epoch = producer_of(broker, "p1")

    def produce(partition: int, ep: int, seq: int) -> int:
        batch = build_batch(
            [(None, b"x", (), int(time.time() * 1000))],
            producer_id=pid,
            producer_epoch=ep,
            base_sequence=seq,
            transactional=True,
        )
        Topic = ProduceRequest.TopicProduceData
        resp = send(
            kadmin,
            ProduceRequest(
                transactional_id="p1",
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    Topic(
                        name=TOPIC,
                        partition_data=[Topic.PartitionProduceData(index=partition, records=batch)],
                    )
                ],
                max_version=11,  # by name: v13 names topics by id
            ),
        )
        return resp.responses[0].partition_responses[0].error_code

    # never added: TRANSACTION_ABORTABLE from Produce v11 on, as Kafka 4.4 (INVALID_TXN_STATE
    # before v11, compat_tests/reference/test_txn_delayed_messages.py)
    assert produce(1, epoch, 0) == ErrorCode.TRANSACTION_ABORTABLE
    assert produce(0, epoch - 1, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert offsets(broker, 1) == (0, 0)
    p.commit_transaction(20)
    assert produce(0, epoch, 1) == ErrorCode.TRANSACTION_ABORTABLE  # no transaction open


def test_add_partitions_v4_batch_and_verify_only(broker: Broker, kadmin: KafkaAdminClient) -> None:
    p = open_transaction(broker, "a1", (0,))
    pid, epoch = producer_of(broker, "a1")
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = Txn.AddPartitionsToTxnTopic

    def request(verify: bool, parts: list[int], tid: str = "a1") -> dict[int, int]:
        resp = send(
            kadmin,
            AddPartitionsToTxnRequest(
                transactions=[
                    Txn(
                        transactional_id=tid,
                        producer_id=pid,
                        producer_epoch=epoch,
                        verify_only=verify,
                        topics=[Topic(name=TOPIC, partitions=parts)],
                    )
                ],
                min_version=4,
            ),
        )
        result = resp.results_by_transaction[0]
        return {
            q.partition_index: q.partition_error_code
            for t in result.topic_results
            for q in t.results_by_partition
        }

    # v5 (negotiated here) answers TRANSACTION_ABORTABLE for a partition not in the transaction
    assert request(True, [0, 1]) == {0: ErrorCode.NONE, 1: ErrorCode.TRANSACTION_ABORTABLE}
    assert request(False, [1]) == {1: ErrorCode.NONE}
    assert request(True, [0, 1]) == {0: ErrorCode.NONE, 1: ErrorCode.NONE}
    assert request(False, [1], tid="other") == {1: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    p.commit_transaction(20)


def test_old_versions_get_invalid_producer_epoch_for_fenced(
    broker: Broker, kadmin: KafkaAdminClient
) -> None:
    p = open_transaction(broker, "e1", (0,))
    pid, epoch = producer_of(broker, "e1")
    for version, expected in (
        (1, ErrorCode.INVALID_PRODUCER_EPOCH),
        (3, ErrorCode.PRODUCER_FENCED),
    ):
        resp = send(
            kadmin,
            EndTxnRequest(
                transactional_id="e1",
                producer_id=pid,
                producer_epoch=epoch + 5,
                committed=True,
                min_version=version,
                max_version=version,
            ),
        )
        assert resp.error_code == expected
    p.commit_transaction(20)


def test_describe_producers_shows_the_open_transaction(
    broker: Broker, kadmin: KafkaAdminClient
) -> None:
    from kafka import TopicPartition as KTP

    p = open_transaction(broker, "d1", (1,))
    pid, epoch = producer_of(broker, "d1")
    state = kadmin.describe_producers([KTP(TOPIC, 1)])[KTP(TOPIC, 1)]
    assert [
        (s.producer_id, s.producer_epoch, s.current_transaction_start_offset)
        for s in state.active_producers
    ] == [(pid, epoch, 0)]
    p.abort_transaction(20)
    state = kadmin.describe_producers([KTP(TOPIC, 1)])[KTP(TOPIC, 1)]
    assert [s.current_transaction_start_offset for s in state.active_producers] == [-1]


@pytest.mark.parametrize("commit", [True, False])
def test_crash_between_prepare_and_markers_is_finished_on_restart(commit: bool) -> None:
    with Broker(topics={TOPIC: 2}, config=SMALL) as broker:
        p = open_transaction(broker, "c1", (0, 1))

        async def prepare_only(server: Any) -> ErrorCode:
            # what EndTxn persists first; the broker "dies" before writing any marker
            coord = server.txn_coordinator
            md = coord.txns["c1"]
            return await coord.manager.persist(md, md.prepare_end(commit, coord.clock()))

        assert broker.call(prepare_only) == ErrorCode.NONE
        assert offsets(broker, 0) == (0, 1)
        broker.restart(abrupt=True)
        deadline = time.monotonic() + 15
        while offsets(broker, 0) != (2, 2) or offsets(broker, 1) != (2, 2):
            assert time.monotonic() < deadline, "markers not written after the restart"
            time.sleep(0.05)
        state = broker.call(lambda s: s.txn_coordinator.txns["c1"].state)
        assert state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        assert sorted(read_committed(broker)) == ([b"v0", b"v1"] if commit else [])
        del p
