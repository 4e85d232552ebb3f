"""Share sessions and acknowledgement errors at the protocol level (KIP-932, ShareFetch and
ShareAcknowledge v1), and the ShareSnapshot records in `__share_group_state`."""

from __future__ import annotations

import time
import uuid
from typing import Any

from odradek.coordinator.share import records as rec
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.records import build_batch

HEARTBEAT, FETCH, ACK = 76, 78, 79
WAIT_S = 20.0
CONFIG = {"share.coordinator.state.topic.num.partitions": "2"}


def call(bootstrap: str, key: int, **fields: Any) -> Any:
    req = protocol.request_class(key)(**fields)
    with RawClient(bootstrap) as raw:
        _cid, data = raw.encode(req, 1)
        raw.send(data)
        return protocol.response_class(key).decode(raw.read_frame(), version=1, header=True)


def fetch(bootstrap: str, member: str, epoch: int, topics: list[Any], wait_ms: int = 0) -> Any:
    return call(
        bootstrap,
        FETCH,
        group_id="g",
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=topics,
        forgotten_topics_data=[],
    )


def topic_entry(topic_id: uuid.UUID, acks: list[tuple[int, int, list[int]]] | None = None) -> Any:
    R = protocol.request_class(FETCH).FetchTopic
    batches = [
        R.FetchPartition.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=t)
        for f, last, t in acks or []
    ]
    return R(
        topic_id=topic_id,
        partitions=[R.FetchPartition(partition_index=0, acknowledgement_batches=batches)],
    )


def join(bootstrap: str, member: str) -> Any:
    resp = call(
        bootstrap,
        HEARTBEAT,
        group_id="g",
        member_id=member,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=["t"],
    )
    assert resp.error_code == 0 and resp.member_epoch > 0
    return resp


def produce(b: Broker, n: int) -> None:
    async def append(server: Any) -> None:
        part = server.topics.get("t", 0)
        part.append_internal(build_batch([(None, b"v%d" % i, [], 0) for i in range(n)]))

    b.call(append)


def acquire_all(bootstrap: str, member: str, epoch: int, tid: uuid.UUID, n: int) -> Any:
    """Fetch until `n` records are acquired (the state topic is created on first use)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = fetch(bootstrap, member, epoch, [topic_entry(tid)] if epoch == 0 else [], 200)
        assert resp.error_code == 0
        epoch += 1
        acquired = [a for t in resp.responses for p in t.partitions for a in p.acquired_records]
        if acquired:
            return acquired, epoch
        assert time.monotonic() < deadline, "nothing acquired"


def test_session_epochs_and_acknowledgement_errors() -> None:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        bs = b.bootstrap
        join(bs, "m1")
        tid = b.call(lambda s: s.topics.info("t").topic_id)
        assert fetch(bs, "m1", 1, []).error_code == 122  # SHARE_SESSION_NOT_FOUND
        assert (
            call(bs, ACK, group_id="g", member_id="m1", share_session_epoch=0, topics=[]).error_code
            == 123
        )  # INVALID_SHARE_SESSION_EPOCH: ShareAcknowledge cannot open one
        first = fetch(bs, "m1", 0, [topic_entry(tid)])  # opens the session (start: log end 0)
        assert first.error_code == 0 and first.acquisition_lock_timeout_ms == 30000
        produce(b, 3)
        acquired, epoch = acquire_all(bs, "m1", 1, tid, 3)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(0, 2, 1)]
        assert fetch(bs, "m1", epoch + 5, []).error_code == 123
        # m2 may not acknowledge m1's records; an offset never acquired is refused too
        join(bs, "m2")
        other = fetch(bs, "m2", 0, [topic_entry(tid, [(0, 0, [1])])])
        (p,) = other.responses[0].partitions
        assert p.acknowledge_error_code == 121  # INVALID_RECORD_STATE
        resp = fetch(bs, "m1", epoch, [topic_entry(tid, [(0, 1, [1]), (5, 5, [1])])])
        (p,) = resp.responses[0].partitions
        assert p.acknowledge_error_code == 121  # offset 5 was never acquired; 0-1 accepted
        epoch += 1
        T = protocol.request_class(ACK).AcknowledgeTopic
        ack = call(
            bs,
            ACK,
            group_id="g",
            member_id="m1",
            share_session_epoch=epoch,
            topics=[
                T(
                    topic_id=tid,
                    partitions=[
                        T.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                T.AcknowledgePartition.AcknowledgementBatch(
                                    first_offset=2, last_offset=2, acknowledge_types=[2]
                                )
                            ],
                        )
                    ],
                )
            ],
        )
        assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
        # m2 gets the released record, delivered a second time
        acquired, _ = acquire_all(bs, "m2", 1, tid, 1)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(2, 2, 2)]

        # the state topic holds ShareSnapshot records of this share-partition
        def snapshots(server: Any) -> list[rec.ShareValue]:
            out = []
            for i in range(2):
                part = server.topics.get("__share_group_state", i)
                for _h, records in part.log.records(None, part.high_watermark):
                    for r in records:
                        key = rec.decode_key(bytes(r.key))
                        if key == rec.ShareKey("g", tid, 0):
                            out.append(rec.decode_value(bytes(r.value)))
            return out

        last = b.call(snapshots)[-1]
        assert last.start_offset == 2
        assert [(x.first_offset, x.last_offset, x.delivery_state) for x in last.batches] == [
            (2, 2, 0)  # acquired by m2: persisted as available
        ]
        b.restart(abrupt=True)
        acquired, _ = acquire_all(b.bootstrap, "m3", 0, tid, 1)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(2, 2, 3)]


def test_a_member_leaving_releases_its_records() -> None:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        bs = b.bootstrap
        m1 = join(bs, "m1")
        tid = b.call(lambda s: s.topics.info("t").topic_id)
        assert fetch(bs, "m1", 0, [topic_entry(tid)]).error_code == 0  # the share-partition
        produce(b, 2)
        acquired, _ = acquire_all(bs, "m1", 1, tid, 2)
        assert [(a.first_offset, a.last_offset) for a in acquired] == [(0, 1)]
        join(bs, "m2")
        assert fetch(bs, "m2", 0, [topic_entry(tid)], wait_ms=50).responses == []  # all held
        left = call(
            bs,
            HEARTBEAT,
            group_id="g",
            member_id="m1",
            member_epoch=-1,
            rack_id=None,
            subscribed_topic_names=None,
        )
        assert (left.error_code, left.member_epoch) == (0, -1)
        assert m1.member_epoch > 0
        acquired, _ = acquire_all(bs, "m2", 1, tid, 2)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(0, 1, 2)]
