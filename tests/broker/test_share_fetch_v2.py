"""ShareFetch and ShareAcknowledge v2 (Kafka 4.2): KIP-1206's acquire modes (batch-optimized by
default, whole batches past MaxRecords, v1 included; record-limit on request) and KIP-1222's
Renew acknowledgement (records stay acquired; refused on v1 and when the group's
share.renew.acknowledge.enable is false), with ShareAcknowledge v2's AcquisitionLockTimeoutMs."""

from __future__ import annotations

import time
import uuid
from typing import Any

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from tests.broker.test_share_sessions import CONFIG, join, produce, topic_entry

FETCH, ACK = 78, 79
WAIT_S = 20.0
RENEW = 4


def call(raw: RawClient, key: int, version: int, **fields: Any) -> Any:
    req = protocol.request_class(key)(**fields)
    _cid, data = raw.encode(req, version)
    raw.send(data)
    return protocol.response_class(key).decode(raw.read_frame(), version=version, header=True)


def fetch(
    raw: RawClient,
    member: str,
    epoch: int,
    topics: list[Any],
    max_records: int = 100,
    mode: int = 0,
    version: int = 2,
    renew: bool = False,
) -> Any:
    extra = {"share_acquire_mode": mode, "is_renew_ack": renew} if version >= 2 else {}
    return call(
        raw,
        FETCH,
        version,
        group_id="g",
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=200,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records,
        topics=topics,
        forgotten_topics_data=[],
        **extra,
    )


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    assert resp.error_code == 0, resp
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in resp.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def until_acquired(fetch_once: Any) -> tuple[list[tuple[int, int, int]], int]:
    """Fetch (the state topic is created on first use) until something is acquired: (the
    ranges, how many fetches it took)."""
    deadline = time.monotonic() + WAIT_S
    n = 0
    while True:
        got = acquired(fetch_once(n))
        n += 1
        if got:
            return got, n
        assert time.monotonic() < deadline, "nothing acquired"


def test_acquire_modes() -> None:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        join(b.bootstrap, "m1")
        tid: uuid.UUID = b.call(lambda s: s.topics.info("t").topic_id)
        with RawClient(b.bootstrap) as raw:
            assert acquired(fetch(raw, "m1", 0, [topic_entry(tid)])) == []  # at log end 0
            produce(b, 10)  # one batch of ten records
            epoch = 1
            # record-limit: exactly MaxRecords
            got, n = until_acquired(lambda i: fetch(raw, "m1", epoch + i, [], 3, mode=1))
            epoch += n
            assert got == [(0, 2, 1)]
            # batch-optimized (the default): the rest of the batch, past MaxRecords
            got, n = until_acquired(lambda i: fetch(raw, "m1", epoch + i, [], 3))
            epoch += n
            assert got == [(3, 9, 1)]
            # v1 acquires the same way (Kafka 4.2 serves v1 batch-optimized)
            produce(b, 10)
            got, n = until_acquired(lambda i: fetch(raw, "m1", epoch + i, [], 3, version=1))
            assert got == [(10, 19, 1)]


def acknowledge(raw: RawClient, epoch: int, tid: uuid.UUID, kind: int, version: int) -> Any:
    T = protocol.request_class(ACK).AcknowledgeTopic
    B = T.AcknowledgePartition.AcknowledgementBatch
    extra = {"is_renew_ack": kind == RENEW} if version >= 2 else {}
    return call(
        raw,
        ACK,
        version,
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
                            B(first_offset=0, last_offset=4, acknowledge_types=[kind])
                        ],
                    )
                ],
            )
        ],
        **extra,
    )


def test_renew_keeps_records_acquired() -> None:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        join(b.bootstrap, "m1")
        join(b.bootstrap, "m2")
        tid: uuid.UUID = b.call(lambda s: s.topics.info("t").topic_id)
        with RawClient(b.bootstrap) as raw, RawClient(b.bootstrap) as other:
            assert acquired(fetch(raw, "m1", 0, [topic_entry(tid)])) == []
            produce(b, 5)
            got, n = until_acquired(lambda i: fetch(raw, "m1", 1 + i, []))
            assert got == [(0, 4, 1)]
            epoch = 1 + n
            # v1 knows no Renew: INVALID_REQUEST for that partition
            old = acknowledge(raw, epoch, tid, RENEW, 1)
            assert old.responses[0].partitions[0].error_code == 42
            epoch += 1
            renewed = acknowledge(raw, epoch, tid, RENEW, 2)
            epoch += 1
            assert renewed.error_code == 0 and renewed.acquisition_lock_timeout_ms == 30000
            assert renewed.responses[0].partitions[0].error_code == 0
            # a renewing ShareFetch acquires nothing new
            produce(b, 5)
            assert acquired(fetch(raw, "m1", epoch, [], renew=True)) == []
            epoch += 1
            # still m1's: m2 gets only the new records, and m1 can accept the renewed ones
            assert acquired(fetch(other, "m2", 0, [topic_entry(tid)])) == [(5, 9, 1)]
            done = acknowledge(raw, epoch, tid, 1, 2)
            assert done.responses[0].partitions[0].error_code == 0


def test_renew_refused_when_the_group_disables_it() -> None:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        b.call(
            lambda s: s.store.alter_group_configs("g", {"share.renew.acknowledge.enable": "false"})
        )
        join(b.bootstrap, "m1")
        tid: uuid.UUID = b.call(lambda s: s.topics.info("t").topic_id)
        with RawClient(b.bootstrap) as raw:
            assert acquired(fetch(raw, "m1", 0, [topic_entry(tid)])) == []
            produce(b, 5)
            _got, n = until_acquired(lambda i: fetch(raw, "m1", 1 + i, []))
            refused = acknowledge(raw, 1 + n, tid, RENEW, 2)
            assert refused.responses[0].partitions[0].error_code == 42
