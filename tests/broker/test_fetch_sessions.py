"""Incremental fetch sessions (KIP-227) and long polling, at the protocol level."""

from __future__ import annotations

import threading
import time

import pytest

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.records import build_batch

V = 12
FR = protocol.FetchRequest
FT = FR.FetchTopic
FP = FT.FetchPartition


def fetch_request(
    session_id,
    epoch,
    parts,
    forgotten=(),
    max_wait=0,
    min_bytes=0,
    max_bytes=1 << 24,
    partition_max_bytes=1 << 20,
):
    """A consumer's Fetch v12 of (topic, partition, offset) parts."""
    topics = {}
    for topic, p, offset in parts:
        topics.setdefault(topic, []).append(
            FP(
                partition=p,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
        )
    return FR(
        replica_id=-1,
        max_wait_ms=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[FT(topic=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[FR.ForgottenTopic(topic=t, partitions=[p]) for t, p in forgotten],
        rack_id="",
    )


def fetch(client, session_id, epoch, parts, forgotten=(), max_wait=0, min_bytes=0):
    return client.request(
        fetch_request(session_id, epoch, parts, forgotten, max_wait, min_bytes), V
    )


def produce(client, topic, partition, n):
    batch = build_batch([(None, b"v%d" % i, [], int(time.time() * 1000)) for i in range(n)])
    PR = protocol.ProduceRequest
    req = PR(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            PR.TopicProduceData(
                name=topic,
                partition_data=[
                    PR.TopicProduceData.PartitionProduceData(index=partition, records=batch)
                ],
            )
        ],
    )
    resp = client.request(req, 9)
    assert resp.responses[0].partition_responses[0].error_code == 0


def parts_of(resp):
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


@pytest.fixture(scope="module")
def broker():
    with Broker(topics={"s1": 2, "s2": 1}) as b:
        yield b


def test_incremental_session_returns_only_changes(broker):
    with RawClient(broker.bootstrap) as c:
        produce(c, "s1", 0, 3)
        full = fetch(c, 0, 0, [("s1", 0, 0), ("s1", 1, 0), ("s2", 0, 0)])
        assert full.error_code == 0 and full.session_id > 0
        got = parts_of(full)
        assert len(got) == 3 and got[("s1", 0)].high_watermark == 3
        assert len(got[("s1", 0)].records) > 0
        sid = full.session_id
        # nothing changed since: the client advances s1-0 and the answer is empty
        inc = fetch(c, sid, 1, [("s1", 0, 3)])
        assert inc.error_code == 0 and parts_of(inc) == {}
        # new data in a partition the request does not mention still comes back
        produce(c, "s2", 0, 2)
        inc = fetch(c, sid, 2, [])
        assert list(parts_of(inc)) == [("s2", 0)]
        # a forgotten partition is no longer reported
        produce(c, "s1", 1, 1)
        inc = fetch(c, sid, 3, [], forgotten=[("s1", 1)])
        assert ("s1", 1) not in parts_of(inc)
        # a wrong epoch and an unknown session are refused with Kafka's codes
        assert fetch(c, sid, 9, []).error_code == 71  # INVALID_FETCH_SESSION_EPOCH
        assert fetch(c, 123456789, 1, []).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
        # closing the session (epoch -1) falls back to a full, sessionless fetch
        closed = fetch(c, sid, -1, [("s1", 0, 0)])
        assert closed.session_id == 0 and len(parts_of(closed)) == 1


def test_long_poll_waits_for_data_and_wakes_on_append(broker):
    with RawClient(broker.bootstrap) as c, RawClient(broker.bootstrap) as p:
        start = fetch(c, 0, -1, [("s2", 0, 0)])
        hw = parts_of(start)[("s2", 0)].high_watermark
        result = {}

        def poll():
            result["resp"] = fetch(c, 0, -1, [("s2", 0, hw)], max_wait=20000, min_bytes=1)

        t = threading.Thread(target=poll)
        t.start()
        t.join(0.3)
        assert t.is_alive()  # no data yet: the broker holds the fetch
        produce(p, "s2", 0, 1)
        t.join(10)
        assert not t.is_alive()
        part = parts_of(result["resp"])[("s2", 0)]
        assert part.high_watermark == hw + 1 and len(part.records) > 0


def test_fetch_out_of_range_and_unknown_partition(broker):
    with RawClient(broker.bootstrap) as c:
        resp = fetch(c, 0, -1, [("s1", 0, 10_000), ("s1", 9, 0), ("nope", 0, 0)])
        got = parts_of(resp)
        assert got[("s1", 0)].error_code == 1  # OFFSET_OUT_OF_RANGE
        assert got[("s1", 9)].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert got[("nope", 0)].error_code == 3


def test_epoch_zero_with_a_session_id_starts_a_new_session(broker):
    """A client that lost track of its epoch (franz-go after INVALID_FETCH_SESSION_EPOCH) sends
    its old session id with epoch 0: Kafka drops that session and opens a new one with a full
    answer, rather than refusing the epoch again, which left such a consumer refetching
    forever without records."""
    with RawClient(broker.bootstrap) as c:
        produce(c, "s1", 0, 2)
        first = fetch(c, 0, 0, [("s1", 0, 0)])
        sid = first.session_id
        assert sid > 0
        assert fetch(c, sid, 5, []).error_code == 71  # the client's epoch went stale
        again = fetch(c, sid, 0, [("s1", 0, 0)])
        assert again.error_code == 0
        assert again.session_id > 0 and again.session_id != sid
        assert len(parts_of(again)[("s1", 0)].records) > 0
        # the old session is gone, the new one goes on at epoch 1
        assert fetch(c, sid, 1, []).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
        assert fetch(c, again.session_id, 1, [("s1", 0, 2)]).error_code == 0
