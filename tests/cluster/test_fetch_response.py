"""The follower's in-place reading of Fetch v12 answers (replication/fetch_response.py) agrees
with kafka-python's decoder on a real answer, tagged fields and aborted transactions included,
and every cut-short or garbled frame is refused with MalformedResponse (the fetcher then drops
the connection), never another exception."""

from __future__ import annotations

import random

import pytest

from odradek.broker.replication.fetch_response import MalformedResponse, parse_fetch_v12
from odradek.wire import protocol
from odradek.wire.records import build_batch

R = protocol.FetchResponse
PD = R.FetchableTopicResponse.PartitionData


def _frame() -> tuple[bytes, bytes]:
    records = build_batch([(b"k", b"v" * 100, (), 1_700_000_000_000)] * 3)
    resp = R(
        throttle_time_ms=0,
        error_code=0,
        session_id=77,
        responses=[
            R.FetchableTopicResponse(
                topic="orders",
                partitions=[
                    PD(
                        partition_index=0,
                        error_code=0,
                        high_watermark=3,
                        last_stable_offset=3,
                        log_start_offset=0,
                        aborted_transactions=[PD.AbortedTransaction(producer_id=9, first_offset=1)],
                        preferred_read_replica=-1,
                        records=bytes(records),
                        current_leader=PD.LeaderIdAndEpoch(leader_id=2, leader_epoch=5),
                    ),
                    PD(
                        partition_index=1,
                        error_code=6,  # NOT_LEADER_OR_FOLLOWER
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=None,
                    ),
                ],
            )
        ],
    )
    header = (5).to_bytes(4, "big") + b"\x00"  # response header v1: correlation id, no tags
    return header + bytes(resp.encode(version=12)), bytes(records)


def test_parse_agrees_with_kafka_python() -> None:
    frame, records = _frame()
    answer = parse_fetch_v12(frame)
    assert (answer.error_code, answer.session_id) == (0, 77)
    p0, p1 = answer.partitions
    assert (p0.topic, p0.partition, p0.error_code) == ("orders", 0, 0)
    assert (p0.high_watermark, p0.last_stable_offset, p0.log_start_offset) == (3, 3, 0)
    assert p0.records is not None and bytes(p0.records) == records
    assert (p1.partition, p1.error_code, p1.records) == (1, 6, None)
    decoded = R.decode(frame[5:], version=12)
    assert decoded.responses[0].partitions[0].records == records


def test_cut_or_garbled_frames_are_refused() -> None:
    frame, _ = _frame()
    for end in range(len(frame) - 1):
        try:
            parse_fetch_v12(frame[:end])
        except MalformedResponse:
            continue
        # a cut that happens to end on a field boundary may still parse: never past the data
    rng = random.Random(17)
    for _ in range(300):
        buf = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        try:
            parse_fetch_v12(buf)
        except MalformedResponse:
            pass
    with pytest.raises(MalformedResponse):
        parse_fetch_v12(frame[:20])
