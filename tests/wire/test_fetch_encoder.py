"""The zero-copy Fetch encoder must produce what kafka-python's generated decoder reads."""

from __future__ import annotations

import struct
import tempfile
import uuid

import pytest

from odradek.wire import protocol
from odradek.wire.fetch_encoder import PartitionData, TopicData, encode_fetch_response
from odradek.wire.regions import FileRegion


def flatten(pieces) -> bytes:
    out = b""
    for p in pieces:
        if isinstance(p, FileRegion):
            p.file.seek(p.position)
            out += p.file.read(p.length)
        else:
            out += p
    return out


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_response_decodes_with_kafka_python(version):
    payload = b"R" * 100
    with tempfile.TemporaryFile() as f:
        f.write(b"xx" + payload + b"yy")
        tid = uuid.uuid4()
        topics = [
            TopicData(
                "orders",
                tid.bytes,
                [
                    PartitionData(0, 0, 10, 9, 2, [(5, 3)], -1, [FileRegion(f, 2, 100)]),
                    PartitionData(1, 1, 4, 4, 0, None, -1, []),
                ],
            )
        ]
        raw = flatten(encode_fetch_response(version, 42, topics, session_id=77))
    (size,) = struct.unpack_from(">i", raw)
    assert size == len(raw) - 4
    (corr,) = struct.unpack_from(">i", raw, 4)
    assert corr == 42
    body = raw[9:] if version >= 12 else raw[8:]
    resp = protocol.FetchResponse.decode(body, version=version)
    topic = resp.responses[0]
    if version >= 13:
        assert topic.topic_id == tid
    else:
        assert topic.topic == "orders"
    p0, p1 = topic.partitions
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset) == (0, 10, 9)
    assert p0.records == payload
    assert [(a.producer_id, a.first_offset) for a in p0.aborted_transactions] == [(5, 3)]
    assert p1.error_code == 1 and p1.aborted_transactions is None
    if version >= 5:
        assert p0.log_start_offset == 2
    if version >= 7:
        assert resp.session_id == 77
