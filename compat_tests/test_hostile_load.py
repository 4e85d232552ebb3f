"""Hostile load against a real `odradek serve` process: memory and work bounds (issue 11, 5-6).

A client may pipeline requests and never read the answers, announce huge frames it never sends,
or send small requests that cause a lot of work. None of that may grow the broker without bound
or stop it from serving other clients (Kafka mutes a connection while a request is in flight,
bounds request memory with `queued.max.request.bytes`, and caps controller work per request).

Memory is the broker process's VmRSS from /proc; the bounds asserted are tens of MB against
hundreds of MB (or GBs) before the fixes. "Not frozen" is asserted by ordering: a bystander's
round trips all complete while a big request is still unanswered.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.test_bad_input import create_topic, produce
from odradek.testing.raw import RawClient
from odradek.wire.records import build_batch

pytestmark = pytest.mark.compat

NONE = 0
POLICY_VIOLATION = 44
THROTTLING_QUOTA_EXCEEDED = 89
MB = 1 << 20
_SIZE = struct.Struct(">i")
WAIT_S = 60.0


def rss_mb(broker: BrokerProcess) -> float:
    """The broker process's resident set size in MiB (VmRSS)."""
    with open(f"/proc/{broker.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def framed(req: object, version: int, correlation_id: int = 1) -> bytes:
    req.with_header(correlation_id=correlation_id, client_id="hostile")  # type: ignore[attr-defined]
    return req.encode(version=version, header=True, framed=True)  # type: ignore[attr-defined]


def api_versions_ok(client: RawClient) -> None:
    resp = client.request(ApiVersionsRequest(), 0)
    assert resp.error_code == NONE


def readable(sock: socket.socket, timeout: float = 0.0) -> bool:
    return bool(select.select([sock], [], [], timeout)[0])


def send_until_stalled(sock: socket.socket, data: bytes, stall_s: float = 2.0) -> int:
    """Send `data` without blocking; stop when the socket stays unwritable for `stall_s`.

    Returns the bytes sent. A broker that keeps reading takes everything; one that mutes the
    connection leaves the rest in the client, which is what a blocked real client sees.
    """
    sock.setblocking(False)
    view = memoryview(data)
    sent = 0
    while sent < len(data):
        if not select.select([], [sock], [], stall_s)[1]:
            break
        try:
            sent += sock.send(view[sent : sent + MB])
        except BlockingIOError:
            continue
    return sent


@contextmanager
def raw_sockets(broker: BrokerProcess, count: int, rcvbuf: int | None = None) -> Iterator[list]:
    with ExitStack() as stack:
        socks = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            if rcvbuf is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.connect((broker.host, broker.port))
            socks.append(sock)
        yield socks


def big_produce(topic: str, size: int) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(size))])
        ],
    )


# -- defect 5: memory per connection -------------------------------------------------------------


def test_client_that_never_reads_answers_cannot_grow_the_broker(fresh_broker) -> None:
    broker = fresh_broker()
    with RawClient(broker.bootstrap) as admin:
        api_versions_ok(admin)
        before = rss_mb(broker)
        # 10 DescribeGroups of 30,000 names (60 KB asked, ~540 KB answered: together more than
        # the socket buffers hold), never read; then 40 produce requests of 8 MB (to a topic
        # that does not exist: each would be answered with an error, if it were ever read)
        describes = framed(DescribeGroupsRequest(groups=[""] * 30_000), 0) * 10
        produces = framed(big_produce(unique_name("absent"), 8 * MB), 7) * 40
        with raw_sockets(broker, 1, rcvbuf=4096) as (hostile,):
            sent = send_until_stalled(hostile, describes + produces)
            grown = rss_mb(broker) - before
            assert grown < 64, f"broker grew {grown:.0f} MB for one client that never reads"
            assert sent < len(describes) + len(produces) // 2, "the broker kept reading"
            api_versions_ok(admin)  # others are still served
        # the muted connection's memory is given back: a large request goes through
        topic = unique_name("after")
        assert create_topic(admin, topic) == NONE
        batch = build_batch([(None, bytes(900_000), [], int(time.time() * 1000))])
        assert produce(admin, topic, 0, batch).error_code == NONE


def test_length_prefixes_announcing_100mb_allocate_nothing(fresh_broker) -> None:
    broker = fresh_broker()
    with RawClient(broker.bootstrap) as bystander:
        api_versions_ok(bystander)
        before = rss_mb(broker)
        with raw_sockets(broker, 36) as hogs:
            for sock in hogs:
                sock.sendall(_SIZE.pack(100_000_000) + b"\x00\x03")
            # the broker reads the prefixes in the order they came; by the time a bystander
            # has made three round trips after them, it has seen them all
            for _ in range(3):
                api_versions_ok(bystander)
            grown = rss_mb(broker) - before
            assert grown < 64, f"36 prefixes of 100 MB grew the broker by {grown:.0f} MB"
            # small requests are served; a large one waits for the memory pool...
            groups = [f"g{i}" for i in range(30_000)]  # a ~150 KB frame
            with RawClient(broker.bootstrap) as large:
                large.send(framed(DescribeGroupsRequest(groups=groups), 0, 7))
                api_versions_ok(bystander)
                assert not readable(large.sock, 0.3), "answered while the pool was exhausted"
                for sock in hogs:
                    sock.close()
                # ...and is answered once the hogs' reservations are given back
                payload = large.read_frame(WAIT_S)
                assert _SIZE.unpack_from(payload)[0] == 7
                api_versions_ok(large)


# -- defect 6: work per request ------------------------------------------------------------------


def test_describe_groups_with_400k_names_does_not_freeze_others(broker: BrokerProcess) -> None:
    names = [""] * 400_000
    with RawClient(broker.bootstrap, timeout=WAIT_S) as big, RawClient(broker.bootstrap) as other:
        api_versions_ok(other)
        big.send(framed(DescribeGroupsRequest(groups=names), 0, 11))
        for _ in range(20):  # before the fix the loop was blocked ~12 s by the big request
            api_versions_ok(other)
            resp = other.request(MetadataRequest(topics=[]), 1)
            assert resp.brokers
        assert not readable(big.sock), "the big request was answered before the bystander"
        payload = big.read_frame(WAIT_S)
        assert _SIZE.unpack_from(payload)[0] == 11
        decoded = _describe_groups_response(payload)
        assert len(decoded.groups) == len(names)
        assert {g.group_id for g in decoded.groups} == {""}


def _describe_groups_response(payload: bytes):
    from kafka.protocol.admin import DescribeGroupsResponse

    return DescribeGroupsResponse.decode(payload, version=0, header=True)


def test_metadata_with_100k_topic_ids_does_not_freeze_others(broker: BrokerProcess) -> None:
    import uuid

    T = MetadataRequest.MetadataRequestTopic
    topics = [T(topic_id=uuid.uuid4(), name=None) for _ in range(100_000)]
    req = MetadataRequest(
        topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with RawClient(broker.bootstrap, timeout=WAIT_S) as big, RawClient(broker.bootstrap) as other:
        api_versions_ok(other)
        big.send(framed(req, 12, 5))
        for _ in range(10):
            api_versions_ok(other)
        assert not readable(big.sock), "the big request was answered before the bystander"
        payload = big.read_frame(WAIT_S)
        assert _SIZE.unpack_from(payload)[0] == 5


def _create_topics(topics: list, validate_only: bool) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=topics, timeout_ms=10_000, validate_only=validate_only)


def _creatable(name: str, partitions: int) -> object:
    T = CreateTopicsRequest.CreatableTopic
    return T(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_topics_with_3m_partitions_is_refused_without_work(
    fresh_broker, validate_only: bool
) -> None:
    broker = fresh_broker()
    name = unique_name("huge")
    with RawClient(broker.bootstrap) as client:
        api_versions_ok(client)
        before = rss_mb(broker)
        resp = client.request(_create_topics([_creatable(name, 3_000_000)], validate_only), 5)
        (result,) = resp.topics
        assert result.error_code == POLICY_VIOLATION, result
        grown = rss_mb(broker) - before
        assert grown < 32, f"refusing 3M partitions grew the broker by {grown:.0f} MB"
        # Kafka's limit is on the whole request: two topics of 6,000 partitions are refused too
        pair = [_creatable(name + "-a", 6000), _creatable(name + "-b", 6000)]
        resp = client.request(_create_topics(pair, validate_only), 5)
        assert [t.error_code for t in resp.topics] == [POLICY_VIOLATION] * 2
        # and a reasonable request still works
        resp = client.request(_create_topics([_creatable(name, 3)], validate_only), 5)
        assert resp.topics[0].error_code == NONE
        md = client.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name + "-a")],
                allow_auto_topic_creation=False,
            ),
            4,
        )
        assert md.topics[0].error_code != NONE  # nothing of the refused request was created


def test_create_partitions_over_the_record_limit_is_refused(broker: BrokerProcess) -> None:
    from kafka.protocol.admin import CreatePartitionsRequest

    name = unique_name("grow")
    T = CreatePartitionsRequest.CreatePartitionsTopic
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, name) == NONE
        before = rss_mb(broker)
        for validate_only in (True, False):
            req = CreatePartitionsRequest(
                topics=[T(name=name, count=2_000_000_000, assignments=None)],
                timeout_ms=10_000,
                validate_only=validate_only,
            )
            (result,) = client.request(req, 3).results
            assert result.error_code == POLICY_VIOLATION, result
        grown = rss_mb(broker) - before
        assert grown < 32, f"refusing 2e9 partitions grew the broker by {grown:.0f} MB"
        req = CreatePartitionsRequest(
            topics=[T(name=name, count=3, assignments=None)], timeout_ms=10_000, validate_only=False
        )
        assert client.request(req, 3).results[0].error_code == NONE


def test_controller_mutation_quota_throttles_topic_creation(fresh_broker) -> None:
    from kafka.protocol.admin import CreateTopicsResponse

    broker = fresh_broker(
        {
            "odradek.controller.mutation.rate": "1",
            "controller.quota.window.num": "2",
            "controller.quota.window.size.seconds": "1",
        }
    )
    base = unique_name("quota")

    def create(name: str, partitions: int, version: int, client_id: str = "quota-test"):
        # a connection per request: a throttled connection is muted for the throttle time
        with RawClient(broker.bootstrap) as client:
            req = _create_topics([_creatable(name, partitions)], False)
            req.with_header(correlation_id=client.next_id(), client_id=client_id)
            client.send(req.encode(version=version, header=True, framed=True))
            return CreateTopicsResponse.decode(client.read_frame(), version=version, header=True)

    # burst = 2 windows x 1 s x 1/s = 2 partitions; one topic may take the bucket below zero
    assert create(base + "-a", 2, 6).topics[0].error_code == NONE
    assert create(base + "-b", 30, 6).topics[0].error_code == NONE
    resp = create(base + "-c", 1, 6)
    assert resp.topics[0].error_code == THROTTLING_QUOTA_EXCEEDED, resp
    assert resp.throttle_time_ms > 0
    # v5 and older cannot be told THROTTLING_QUOTA_EXCEEDED: the topic is created, and the
    # response carries the throttle time
    resp = create(base + "-d", 1, 5)
    assert resp.topics[0].error_code == NONE
    assert resp.throttle_time_ms > 0
    # the quota is per client id: another client is not throttled
    resp = create(base + "-e", 1, 6, client_id="another-client")
    assert resp.topics[0].error_code == NONE
    assert resp.throttle_time_ms == 0


def _many_partitions_request(kind: str, name: str, count: int) -> tuple[object, int]:
    """A CreateTopics or CreatePartitions asking for `count` partitions, and its version."""
    if kind == "create-topics":
        return _create_topics([_creatable(name, count)], validate_only=False), 5
    from kafka.protocol.admin import CreatePartitionsRequest

    T = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest(
        topics=[T(name=name, count=count, assignments=None)], timeout_ms=10_000, validate_only=False
    )
    return req, 3


@pytest.mark.parametrize("kind", ["create-topics", "create-partitions"])
def test_creating_a_thousand_partitions_does_not_freeze_others(fresh_broker, kind: str) -> None:
    """Each new partition opens a log (a directory and three files); the chaos/fuzz runs found
    a CreatePartitions to 127 partitions holding every other client for ~800 ms."""
    broker = fresh_broker()
    name = unique_name("many")
    with RawClient(broker.bootstrap, timeout=WAIT_S) as big, RawClient(broker.bootstrap) as other:
        if kind == "create-partitions":
            assert create_topic(big, name) == NONE
        api_versions_ok(other)
        req, version = _many_partitions_request(kind, name, 1000)
        big.send(framed(req, version, 21))
        for _ in range(5):
            api_versions_ok(other)
        assert not readable(big.sock), "the big request was answered before the bystander"
        payload = big.read_frame(WAIT_S)
        assert _SIZE.unpack_from(payload)[0] == 21
        md = other.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=False,
            ),
            4,
        )
        assert md.topics[0].error_code == NONE
        assert len(md.topics[0].partitions) == 1000
