"""Hostile but decodable requests get Kafka's error codes on an open connection, not a traceback.

Metadata v10+ naming a topic by neither name nor id (a null name with the zero id) made the
handler fail on the missing id; Kafka's KafkaApis refuses such a request with INVALID_REQUEST for
each topic. AlterClientQuotas v0 with a 32,767-byte entity type or key (the most an int16 string
length allows) quoted it in an error message the response's int16 string length could not hold.
Read/Write/DeleteShareGroupState of the zero topic id failed while keying the state records;
an OffsetCommit retention of Long.MAX overflowed the offset record; any other error message
quoting a 32,767-byte value (IncrementalAlterConfigs v0) is cut where the response is encoded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from odradek.testing import Broker
from odradek.testing.fuzz import TracebackCatcher
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

M = protocol.MetadataRequest
A = protocol.AlterClientQuotasRequest
LONGEST = 0x7FFF  # the longest string a non-flexible (int16 length) field carries
READ_STATE, WRITE_STATE = ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE
DELETE_STATE = ApiKey.DELETE_SHARE_GROUP_STATE


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(topics={"known": 1}, config={"auto.create.topics.enable": "true"}) as b:
        yield b


def metadata(client: RawClient, version: int, topics: list[tuple[str | None, uuid.UUID | None]]):
    req = M(
        version=version,
        topics=[M.MetadataRequestTopic(version=version, name=n, topic_id=i) for n, i in topics],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return client.request(req, version)


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_metadata_topic_with_neither_name_nor_id_is_an_invalid_request(
    broker: Broker, version: int
) -> None:
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        resp = metadata(client, version, [("known", None), (None, None)])
        assert [(t.error_code, t.name, t.partitions) for t in resp.topics] == [
            (ErrorCode.INVALID_REQUEST, "known", []),
            (ErrorCode.INVALID_REQUEST, "", []),
        ]
        # the connection is still served, and a well-formed request still works
        resp = metadata(client, version, [("known", None)])
        assert [(t.error_code, t.name, len(t.partitions)) for t in resp.topics] == [(0, "known", 1)]
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_topic_id_before_v12_is_an_invalid_request(broker: Broker, version: int) -> None:
    with RawClient(broker.bootstrap) as client:
        resp = metadata(client, version, [("known", uuid.uuid4())])
        assert [t.error_code for t in resp.topics] == [ErrorCode.INVALID_REQUEST]


def test_metadata_unknown_topic_id_still_answers_unknown_topic_id(broker: Broker) -> None:
    unknown = uuid.uuid4()
    with RawClient(broker.bootstrap) as client:
        resp = metadata(client, 12, [(None, unknown)])
        assert [(t.error_code, t.topic_id) for t in resp.topics] == [
            (ErrorCode.UNKNOWN_TOPIC_ID, unknown)
        ]


def quota_entry(entity_type: str, key: str) -> object:
    e = A.EntryData
    return e(
        version=0,
        entity=[e.EntityData(version=0, entity_type=entity_type, entity_name="n")],
        ops=[e.OpData(version=0, key=key, value=1.0, remove=False)],
    )


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    "entity_type,key",
    [("x" * LONGEST, "producer_byte_rate"), ("user", "k" * LONGEST)],
    ids=["long-entity-type", "long-key"],
)
def test_alter_client_quotas_with_the_longest_strings_is_an_invalid_request(
    broker: Broker, version: int, entity_type: str, key: str
) -> None:
    req = A(version=version, entries=[quota_entry(entity_type, key)], validate_only=False)
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        resp = client.request(req, version)
        [entry] = resp.entries
        assert entry.error_code == ErrorCode.INVALID_REQUEST
        assert entry.error_message and len(entry.error_message.encode()) <= LONGEST
        assert [(e.entity_type, e.entity_name) for e in entry.entity] == [(entity_type, "n")]
        assert client.request(protocol.ApiVersionsRequest(), 0).error_code == 0
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


def share_state_request(key: int, topic_id: uuid.UUID | None, partition: int) -> object:
    cls = protocol.request_class(key)
    names = {
        READ_STATE: "ReadStateData",
        WRITE_STATE: "WriteStateData",
        DELETE_STATE: "DeleteStateData",
    }
    topic_cls = getattr(cls, names[key])
    part = topic_cls.PartitionData
    if key == READ_STATE:
        p = part(version=0, partition=partition, leader_epoch=0)
    elif key == DELETE_STATE:
        p = part(version=0, partition=partition)
    else:
        p = part(
            version=0,
            partition=partition,
            state_epoch=0,
            leader_epoch=0,
            start_offset=0,
            state_batches=[],
        )
    topic = topic_cls(version=0, topic_id=topic_id, partitions=[p])
    return cls(version=0, group_id="share", topics=[topic])


@pytest.mark.parametrize(
    "key", [READ_STATE, WRITE_STATE, DELETE_STATE], ids=["read", "write", "delete"]
)
@pytest.mark.parametrize(
    "topic_id,partition,code",
    [
        (None, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (uuid.uuid4(), -1, ErrorCode.INVALID_REQUEST),
    ],
    ids=["zero-topic-id", "negative-partition"],
)
def test_share_group_state_of_no_topic_or_a_negative_partition(
    broker: Broker, key: int, topic_id: uuid.UUID | None, partition: int, code: ErrorCode
) -> None:
    """As Kafka's ShareCoordinatorShard: a negative partition is INVALID_REQUEST, the zero
    topic id names no topic (UNKNOWN_TOPIC_OR_PARTITION); neither reaches the state records."""
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        resp = client.request(share_state_request(key, topic_id, partition), 0)
        assert [[p.error_code for p in r.partitions] for r in resp.results] == [[code]]
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions_of_a_topic_with_the_longest_name(broker: Broker, version: int) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION, its message quoting the name cut short (whole, it no longer
    fit the int16 string length of v0-1)."""
    cls = protocol.CreatePartitionsRequest
    topic = cls.CreatePartitionsTopic(
        version=version, name="x" * LONGEST, count=3, assignments=None
    )
    req = cls(version=version, topics=[topic], timeout_ms=5000, validate_only=False)
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        [result] = client.request(req, version).results
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert result.name == "x" * LONGEST
        assert len(result.error_message) < 300, result.error_message[:300]
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


@pytest.mark.parametrize("version", [1, 4, 5])
def test_create_topics_with_the_longest_name(broker: Broker, version: int) -> None:
    cls = protocol.CreateTopicsRequest
    topic = cls.CreatableTopic(
        version=version,
        name="x" * LONGEST,
        num_partitions=1,
        replication_factor=1,
        assignments=[],
        configs=[],
    )
    req = cls(version=version, topics=[topic], timeout_ms=5000, validate_only=False)
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        [result] = client.request(req, version).topics
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert len(result.error_message) < 400, result.error_message[:300]
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_commit_with_the_longest_retention(broker: Broker, version: int) -> None:
    """A retention of Long.MAX (v2-4) is added to the commit time as Kafka's Java long; the sum
    overflowed the offset record's int64 and the commit failed with a traceback."""
    cls = protocol.OffsetCommitRequest
    topic_cls = cls.OffsetCommitRequestTopic
    part = topic_cls.OffsetCommitRequestPartition(
        version=version, partition_index=0, committed_offset=5, committed_metadata="m"
    )
    req = cls(
        version=version,
        group_id=f"retention-{version}",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=(1 << 63) - 1,
        topics=[topic_cls(version=version, name="known", partitions=[part])],
    )
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        find = protocol.FindCoordinatorRequest(key=req.group_id, key_type=0)
        deadline = time.monotonic() + 30
        while True:  # as a client: find the coordinator (creating __consumer_offsets), commit
            client.request(find, 1)
            resp = client.request(req, version)
            codes = [[p.error_code for p in t.partitions] for t in resp.topics]
            if codes != [[ErrorCode.NOT_COORDINATOR]] and codes != [
                [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
            ]:
                break
            assert time.monotonic() < deadline, codes
            time.sleep(0.05)  # polling a retriable answer, as a client's backoff
        assert codes == [[0]]
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_with_the_longest_config_name(
    broker: Broker, version: int
) -> None:
    """INVALID_CONFIG for the unknown key; the message quoting it whole did not fit v0's int16
    string length, and the response failed to encode."""
    cls = protocol.IncrementalAlterConfigsRequest
    res_cls = cls.AlterConfigsResource
    config = res_cls.AlterableConfig(
        version=version, name="x" * LONGEST, config_operation=0, value="1"
    )
    resource = res_cls(version=version, resource_type=2, resource_name="known", configs=[config])
    req = cls(version=version, resources=[resource], validate_only=True)
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        [result] = client.request(req, version).responses
        assert result.error_code == ErrorCode.INVALID_CONFIG
        assert result.resource_name == "known"
        assert result.error_message.startswith("Unknown topic config name: xxx")
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]


def test_a_null_element_of_a_nullable_string_array_closes_the_connection(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """As Kafka's generated readers ("element was serialized as null"), even when the array
    itself is nullable (ShareGroupHeartbeat's subscribed topics): one warning, no traceback. The
    null reached the share group's assignor, which failed sorting it."""
    req = protocol.ShareGroupHeartbeatRequest(
        version=1,
        group_id="share",
        member_id="m" * 22,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=["known", None],
    )
    with TracebackCatcher() as catcher, RawClient(broker.bootstrap) as client:
        client.send(client.encode(req, 1)[1])
        assert client.outcome() == "closed"
    assert not catcher.bad, [r.getMessage() for r in catcher.bad]
    assert any("null element" in r.getMessage() for r in caplog.records), caplog.text
