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
from odradek.wire.api_keys import ApiKey
from odradek.wire.records import build_batch

HEARTBEAT, FETCH, ACK = 76, 78, 79
WAIT_S = 20.0
CONFIG = {"share.coordinator.state.topic.num.partitions": "2"}


def call(raw: RawClient, key: int, client_id: str = "odradek-raw", **fields: Any) -> Any:
    req = protocol.request_class(key)(**fields)
    _cid, data = raw.encode(req, 1, client_id=client_id)
    raw.send(data)
    return protocol.response_class(key).decode(raw.read_frame(), version=1, header=True)


def fetch(
    raw: RawClient,
    member: str,
    epoch: int,
    topics: list[Any],
    wait_ms: int = 0,
    client_id: str = "odradek-raw",
) -> Any:
    """A ShareFetch on `raw`: a share session belongs to the connection that opened it."""
    return call(
        raw,
        FETCH,
        client_id,
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


def acknowledge(
    raw: RawClient, member: str, epoch: int, tid: uuid.UUID, acks: list[tuple[int, int, list[int]]]
) -> Any:
    T = protocol.request_class(ACK).AcknowledgeTopic
    B = T.AcknowledgePartition.AcknowledgementBatch
    return call(
        raw,
        ACK,
        group_id="g",
        member_id=member,
        share_session_epoch=epoch,
        topics=[
            T(
                topic_id=tid,
                partitions=[
                    T.AcknowledgePartition(
                        partition_index=0,
                        acknowledgement_batches=[
                            B(first_offset=f, last_offset=last, acknowledge_types=t)
                            for f, last, t in acks
                        ],
                    )
                ],
            )
        ],
    )


def heartbeat(bootstrap: str, member: str, epoch: int) -> Any:
    """ShareGroupHeartbeat on a connection of its own, as a client's coordinator connection."""
    with RawClient(bootstrap) as raw:
        return call(
            raw,
            HEARTBEAT,
            group_id="g",
            member_id=member,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=["t"] if epoch == 0 else None,
        )


def join(bootstrap: str, member: str) -> Any:
    resp = heartbeat(bootstrap, member, 0)
    assert resp.error_code == 0 and resp.member_epoch > 0
    return resp


def leave(bootstrap: str, member: str) -> None:
    left = heartbeat(bootstrap, member, -1)
    assert (left.error_code, left.member_epoch) == (0, -1)


def produce(b: Broker, n: int, batches: int = 1, size: int = 0) -> None:
    """`batches` batches of `n` records each (values of `size` bytes, or short ones)."""

    async def append(server: Any) -> None:
        part = server.topics.get("t", 0)
        for _ in range(batches):
            values = [b"v" * size if size else b"v%d" % i for i in range(n)]
            part.append_internal(build_batch([(None, v, [], 0) for v in values]))

    b.call(append)


def acquire_all(raw: RawClient, member: str, epoch: int, tid: uuid.UUID) -> Any:
    """Fetch until records are acquired (the state topic is created on first use): (the
    acquired ranges, the next session epoch)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = fetch(raw, member, epoch, [topic_entry(tid)] if epoch == 0 else [], 200)
        assert resp.error_code == 0
        epoch += 1
        acquired = [a for t in resp.responses for p in t.partitions for a in p.acquired_records]
        if acquired:
            return acquired, epoch
        assert time.monotonic() < deadline, "nothing acquired"


def ranges(acquired: list[Any]) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired]


def test_session_epochs_and_acknowledgement_errors() -> None:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        bs = b.bootstrap
        join(bs, "m1")
        tid = b.call(lambda s: s.topics.info("t").topic_id)
        with RawClient(bs) as c1, RawClient(bs) as c2:
            assert fetch(c1, "m1", 1, []).error_code == 122  # SHARE_SESSION_NOT_FOUND
            # INVALID_SHARE_SESSION_EPOCH: ShareAcknowledge cannot open one
            assert acknowledge(c1, "m1", 0, tid, []).error_code == 123
            first = fetch(c1, "m1", 0, [topic_entry(tid)])  # opens the session (at log end 0)
            assert first.error_code == 0 and first.acquisition_lock_timeout_ms == 30000
            produce(b, 3)
            acquired, epoch = acquire_all(c1, "m1", 1, tid)
            assert ranges(acquired) == [(0, 2, 1)]
            assert fetch(c1, "m1", epoch + 5, []).error_code == 123
            # m2 may not acknowledge m1's records; an offset never acquired is refused too
            join(bs, "m2")
            other = fetch(c2, "m2", 0, [topic_entry(tid, [(0, 0, [1])])])
            (p,) = other.responses[0].partitions
            assert p.acknowledge_error_code == 121  # INVALID_RECORD_STATE
            resp = fetch(c1, "m1", epoch, [topic_entry(tid, [(0, 1, [1]), (5, 5, [1])])])
            (p,) = resp.responses[0].partitions
            assert p.acknowledge_error_code == 121  # offset 5 was never acquired; 0-1 accepted
            epoch += 1
            ack = acknowledge(c1, "m1", epoch, tid, [(2, 2, [2])])
            assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
            # m2 gets the released record, delivered a second time
            acquired, _ = acquire_all(c2, "m2", 1, tid)
            assert ranges(acquired) == [(2, 2, 2)]

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
        with RawClient(b.bootstrap) as c3:
            acquired, _ = acquire_all(c3, "m3", 0, tid)
            assert ranges(acquired) == [(2, 2, 3)]


def test_acknowledgements_sent_beside_the_leave_apply() -> None:
    """A closing consumer sends its leave heartbeat to the coordinator and its last
    acknowledgements (ShareAcknowledge, epoch -1) to the partition leader on another connection,
    in either order: when the leave comes first, the acknowledgements still apply, and what was
    accepted or rejected never comes back."""
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        bs = b.bootstrap
        join(bs, "m1")
        tid = b.call(lambda s: s.topics.info("t").topic_id)
        with RawClient(bs) as c1, RawClient(bs) as c2:
            assert fetch(c1, "m1", 0, [topic_entry(tid)]).error_code == 0  # at log end 0
            produce(b, 4)
            acquired, epoch = acquire_all(c1, "m1", 1, tid)
            assert ranges(acquired) == [(0, 3, 1)]
            leave(bs, "m1")
            # accept 0-1, reject 2; 3 is not acknowledged and goes back when the session ends
            last = acknowledge(c1, "m1", -1, tid, [(0, 1, [1]), (2, 2, [3])])
            assert last.error_code == 0
            assert [p.error_code for t in last.responses for p in t.partitions] == [0]
            assert fetch(c1, "m1", epoch, []).error_code == 122  # the session is closed
            join(bs, "m2")
            acquired, epoch = acquire_all(c2, "m2", 0, tid)
            assert ranges(acquired) == [(3, 3, 2)]
            produce(b, 1)
            acquired, _ = acquire_all(c2, "m2", epoch, tid)
            assert ranges(acquired) == [(4, 4, 1)]


def test_records_are_released_when_the_sessions_connection_closes() -> None:
    """Leaving the group keeps a member's records until its share session ends; a session
    ends with its epoch -1 or with the connection that opened it (Kafka's ShareSessionCache
    disconnect listener); a session opened again on a new connection outlives the old one."""
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        bs = b.bootstrap
        join(bs, "m1")
        tid = b.call(lambda s: s.topics.info("t").topic_id)

        def closed(raw: RawClient) -> None:
            before = b.call(lambda s: len(s.connections))
            raw.close()
            deadline = time.monotonic() + WAIT_S
            while b.call(lambda s: len(s.connections)) >= before:
                assert time.monotonic() < deadline, "the broker never saw the close"
                time.sleep(0.01)

        c1, c2 = RawClient(bs), RawClient(bs)
        try:
            assert fetch(c1, "m1", 0, [topic_entry(tid)]).error_code == 0
            produce(b, 2)
            acquired, _ = acquire_all(c1, "m1", 1, tid)
            assert ranges(acquired) == [(0, 1, 1)]
            join(bs, "m2")
            assert fetch(c2, "m2", 0, [topic_entry(tid)], wait_ms=50).responses == []
            leave(bs, "m1")
            assert fetch(c2, "m2", 1, [], wait_ms=50).responses == []  # still m1's
            closed(c1)
            acquired, _ = acquire_all(c2, "m2", 2, tid)
            assert ranges(acquired) == [(0, 1, 2)]
            with RawClient(bs) as c3:  # m2 opens its session again, on another connection
                acquired, epoch = acquire_all(c3, "m2", 0, tid)
                assert ranges(acquired) == [(0, 1, 3)]  # released when the old session ended
                closed(c2)  # the old connection: the session on c3 stays
                ack = acknowledge(c3, "m2", epoch, tid, [(0, 1, [1])])
                assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
        finally:
            c1.close()
            c2.close()


def test_a_consumer_byte_rate_quota_throttles_share_fetch() -> None:
    """consumer_byte_rate applies to ShareFetch as to Fetch: MaxBytes capped at one quota
    window's worth (1000 B/s x 10 s), then throttle_time_ms, the connection muted, no records in
    the throttled answer, and the records it would have carried available again to others,
    never delivered before."""
    Alter = protocol.request_class(ApiKey.ALTER_CLIENT_QUOTAS)
    E = Alter.EntryData
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        bs = b.bootstrap
        with RawClient(bs) as admin:
            quota = E(
                entity=[E.EntityData(entity_type="client-id", entity_name="slow")],
                ops=[E.OpData(key="consumer_byte_rate", value=1000.0, remove=False)],
            )
            resp = admin.request(Alter(entries=[quota], validate_only=False), 1)
            assert resp.entries[0].error_code == 0
        join(bs, "m1")
        join(bs, "m2")
        tid = b.call(lambda s: s.topics.info("t").topic_id)
        with RawClient(bs) as c1, RawClient(bs) as c2:
            assert fetch(c1, "m1", 0, [topic_entry(tid)], client_id="slow").error_code == 0
            produce(b, 1, batches=30, size=1000)  # 30 batches of about 1.1 KB
            delivered: list[tuple[int, int, int]] = []
            epoch, throttled = 1, None
            for _ in range(5):
                resp = fetch(c1, "m1", epoch, [], 200, client_id="slow")
                epoch += 1
                parts = [p for t in resp.responses for p in t.partitions]
                if resp.throttle_time_ms > 0:
                    throttled = resp
                    break
                assert sum(len(p.records) for p in parts) <= 10_000
                delivered += [r for p in parts for r in ranges(p.acquired_records)]
            assert throttled is not None, "never throttled"
            assert [p.acquired_records for t in throttled.responses for p in t.partitions] in (
                [],
                [[]],
            )
            assert delivered and {count for _f, _l, count in delivered} == {1}
            assert b.call(lambda s: s.quotas.fetch.throttled) >= 1
            # another client-id takes what the throttled answer left, as first deliveries
            rest: list[tuple[int, int, int]] = []
            epoch2 = 0
            while sum(last - first + 1 for first, last, _c in delivered + rest) < 30:
                acquired, epoch2 = acquire_all(c2, "m2", epoch2, tid)
                rest += ranges(acquired)
            assert {count for _f, _l, count in rest} == {1}
            offsets = sorted(o for f, last, _c in delivered + rest for o in range(f, last + 1))
            assert offsets == list(range(30))
