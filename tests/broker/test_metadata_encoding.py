"""Metadata topics are encoded by hand for speed (issue 17): the bytes must be exactly what
kafka-python's encoder of Kafka's MetadataResponse schema gives, for every version (0-13),
with offline replicas, a leaderless partition, an error topic, non-ASCII names and the
authorized-operations fields."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.handlers.metadata import NO_OPERATIONS, EncodedTopics, encode_topic
from odradek.wire import protocol

R = protocol.MetadataResponse.MetadataResponseTopic
P = R.MetadataResponsePartition
B = protocol.MetadataResponse.MetadataResponseBroker
PARTS = [(0, 0, 1, 3, [1, 2], [1], [2]), (5, 1, -1, 4, [2], [], [2])]
OPS = {3, 4, 8}


def head(version: int, topics: list) -> protocol.MetadataResponse:
    resp = protocol.MetadataResponse(
        throttle_time_ms=7,
        brokers=[B(node_id=1, host="h", port=9, rack="r")],
        cluster_id="cid",
        controller_id=1,
        topics=topics,
        error_code=0,
    )
    if 8 <= version <= 10:
        resp.authorized_operations = {1, 2}
    return resp


@pytest.mark.parametrize("version", range(14))
def test_hand_encoded_topics_match_the_schema_encoder(version):
    tid = uuid.uuid4()
    name = "tópico" if version else "t"
    ok = R(
        error_code=0,
        name=name,
        topic_id=tid,
        is_internal=True,
        partitions=[
            P(
                error_code=c,
                partition_index=i,
                leader_id=leader,
                leader_epoch=epoch,
                replica_nodes=replicas,
                isr_nodes=isr,
                offline_replicas=offline,
            )
            for c, i, leader, epoch, replicas, isr, offline in PARTS
        ],
    )
    if version >= 8:
        ok.authorized_operations = OPS
    gone = R(error_code=3, name="gone", topic_id=uuid.UUID(int=0), is_internal=False, partitions=[])
    expected = bytes(head(version, [ok, gone]).encode(version=version))
    ops = sum(1 << op for op in OPS) if version >= 8 else NO_OPERATIONS
    mine = EncodedTopics(
        head(version, []),
        [
            encode_topic(version, 0, name, tid, True, PARTS, ops),  # type: ignore[arg-type]
            encode_topic(version, 3, "gone", uuid.UUID(int=0), False, []),
        ],
        [3],
    ).encode(version)
    assert mine == expected
