"""The follower's hand-encoded Fetch v12 request (replication/fetch_request.py) is byte for byte
what kafka-python's encoder of Kafka's FetchRequest schema gives: a full fetch of several topics,
an incremental one with forgotten partitions, an empty one, non-ASCII names."""

from __future__ import annotations

import pytest

from odradek.broker.replication.fetch_request import FetchPartition, encode_fetch_v12
from odradek.wire import protocol

FR = protocol.FetchRequest
P1 = FetchPartition(0, 5, 123_456_789_012, 4, 17, 1 << 20)
P2 = FetchPartition(7, -1, 0, -1, -1, 1 << 20)
CASES = {
    "full": ({"orders": [P1, P2], "tópico": [P2]}, {}),
    "incremental": ({"orders": [P1]}, {"gone": [1, 2], "__consumer_offsets": [40]}),
    "empty": ({}, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_hand_encoded_fetch_matches_the_schema_encoder(case: str) -> None:
    topics, forgotten = CASES[case]
    req = FR(
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=99,
        session_epoch=3,
        topics=[
            FR.FetchTopic(
                topic=t,
                partitions=[
                    FR.FetchTopic.FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in ps
                ],
            )
            for t, ps in topics.items()
        ],
        forgotten_topics_data=[
            FR.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()
        ],
        rack_id="",
    )
    req.with_header(correlation_id=41, client_id="odradek-replica-fetcher-2")
    expected = bytes(req.encode(version=12, header=True, framed=True))
    got = encode_fetch_v12(
        41,
        "odradek-replica-fetcher-2",
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=10 << 20,
        session_id=99,
        session_epoch=3,
        topics=topics,
        forgotten=forgotten,
    )
    assert got == expected
