"""Kafka 4.4's maxima where the change is small (checked against Kafka 4.4 itself): ListOffsets v11
with KIP-1023's earliest-pending-upload timestamp (-6: -1 here, nothing waits for an upload, as
Kafka answers for a topic without remote storage; UNSUPPORTED_VERSION below v11 and for any
other negative timestamp, as Kafka), DescribeLogDirs v5 (IsCordoned false) and WriteTxnMarkers v2
(the marker's transaction version, KIP-1228)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

LO = protocol.ListOffsetsRequest


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(topics={"t": 1}) as b:
        yield b


def list_offsets(raw: RawClient, timestamp: int, version: int) -> tuple[int, int]:
    req = LO(
        replica_id=-1,
        isolation_level=0,
        timeout_ms=1000,
        topics=[
            LO.ListOffsetsTopic(
                name="t",
                partitions=[
                    LO.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    part = raw.request(req, version).topics[0].partitions[0]
    return part.error_code, part.offset


def test_list_offsets_v11_earliest_pending_upload(broker: Broker) -> None:
    P = protocol.ProduceRequest
    batch = build_batch([(None, b"v", [], 1_700_000_000_000)])
    with RawClient(broker.bootstrap) as raw:
        produced = raw.request(
            P(
                transactional_id=None,
                acks=1,
                timeout_ms=5000,
                topic_data=[
                    P.TopicProduceData(
                        name="t",
                        partition_data=[P.TopicProduceData.PartitionProduceData(0, batch)],
                    )
                ],
            ),
            9,
        )
        assert produced.responses[0].partition_responses[0].error_code == 0
        assert list_offsets(raw, -1, 11) == (ErrorCode.NONE, 1)
        assert list_offsets(raw, -6, 11) == (ErrorCode.NONE, -1)
        assert list_offsets(raw, -6, 10) == (ErrorCode.UNSUPPORTED_VERSION, -1)
        assert list_offsets(raw, -7, 11) == (ErrorCode.UNSUPPORTED_VERSION, -1)


def test_describe_log_dirs_v5_and_write_txn_markers_v2(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as raw:
        dirs = raw.request(protocol.DescribeLogDirsRequest(topics=None), 5)
        assert dirs.error_code == 0 and [r.is_cordoned for r in dirs.results] == [False]
        assert {t.name for r in dirs.results for t in r.topics} >= {"t"}
        W = protocol.WriteTxnMarkersRequest
        marker = W.WritableTxnMarker(
            producer_id=77,
            producer_epoch=0,
            transaction_result=False,
            topics=[W.WritableTxnMarker.WritableTxnMarkerTopic(name="t", partition_indexes=[0])],
            coordinator_epoch=0,
            transaction_version=2,
        )
        written = raw.request(W(markers=[marker]), 2)
        assert [p.error_code for p in written.markers[0].topics[0].partitions] == [0]
