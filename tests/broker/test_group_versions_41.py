"""Kafka 4.1's group API maxima: OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-848;
an unknown id is UNKNOWN_TOPIC_ID), DescribeGroups v6 answers GROUP_ID_NOT_FOUND for an unknown
group (KIP-1043; v5 still describes it as Dead). What v10 commits, kafka-python's admin client
(which stops at v8) reads back by name."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

WAIT_S = 20.0
Commit = protocol.OffsetCommitRequest
Fetch = protocol.OffsetFetchRequest


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config={"offsets.topic.num.partitions": "1"}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("v10", 2, 1)])
        admin.close()
        yield b


def call(raw: RawClient, req: Any, version: int) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:  # the offsets topic is created by the first FindCoordinator
        resp = raw.request(req, version)
        errors = _errors(resp)
        if ErrorCode.COORDINATOR_NOT_AVAILABLE not in errors or time.monotonic() > deadline:
            return resp


def _errors(resp: Any) -> set[int]:
    out = {getattr(resp, "error_code", 0)}
    for t in getattr(resp, "topics", []) or []:
        out |= {p.error_code for p in t.partitions}
    for g in getattr(resp, "groups", []) or []:
        out.add(g.error_code)
    return out


def test_offsets_by_topic_id_and_describe_groups_v6(broker: Broker) -> None:
    topic_id = broker.call(lambda s: s.topics.info("v10").topic_id)
    stray = uuid.uuid4()
    with RawClient(broker.bootstrap) as raw:
        raw.request(protocol.FindCoordinatorRequest(key="g10", key_type=0), 1)
        T = Commit.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        committed = call(
            raw,
            Commit(
                group_id="g10",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    T(
                        topic_id=topic_id,
                        partitions=[P(partition_index=0, committed_offset=42)],
                    ),
                    T(topic_id=stray, partitions=[P(partition_index=0, committed_offset=1)]),
                ],
            ),
            10,
        )
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in committed.topics] == [
            (topic_id, [ErrorCode.NONE]),
            (stray, [ErrorCode.UNKNOWN_TOPIC_ID]),
        ]

        G = Fetch.OffsetFetchRequestGroup
        GT = G.OffsetFetchRequestTopics
        fetched = raw.request(
            Fetch(
                groups=[
                    G(
                        group_id="g10",
                        member_id=None,
                        member_epoch=-1,
                        topics=[
                            GT(topic_id=topic_id, partition_indexes=[0, 1]),
                            GT(topic_id=stray, partition_indexes=[0]),
                        ],
                    )
                ],
                require_stable=False,
            ),
            10,
        )
        (group,) = fetched.groups
        got = {
            (t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
            for t in group.topics
            for p in t.partitions
        }
        assert got == {
            (topic_id, 0): (42, ErrorCode.NONE),
            (topic_id, 1): (-1, ErrorCode.NONE),
            (stray, 0): (-1, ErrorCode.UNKNOWN_TOPIC_ID),
        }
        every = raw.request(
            Fetch(
                groups=[G(group_id="g10", member_id=None, member_epoch=-1, topics=None)],
                require_stable=False,
            ),
            10,
        )
        assert [
            (t.topic_id, [p.committed_offset for p in t.partitions]) for t in every.groups[0].topics
        ] == [(topic_id, [42])]

        unknown = raw.request(protocol.DescribeGroupsRequest(groups=["nobody"]), 6).groups[0]
        assert (unknown.error_code, unknown.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
        assert unknown.error_message
        before = raw.request(protocol.DescribeGroupsRequest(groups=["nobody"]), 5).groups[0]
        assert (before.error_code, before.group_state) == (ErrorCode.NONE, "Dead")

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({"g10": None})["g10"]
        assert offsets[TopicPartition("v10", 0)].offset == 42
        described = admin.describe_groups(["g10"])["g10"]  # v6 now
        assert described["group_state"] == "Empty" and not described.get("error")
    finally:
        admin.close()
