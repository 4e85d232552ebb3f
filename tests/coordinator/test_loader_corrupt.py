"""Coordinators load past corrupt records (issue 11, defect 1b).

Batches that cannot be decoded (a records section of one byte, a gzip section of garbage) and
records whose key or value breaks the schema are written straight into the logs of
`__consumer_offsets` and `__transaction_state` of an in-process broker, bypassing Produce (which
refuses internal topics). After a restart, clean or as after kill -9, the broker starts, each bad
batch or record is logged and skipped, the groups' commits written before and after are served,
and the transactional id's producer id survives.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from crc32c import crc32c
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.producer import InitProducerIdRequest

from compat_tests.harness import find_coordinator, offset_commit_request
from odradek.coordinator.group import records as group_records
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch

OFFSETS = "__consumer_offsets"
STATE = "__transaction_state"
CONFIG = {"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1}
WAIT_S = 15.0
GZIP = 1


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(topics={"t": 1}, config=CONFIG) as b:
        yield b


def commit(client: RawClient, group: str, offset: int) -> None:
    req = offset_commit_request(group, "t", {0: offset})
    deadline = time.monotonic() + WAIT_S
    while True:
        (part,) = client.request(req, 7).topics[0].partitions
        if part.error_code == ErrorCode.NONE:
            return
        assert part.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, part
        assert time.monotonic() < deadline, part
        time.sleep(0.05)


def committed(client: RawClient, group: str) -> int:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    req = OffsetFetchRequest(
        group_id=group, topics=[T(name="t", partition_indexes=[0])], require_stable=False
    )
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = client.request(req, 7)
        if resp.error_code == ErrorCode.NONE:
            return resp.topics[0].partitions[0].committed_offset
        assert resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, resp
        assert time.monotonic() < deadline, resp
        time.sleep(0.05)


def init_producer_id(client: RawClient, tid: str) -> tuple[int, int]:
    req = InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
    )
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = client.request(req, 4)
        if resp.error_code == ErrorCode.NONE:
            return resp.producer_id, resp.producer_epoch
        assert resp.error_code in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
        ), resp
        assert time.monotonic() < deadline, resp
        time.sleep(0.05)


# -- bad batches, each with a valid CRC ----------------------------------------------------------


def raw_batch(records: bytes, count: int, attributes: int = 0) -> bytes:
    """A RecordBatch v2 around an arbitrary records section, with a correct CRC."""
    now = int(time.time() * 1000)
    body = struct.pack(">hiqqqhii", attributes, count - 1, now, now, -1, -1, -1, count) + records
    return struct.pack(">qiibI", 0, 9 + len(body), 0, 2, crc32c(body)) + body


def bad_batches(group: str) -> list[bytes]:
    offset_key = group_records.offset_key(group, "t", 0)
    now = int(time.time() * 1000)
    return [
        raw_batch(b"\x01", 1),  # record count 1 in a 1-byte section
        raw_batch(b"\x1f\x8b" + b"not gzip at all" * 4, 1, GZIP),  # undecodable compression
        raw_batch(b"\x00" * 5, 1000),  # count that the section cannot hold
        bytes(
            build_batch(
                [
                    (b"\x00\x01\x7f\xff", b"value", (), now),  # key string overruns
                    (offset_key, b"\x00\x03garbage", (), now),  # unknown value version
                    (offset_key, b"\x00\x01\x00", (), now),  # truncated value
                    (group_records.group_key(group), b"\x00\x02\xff", (), now),  # bad group value
                ]
            )
        ),
    ]


def bad_state_batches() -> list[bytes]:
    now = int(time.time() * 1000)
    return [
        raw_batch(b"\x01", 1),
        bytes(
            build_batch(
                [
                    (b"\x00\x00\x7f\xff", b"value", (), now),  # key string overruns
                    (b"\x00\x00\x00\x03tid", b"\x00\x07junk", (), now),  # unknown value version
                    (b"\x00\x00\x00\x03tid", b"\x00\x00\x00", (), now),  # truncated value
                ]
            )
        ),
    ]


def append(broker: Broker, topic: str, batch: bytes) -> None:
    def write(server: Any) -> None:
        result = server.topics.get(topic, 0).append_internal(batch)
        assert result.error == ErrorCode.NONE, result

    broker.call(write)


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean", "kill"])
def test_coordinators_load_past_corrupt_records(
    broker: Broker, abrupt: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with RawClient(broker.bootstrap) as client:
        find_coordinator(client, "g", 0)
        commit(client, "g", 5)
        commit(client, "h", 7)
        pid, epoch = init_producer_id(client, "tid")
        for batch in bad_batches("g"):
            append(broker, OFFSETS, batch)
        for batch in bad_state_batches():
            append(broker, STATE, batch)
        commit(client, "g", 6)  # after the bad batches: must load too
    caplog.set_level(logging.WARNING)
    broker.restart(abrupt=abrupt)
    with RawClient(broker.bootstrap) as client:
        find_coordinator(client, "g", 0)
        assert committed(client, "g") == 6
        assert committed(client, "h") == 7
        commit(client, "h", 8)
        assert committed(client, "h") == 8
        assert init_producer_id(client, "tid") == (pid, epoch + 1)
    text = caplog.text
    assert text.count(f"{OFFSETS}-0: skipping undecodable batch") == 3
    assert text.count(f"{OFFSETS}-0: skipping unreadable record") == 4
    assert text.count(f"{STATE}-0: skipping undecodable batch") == 1
    assert text.count(f"{STATE}-0: skipping unreadable record") == 3
