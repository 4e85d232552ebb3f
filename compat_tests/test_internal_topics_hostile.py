"""Hostile writes to the internal topics, and coordinator records too large to store (issue 11,
defects 1 and 4), against a real `odradek serve` process over raw frames.

- A client's Produce to `__transaction_state` or `__consumer_offsets` is refused with
  INVALID_TOPIC_EXCEPTION (Kafka's ReplicaManager: "Cannot append to internal topic"), so a
  62-byte batch with a valid CRC and an undecodable records section can no longer stop the
  broker from starting or a group coordinator from loading, and a forged offset commit is never
  served.
- A SyncGroup whose assignment would make a group-metadata record larger than the offsets
  topic's `max.message.bytes` fails with UNKNOWN_SERVER_ERROR (Kafka's
  GroupMetadataManager.storeGroup) instead of writing an 8 MB batch; the group can rebalance
  and sync again, and after kill -9 another group's acknowledged commit is still there.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

import pytest
from crc32c import crc32c
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest
from kafka.protocol.producer import InitProducerIdRequest

from compat_tests.harness import BrokerProcess, find_coordinator, offset_commit_request, produce
from compat_tests.test_bad_input import create_topic
from odradek.coordinator.group import records as group_records
from odradek.testing.raw import RawClient

pytestmark = pytest.mark.compat

NONE = 0
UNKNOWN_SERVER_ERROR = -1
INVALID_TOPIC_EXCEPTION = 17
INVALID_COMMIT_OFFSET_SIZE = 28
OFFSETS_TOPIC = "__consumer_offsets"
STATE_TOPIC = "__transaction_state"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions default
WAIT_S = 15.0


# -- requests ------------------------------------------------------------------------------------


def commit_many(
    client: RawClient, group: str, topic: str, offset: int, partitions: int, metadata: str = ""
) -> set[int]:
    """Commit `offset` for partitions 0..partitions-1; the set of error codes answered."""
    req = offset_commit_request(group, topic, dict.fromkeys(range(partitions), offset), metadata)
    (topic_resp,) = client.request(req, 7).topics
    return {part.error_code for part in topic_resp.partitions}


def commit(client: RawClient, group: str, topic: str, offset: int) -> int:
    (error,) = commit_many(client, group, topic, offset, 1)
    return error


def committed(client: RawClient, group: str, topic: str) -> int:
    """The group's committed offset for topic-0 (-1 when none), retrying while loading."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    deadline = time.monotonic() + WAIT_S
    while True:
        req = OffsetFetchRequest(
            group_id=group, topics=[T(name=topic, partition_indexes=[0])], require_stable=False
        )
        resp = client.request(req, 7)
        if resp.error_code == NONE:
            (part,) = resp.topics[0].partitions
            assert part.error_code == NONE, resp
            return part.committed_offset
        assert time.monotonic() < deadline, f"OffsetFetch({group}): {resp}"
        time.sleep(0.05)


def join(client: RawClient, group: str, member_id: str = "") -> tuple[str, int]:
    """A one-member group's JoinGroup (v3: no member id round trip): (member id, generation)."""
    P = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[P(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")],
    )
    resp = client.request(req, 3)
    assert resp.error_code == NONE, resp
    assert resp.leader == resp.member_id
    return resp.member_id, resp.generation_id


def sync(client: RawClient, group: str, member: str, generation: int, assignment: bytes) -> int:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    req = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member,
        assignments=[A(member_id=member, assignment=assignment)],
    )
    return client.request(req, 2).error_code


# -- the hostile batch ---------------------------------------------------------------------------


def one_byte_records_batch() -> bytes:
    """A 62-byte RecordBatch v2 with a valid CRC claiming one record in a 1-byte section."""
    now = int(time.time() * 1000)
    body = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1) + b"\x01"
    crc = crc32c(body)
    batch = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(body), 0, 2, crc) + body
    assert len(batch) == 62
    return batch


def forged_commit_batch(group: str, topic: str, offset: int) -> bytes:
    from odradek.wire.records import build_batch

    key = group_records.offset_key(group, topic, 0)
    value = group_records.offset_value(group_records.OffsetValue(offset, "", 0))
    return bytes(build_batch([(key, value, (), int(time.time() * 1000))]))


# -- tests ---------------------------------------------------------------------------------------


def test_produce_to_transaction_state_is_refused_and_the_broker_restarts(
    fresh_broker: Callable[..., BrokerProcess],
) -> None:
    broker = fresh_broker()
    with RawClient(broker.bootstrap) as client:
        find_coordinator(client, "txn-victim", 1)
        resp = produce(client, STATE_TOPIC, 0, one_byte_records_batch(), acks=1)
        assert resp.error_code == INVALID_TOPIC_EXCEPTION, resp
        assert resp.error_message == f"Cannot append to internal topic {STATE_TOPIC}"
    broker.restart()
    with RawClient(broker.bootstrap) as client:
        find_coordinator(client, "txn-victim", 1)
        resp = client.request(
            InitProducerIdRequest(
                transactional_id="txn-victim",
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
            ),
            4,
        )
        assert resp.error_code == NONE, resp
        assert resp.producer_id >= 0


def test_produce_to_consumer_offsets_is_refused_and_no_forged_commit_is_served(
    fresh_broker: Callable[..., BrokerProcess],
) -> None:
    broker = fresh_broker()
    group = "offsets-victim"
    partition = group_records.partition_for(group, OFFSETS_PARTITIONS)
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, "t") == NONE
        find_coordinator(client, group, 0)
        assert commit(client, group, "t", 7) == NONE
        for batch in (one_byte_records_batch(), forged_commit_batch(group, "t", 424242)):
            for acks in (1, -1):
                resp = produce(client, OFFSETS_TOPIC, partition, batch, acks)
                assert resp.error_code == INVALID_TOPIC_EXCEPTION, resp
        assert committed(client, group, "t") == 7
    broker.restart()
    with RawClient(broker.bootstrap) as client:
        find_coordinator(client, group, 0)
        assert committed(client, group, "t") == 7
        assert commit(client, group, "t", 8) == NONE
        assert committed(client, group, "t") == 8


def _same_partition_group(group: str) -> str:
    """Another group id whose offsets live in the same `__consumer_offsets` partition."""
    target = group_records.partition_for(group, OFFSETS_PARTITIONS)
    for i in range(10_000):
        other = f"bystander-{i}"
        if group_records.partition_for(other, OFFSETS_PARTITIONS) == target:
            return other
    raise AssertionError("no group id found on the same partition")


def test_oversized_assignment_is_refused_and_a_kill_keeps_other_commits(
    fresh_broker: Callable[..., BrokerProcess],
) -> None:
    broker = fresh_broker()
    big_group = "huge-assignment"
    bystander = _same_partition_group(big_group)
    with RawClient(broker.bootstrap, timeout=60) as client:
        assert create_topic(client, "t") == NONE
        find_coordinator(client, big_group, 0)
        member, generation = join(client, big_group)
        error = sync(client, big_group, member, generation, b"\xab" * (8 << 20))
        assert error == UNKNOWN_SERVER_ERROR
        # the group is not left broken: it rebalances and takes a normal assignment
        member, generation = join(client, big_group, member)
        assert sync(client, big_group, member, generation, b"\x00\x01") == NONE
        assert commit(client, bystander, "t", 99) == NONE
    broker.restart(hard=True)
    with RawClient(broker.bootstrap) as client:
        find_coordinator(client, bystander, 0)
        assert committed(client, bystander, "t") == 99


def test_offset_commit_over_the_offsets_topic_limit_is_refused(
    fresh_broker: Callable[..., BrokerProcess],
) -> None:
    """30 offsets with 4000-byte metadata make a 120 KB batch, over message.max.bytes 100 KB:
    INVALID_COMMIT_OFFSET_SIZE for every partition (Kafka's maybeConvertOffsetCommitError),
    nothing stored, and a commit that fits still succeeds."""
    broker = fresh_broker({"message.max.bytes": "100000"})
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, "t", partitions=30) == NONE
        find_coordinator(client, "wide", 0)
        assert commit_many(client, "wide", "t", 5, 30, "m" * 4000) == {INVALID_COMMIT_OFFSET_SIZE}
        assert committed(client, "wide", "t") == -1
        assert commit_many(client, "wide", "t", 6, 30, "m" * 100) == {NONE}
        assert committed(client, "wide", "t") == 6
