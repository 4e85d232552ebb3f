"""Hostile batch contents over raw Produce frames against a real `odradek serve` process
(issue 11, defects 2 and 3).

Each batch has a valid CRC, so only a look inside its records section can catch it: a
decompression bomb answers CORRUPT_MESSAGE without the broker's memory growing by the bomb's
size, and records whose framing lies answer INVALID_RECORD. Nothing is appended, no traceback
is logged, and the broker keeps serving (the canary of test_bad_input.py).
"""

from __future__ import annotations

import threading

import pytest

from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.test_bad_input import (
    EARLIEST,
    INVALID_RECORD,
    LATEST,
    NONE,
    Canary,
    assert_serving,
    create_topic,
    list_offset,
    plant_canary,
    produce,
)
from odradek.testing.hostile_batches import bomb_batch, raw_batch
from odradek.testing.log_lines import stream_bomb_batch
from odradek.testing.raw import RawClient
from odradek.wire.compression import GZIP, LZ4, SNAPPY, ZSTD
from odradek.wire.records import build_batch, write_varint

pytestmark = pytest.mark.compat

MB = 1 << 20


def status_bytes(broker: BrokerProcess, field: str) -> int:
    """A size field (VmRSS, VmHWM) of the broker process's /proc status, in bytes."""
    with open(f"/proc/{broker.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} line")


def reset_peak_rss(broker: BrokerProcess) -> int:
    """Reset the process's peak RSS (VmHWM) to its current RSS; returns that RSS."""
    with open(f"/proc/{broker.pid}/clear_refs", "w") as f:
        f.write("5")
    return status_bytes(broker, "VmRSS")


@pytest.fixture(scope="module")
def canary(broker: BrokerProcess) -> Canary:
    return plant_canary(broker)


def assert_nothing_appended(c: RawClient, topic: str) -> None:
    assert list_offset(c, topic, 0, LATEST) == (NONE, 0)


# (codec, MiB it inflates to, topic compression.type): the 35 KB zstd batch declaring
# about 1 GB, a gzip and an lz4 bomb, each where the topic recompresses and where it does not
@pytest.mark.parametrize(
    ("codec", "mib", "topic_codec"),
    [
        (ZSTD, 1024, "gzip"),
        (ZSTD, 1024, "producer"),
        (GZIP, 256, "zstd"),
        (LZ4, 128, "snappy"),
        (SNAPPY, 20, "lz4"),
    ],
    ids=["zstd-1GiB-recompressed", "zstd-1GiB", "gzip-256MiB", "lz4-128MiB", "snappy-20MiB"],
)
def test_decompression_bomb_of_zeros_is_invalid_record_and_memory_stays_flat(
    broker: BrokerProcess, canary: Canary, codec: int, mib: int, topic_codec: str
) -> None:
    """Zeros read as a record of length 0: refused at the first record, as Kafka refuses it
    (INVALID_RECORD), whatever the stream would inflate to."""
    data = bomb_batch(codec, mib)
    assert len(data) < 1_000_000  # within the default max.message.bytes
    topic = unique_name("bomb")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic, configs={"compression.type": topic_codec}) == NONE
        before = reset_peak_rss(broker)
        for _ in range(3):
            assert produce(c, topic, 0, data, acks=1).error_code == INVALID_RECORD
        # the peak, not the RSS after: a freed gigabyte no longer shows in VmRSS
        grown = status_bytes(broker, "VmHWM") - before
        assert_nothing_appended(c, topic)
    assert grown < 100 * MB, f"broker peak RSS grew by {grown // MB} MB"
    assert "Traceback" not in broker.log_text()
    assert_serving(canary)


# (codec, MiB): one valid record whose value is that many MiB of zeros, in a batch of at most
# 1 MiB; Kafka accepts such a batch (max.message.bytes bounds the compressed size only)
STREAM_BOMBS = [(ZSTD, 1024), (GZIP, 1000), (ZSTD, 2047)]


def test_valid_batch_inflating_to_gigabytes_is_walked_in_flat_memory(
    broker: BrokerProcess, canary: Canary
) -> None:
    """Three connections each produce batches inflating to 1-2 GB at once; the broker walks
    them as streams off its event loop: they are accepted as Kafka accepts them, its peak RSS
    stays flat, and other clients are served meanwhile and after."""
    topic = unique_name("streambomb")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
    bombs = [stream_bomb_batch(codec, mib) for codec, mib in STREAM_BOMBS]
    assert all(len(b) <= 1_048_588 for b in bombs)  # the default max.message.bytes
    before = reset_peak_rss(broker)
    answers: list[int] = []

    def send(data: bytes) -> None:
        with RawClient(broker.bootstrap, timeout=120) as c:
            answers.append(produce(c, topic, 0, data, acks=1).error_code)

    threads = [threading.Thread(target=send, args=(b,)) for b in bombs]
    for t in threads:
        t.start()
    try:
        assert_serving(canary)  # while the bombs are in flight
    finally:
        for t in threads:
            t.join(timeout=300)
    assert answers == [NONE] * len(bombs)
    grown = status_bytes(broker, "VmHWM") - before
    assert grown < 100 * MB, f"broker peak RSS grew by {grown // MB} MB"
    with RawClient(broker.bootstrap) as c:
        assert list_offset(c, topic, 0, LATEST) == (NONE, len(bombs))
    assert "Traceback" not in broker.log_text()
    assert_serving(canary)


def test_many_concurrent_gigabyte_batches_keep_memory_flat(
    broker: BrokerProcess, canary: Canary
) -> None:
    """Thirty connections send a 33 KB batch inflating to 1 GiB at once: the walks run one at a
    time and a batch waiting its turn holds nothing but its bytes, so the broker's peak RSS
    stays within a few windows, not thirty."""
    topic = unique_name("manybombs")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
    bomb = stream_bomb_batch(ZSTD, 1024)
    clients = [RawClient(broker.bootstrap, timeout=300) for _ in range(30)]
    answers: list[int] = []
    try:
        before = reset_peak_rss(broker)
        threads = [
            threading.Thread(
                target=lambda c=c: answers.append(produce(c, topic, 0, bomb).error_code)
            )
            for c in clients
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        grown = status_bytes(broker, "VmHWM") - before
    finally:
        for c in clients:
            c.close()
    assert answers == [NONE] * len(clients)
    assert grown < 50 * MB, f"broker peak RSS grew by {grown // MB} MB"
    assert_serving(canary)


def _framing_cases() -> list[tuple[str, bytes]]:
    huge = bytearray()
    write_varint(huge, 0x7FFFFFFF)
    huge += b"\x00\x00\x00\x02k\x02v\x00"
    huge += bytes(118 - 61 - len(huge))
    good = build_batch([(b"k", b"v", (), 1), (b"k2", b"v2", (), 2)])[61:]
    return [
        ("0x7fffffff record length in a 118-byte frame", raw_batch(bytes(huge), 1)),
        ("count larger than the records", raw_batch(good, 3)),
        ("truncated record", raw_batch(good[:-2], 2)),
        ("trailing garbage", raw_batch(good + b"\x02\x00", 2)),
        (
            "offset deltas 1, 1",
            raw_batch(good.replace(b"\x00\x00\x02k\x02", b"\x00\x02\x02k\x02"), 2),
        ),
    ]


@pytest.mark.parametrize(
    ("case", "data"), _framing_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_bad_record_framing_is_invalid_record(
    broker: BrokerProcess, canary: Canary, case: str, data: bytes
) -> None:
    topic = unique_name("framing")
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
        assert produce(c, topic, 0, data, acks=1).error_code == INVALID_RECORD, case
        assert_nothing_appended(c, topic)
        # a later ListOffsets by timestamp on the partition answers (it used to drop the link)
        assert list_offset(c, topic, 0, 0)[0] == NONE
        assert list_offset(c, topic, 0, EARLIEST) == (NONE, 0)
    assert "Traceback" not in broker.log_text()
    assert_serving(canary)
