"""Client quotas against a running broker, with real clients: a producer or consumer over its
quota gets throttle_time_ms and its connection is muted for it, another client-id is not
throttled; request_percentage and controller_mutation_rate through the same entities;
DescribeClientQuotas / AlterClientQuotas (raw requests: kafka-python's admin client has no quota
calls); quotas survive a restart. Assertions are on the throttle times clients report."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    DescribeClientQuotasRequest,
)
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from odradek.testing import Broker, Cluster
from odradek.testing.raw import RawClient, response_class
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

A = AlterClientQuotasRequest
D = DescribeClientQuotasRequest


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(topics={"t": 1}) as b:
        yield b


def alter(bootstrap: str, entity: dict[str, str | None], ops: dict[str, float | None]) -> Any:
    req = A(
        entries=[
            A.EntryData(
                entity=[
                    A.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()
                ],
                ops=[
                    A.EntryData.OpData(key=k, value=v or 0.0, remove=v is None)
                    for k, v in ops.items()
                ],
            )
        ],
        validate_only=False,
    )
    with RawClient(bootstrap) as c:
        return c.request(req, 1)


def describe(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool) -> Any:
    req = D(
        components=[
            D.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components
        ],
        strict=strict,
    )
    with RawClient(bootstrap) as c:
        return c.request(req, 1)


def as_dict(resp: Any) -> dict[tuple, dict[str, float]]:
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def request_as(c: RawClient, req: Any, version: int, client_id: str) -> Any:
    cid, data = c.encode(req, version, client_id=client_id)
    c.send(data)
    return response_class(req).decode(c.read_frame(), version=version, header=True)


def produce_request(size: int) -> Any:
    batch = build_batch([(None, b"x" * size, (), int(time.time() * 1000))])
    Topic = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            Topic(name="t", partition_data=[Topic.PartitionProduceData(index=0, records=batch)])
        ],
    )


def produce_throttles(bootstrap: str, client_id: str, records: int) -> list[int]:
    """librdkafka's throttle_cb reports the throttle times the broker answers with."""
    seen: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 50,
            "throttle_cb": lambda event: seen.append(event.throttle_time),
        }
    )
    for _ in range(records):
        p.produce("t", b"v" * 1000)
    assert p.flush(30) == 0
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline and client_id == "slow":
        p.poll(0.1)  # throttle_cb is served from poll
    p.poll(0)
    return seen


def test_producer_over_its_quota_is_throttled_another_client_id_is_not(broker: Broker) -> None:
    bs = broker.bootstrap
    assert (
        alter(bs, {"client-id": "slow"}, {"producer_byte_rate": 1000.0}).entries[0].error_code == 0
    )
    # 12 KB in one request against 1 KB/s over Kafka's 10 s minimum span: ~2 s of throttle
    slow = produce_throttles(bs, "slow", 12)
    assert slow and max(slow) > 0
    fast = produce_throttles(bs, "fast", 12)
    assert not any(fast)


def test_the_connection_is_muted_for_the_throttle_time_after_the_answer(broker: Broker) -> None:
    bs = broker.bootstrap
    alter(bs, {"client-id": "muted"}, {"producer_byte_rate": 1000.0})
    with RawClient(bs) as c:
        resp = request_as(c, produce_request(12_000), 9, "muted")
        throttle_ms = resp.throttle_time_ms
        assert resp.responses[0].partition_responses[0].error_code == 0  # written anyway
        assert throttle_ms > 0
        answered = time.monotonic()
        request_as(c, ApiVersionsRequest(), 0, "muted")
        # the broker read nothing from this connection for throttle_time_ms (a lower bound)
        assert time.monotonic() - answered >= throttle_ms / 1000 * 0.9
    with RawClient(bs) as other:  # another client-id on another connection: not throttled
        assert request_as(other, produce_request(12_000), 9, "free").throttle_time_ms == 0


def test_consumer_over_its_quota_gets_throttled_empty_fetches(broker: Broker) -> None:
    bs = broker.bootstrap
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20})
    for _ in range(40):
        p.produce("t", b"r" * 1000)
    assert p.flush(30) == 0
    alter(bs, {"client-id": "reader"}, {"consumer_byte_rate": 1000.0})

    def consume(client_id: str) -> tuple[int, float]:
        c = KafkaConsumer(
            "t",
            bootstrap_servers=bs,
            client_id=client_id,
            auto_offset_reset="earliest",
            consumer_timeout_ms=3000,
        )
        try:
            got = 0
            for _ in c:
                got += 1
                if got == 40:
                    break
            metrics = c.metrics()["consumer-metrics"]
            return got, metrics["throttle-time-max"]
        finally:
            c.close()

    got, throttle = consume("reader")
    assert throttle > 0  # 10 KB per quota window at most, then throttled
    assert got < 40  # the rest waits for the quota (3 s of consuming is not enough)
    assert consume("other") == (40, 0.0)


def test_request_percentage_throttles_and_the_answer_says_so(broker: Broker) -> None:
    bs = broker.bootstrap
    alter(bs, {"client-id": "busy"}, {"request_percentage": 0.001})
    with RawClient(bs) as c:
        throttles = []
        deadline = time.monotonic() + 10
        while not any(throttles) and time.monotonic() < deadline:
            throttles.append(
                request_as(c, MetadataRequest(topics=None), 3, "busy").throttle_time_ms
            )
        assert any(throttles)
    with RawClient(bs) as c:
        assert request_as(c, MetadataRequest(topics=None), 3, "idle").throttle_time_ms == 0


def test_controller_mutation_rate_set_by_alter_client_quotas(broker: Broker) -> None:
    bs = broker.bootstrap
    alter(bs, {"client-id": "creator"}, {"controller_mutation_rate": 1.0})
    T = CreateTopicsRequest.CreatableTopic

    def create(name: str, partitions: int) -> int:
        with RawClient(bs) as c:
            req = CreateTopicsRequest(
                topics=[
                    T(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=1,
                        assignments=[],
                        configs=[],
                    )
                ],
                timeout_ms=5000,
                validate_only=False,
            )
            return request_as(c, req, 6, "creator").topics[0].error_code

    assert create("m1", 20) == 0  # the burst (11) may be overshot once
    assert create("m2", 1) == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_describe_filters_as_kip_546(broker: Broker) -> None:
    bs = broker.bootstrap
    alter(bs, {"user": "alice"}, {"producer_byte_rate": 100.0})
    alter(bs, {"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 200.0})
    alter(bs, {"client-id": None}, {"request_percentage": 50.0})
    everything = as_dict(describe(bs, [], strict=False))
    assert everything == {
        (("user", "alice"),): {"producer_byte_rate": 100.0},
        (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 200.0},
        (("client-id", None),): {"request_percentage": 50.0},
    }
    assert as_dict(describe(bs, [("user", 0, "alice")], strict=True)) == {
        (("user", "alice"),): {"producer_byte_rate": 100.0}
    }
    assert len(as_dict(describe(bs, [("user", 0, "alice")], strict=False))) == 2
    assert as_dict(describe(bs, [("client-id", 1, None)], strict=True)) == {
        (("client-id", None),): {"request_percentage": 50.0}
    }
    assert as_dict(describe(bs, [("client-id", 2, None)], strict=False)) == {
        (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 200.0}
    }
    bad = describe(bs, [("user", 0, None)], strict=True)
    assert bad.error_code == ErrorCode.INVALID_REQUEST and bad.error_message
    # removing the last key removes the entity
    alter(bs, {"user": "alice"}, {"producer_byte_rate": None})
    assert (("user", "alice"),) not in as_dict(describe(bs, [], strict=False))


def test_alter_refuses_bad_entries_one_by_one(broker: Broker) -> None:
    bs = broker.bootstrap
    req = A(
        entries=[
            A.EntryData(
                entity=[A.EntryData.EntityData(entity_type="client-id", entity_name="ok")],
                ops=[A.EntryData.OpData(key="producer_byte_rate", value=5.0, remove=False)],
            ),
            A.EntryData(
                entity=[A.EntryData.EntityData(entity_type="client-id", entity_name="x")],
                ops=[A.EntryData.OpData(key="producer_bytes", value=5.0, remove=False)],
            ),
            A.EntryData(
                entity=[A.EntryData.EntityData(entity_type="topic", entity_name="x")],
                ops=[A.EntryData.OpData(key="producer_byte_rate", value=5.0, remove=False)],
            ),
            A.EntryData(
                entity=[A.EntryData.EntityData(entity_type="client-id", entity_name="y")],
                ops=[A.EntryData.OpData(key="producer_byte_rate", value=-1.0, remove=False)],
            ),
        ],
        validate_only=False,
    )
    with RawClient(bs) as c:
        resp = c.request(req, 0)
    codes = [e.error_code for e in resp.entries]
    assert codes == [0] + [ErrorCode.INVALID_REQUEST] * 3
    assert all(e.error_message for e in resp.entries[1:])
    assert as_dict(describe(bs, [], strict=False)) == {
        (("client-id", "ok"),): {"producer_byte_rate": 5.0}
    }
    req.validate_only = True
    req.entries = req.entries[:1]
    req.entries[0].ops[0].value = 9.0
    with RawClient(bs) as c:
        assert c.request(req, 1).entries[0].error_code == 0
    assert as_dict(describe(bs, [], strict=False))[(("client-id", "ok"),)] == {
        "producer_byte_rate": 5.0
    }


def test_quotas_survive_a_restart(broker: Broker) -> None:
    alter(broker.bootstrap, {"client-id": "slow"}, {"producer_byte_rate": 1000.0})
    broker.restart()
    assert as_dict(describe(broker.bootstrap, [], strict=False)) == {
        (("client-id", "slow"),): {"producer_byte_rate": 1000.0}
    }
    with RawClient(broker.bootstrap) as c:  # and are enforced again
        assert request_as(c, produce_request(12_000), 9, "slow").throttle_time_ms > 0


def test_every_broker_of_a_cluster_enforces_a_quota_set_on_one() -> None:
    with Cluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2, replication_factor=1)
        alter(cluster.address(0), {"client-id": "slow"}, {"producer_byte_rate": 1000.0})
        for node in (0, 1):
            assert as_dict(describe(cluster.address(node), [], strict=False)) == {
                (("client-id", "slow"),): {"producer_byte_rate": 1000.0}
            }
        # produce to the partition broker 1 leads, on broker 1
        index = next(i for i in (0, 1) if cluster.leader("t", i) == 1)
        req = produce_request(12_000)
        req.topic_data[0].partition_data[0].index = index
        with RawClient(cluster.address(1)) as c:
            resp = request_as(c, req, 9, "slow")
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert resp.throttle_time_ms > 0


def test_throttle_time_per_quota_type_is_exported_as_metrics() -> None:
    with Broker(topics={"t": 1}, config={"metrics.listen": "127.0.0.1:0"}) as b:
        alter(b.bootstrap, {"client-id": "slow"}, {"producer_byte_rate": 1000.0})
        with RawClient(b.bootstrap) as c:
            throttle_ms = request_as(c, produce_request(12_000), 9, "slow").throttle_time_ms
        assert throttle_ms > 0
        assert b.server is not None and b.server.metrics is not None
        url = f"http://127.0.0.1:{b.server.metrics.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        series = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in text.splitlines()
            if line.startswith("odradek_quota_")
        }
        produce = 'quota="producer_byte_rate"'
        assert series[f"odradek_quota_throttle_time_ms_total{{{produce}}}"] == throttle_ms
        assert series[f"odradek_quota_throttled_responses_total{{{produce}}}"] == 1
        assert series['odradek_quota_throttled_responses_total{quota="consumer_byte_rate"}'] == 0


AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def test_with_an_authorizer_quotas_need_cluster_describe_and_alter_configs() -> None:
    with Broker(config={"authorizer.class.name": AUTHORIZER}) as b:  # no ACLs: denied
        resp = alter(b.bootstrap, {"client-id": "x"}, {"producer_byte_rate": 10.0})
        assert resp.entries[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        denied = describe(b.bootstrap, [], strict=False)
        assert denied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert b.server is not None and b.server.store.client_quotas == {}
    config = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"}
    with Broker(config=config) as b:
        assert (
            alter(b.bootstrap, {"client-id": "x"}, {"producer_byte_rate": 10.0})
            .entries[0]
            .error_code
            == 0
        )
        assert as_dict(describe(b.bootstrap, [], strict=False)) == {
            (("client-id", "x"),): {"producer_byte_rate": 10.0}
        }


def test_followers_are_never_throttled_by_client_quotas() -> None:
    with Cluster(brokers=2) as cluster:
        bs = cluster.address(0)
        # one byte a second for every client-id and every user, set before the followers'
        # first fetch: a throttled follower could not replicate 40 KB and acks=all would fail
        alter(bs, {"client-id": None}, {"consumer_byte_rate": 1.0})
        alter(bs, {"user": None}, {"consumer_byte_rate": 1.0})
        cluster.create_topic("r", partitions=1, replication_factor=2)
        cluster.wait_for_isr("r", size=2)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        failed: list[Any] = []
        for _ in range(40):
            p.produce("r", b"f" * 1000, on_delivery=lambda err, msg: err and failed.append(err))
        assert p.flush(30) == 0
        assert not failed
        assert len(cluster.isr("r")) == 2
        # while a consumer under the same quotas is throttled
        F = FetchRequest
        req = F(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                F.FetchTopic(
                    topic="r",
                    partitions=[
                        F.FetchTopic.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        leader = cluster.leader("r")
        with RawClient(cluster.address(leader)) as c:
            assert request_as(c, req, 11, "consumer").throttle_time_ms > 0
