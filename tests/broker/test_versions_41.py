"""Kafka 4.1's maximum versions where clients use them (issue 15): kafka-python takes odradek
for Kafka 4.1 from ApiVersions; ListOffsets v10, Produce v13 by topic id (an unknown id is
UNKNOWN_TOPIC_ID), Fetch v18; and KIP-951 leader discovery: a Produce (v10+) or Fetch (v16+)
sent to a broker that is not the partition's leader answers NOT_LEADER_OR_FOLLOWER with the
leader and its epoch (CurrentLeader) and the leader's endpoint (NodeEndpoints)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient

from odradek.testing import Broker, Cluster
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
Produce = protocol.ProduceRequest
Fetch = protocol.FetchRequest


def produce_request(topic: str, topic_id: uuid.UUID | None, index: int = 0) -> object:
    batch = build_batch([(None, b"v", [], 1_700_000_000_000)])
    return Produce(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic,
                topic_id=topic_id,
                partition_data=[
                    Produce.TopicProduceData.PartitionProduceData(index=index, records=batch)
                ],
            )
        ],
    )


def fetch_request(topic_id: uuid.UUID, index: int = 0) -> object:
    T = Fetch.FetchTopic
    return Fetch(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic="",
                topic_id=topic_id,
                partitions=[
                    T.FetchPartition(
                        partition=index,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(topics={"t": 1}) as b:
        yield b


def test_kafka_python_sees_kafka_41(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        # at least 4.1; DescribeLogDirs v5 (Kafka 4.3+) now makes it the newest it knows, 4.3
        assert admin._client.check_version() == (4, 3)
    finally:
        admin.close()


def test_produce_v13_by_topic_id_list_offsets_v10_fetch_v18(broker: Broker) -> None:
    topic_id = broker.server.topics.info("t").topic_id
    with RawClient(broker.bootstrap) as raw:
        resp = raw.request(produce_request("", topic_id), 13)
        (part,) = resp.responses[0].partition_responses
        assert resp.responses[0].topic_id == topic_id and part.error_code == 0
        unknown = uuid.uuid4()
        resp = raw.request(produce_request("", unknown), 13)
        assert resp.responses[0].topic_id == unknown
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        L = protocol.ListOffsetsRequest
        lo = raw.request(
            L(
                replica_id=-1,
                isolation_level=0,
                timeout_ms=1000,
                topics=[
                    L.ListOffsetsTopic(
                        name="t",
                        partitions=[
                            L.ListOffsetsTopic.ListOffsetsPartition(
                                partition_index=0, current_leader_epoch=-1, timestamp=-1
                            )
                        ],
                    )
                ],
            ),
            10,
        )
        assert lo.topics[0].partitions[0].offset == part.base_offset + 1
        fetched = raw.request(fetch_request(topic_id), 18)
        (fp,) = fetched.responses[0].partitions
        assert fp.error_code == 0 and fp.high_watermark == part.base_offset + 1


def test_kip951_leader_discovery_in_produce_and_fetch() -> None:
    with Cluster(brokers=2, topics={"one": (1, 1)}) as cluster:
        leader = cluster.leader("one")
        other = 1 - leader
        state = cluster.partition("one")
        topic_id = cluster.call(lambda c: c.store.topics["one"].topic_id)
        host, port = cluster.address(leader).rsplit(":", 1)
        with RawClient(cluster.address(other)) as raw:
            resp = raw.request(produce_request("one", None), 10)
            (part,) = resp.responses[0].partition_responses
            assert part.error_code == NOT_LEADER
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
                leader,
                state.leader_epoch,
            )
            assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [
                (leader, host, int(port))
            ]
            old = raw.request(produce_request("one", None), 9)  # before KIP-951: no hint
            assert old.responses[0].partition_responses[0].error_code == NOT_LEADER

            fetched = raw.request(fetch_request(topic_id), 16)
            (fp,) = fetched.responses[0].partitions
            assert fp.error_code == NOT_LEADER
            assert (fp.current_leader.leader_id, fp.current_leader.leader_epoch) == (
                leader,
                state.leader_epoch,
            )
            assert [(n.node_id, n.host, n.port) for n in fetched.node_endpoints] == [
                (leader, host, int(port))
            ]


def test_list_transactions_v2_pattern(broker: Broker) -> None:
    import confluent_kafka as ck

    producers = []
    for tid in ("orders-1", "orders-2", "billing"):
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        p.init_transactions(20)
        producers.append(p)
    L = protocol.ListTransactionsRequest

    def listed(pattern: str | None, version: int = 2) -> tuple[int, list[str]]:
        req = L(state_filters=[], producer_id_filters=[], duration_filter=-1)
        if version >= 2:
            req.transactional_id_pattern = pattern
        with RawClient(broker.bootstrap) as raw:
            resp = raw.request(req, version)
        return resp.error_code, sorted(t.transactional_id for t in resp.transaction_states)

    try:
        assert listed("orders-.*") == (0, ["orders-1", "orders-2"])
        assert listed("orders") == (0, [])  # the whole id must match
        assert listed("") == (0, ["billing", "orders-1", "orders-2"])
        assert listed(None) == (0, ["billing", "orders-1", "orders-2"])
        assert listed("(") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])
        assert listed(None, 1) == (0, ["billing", "orders-1", "orders-2"])
    finally:
        for p in producers:
            p.flush(5)
