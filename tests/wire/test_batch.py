"""RecordBatch v2 header view: fields, CRC, in-place patching, walking, garbage rejected."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.wire.batch import (
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagicError,
    crc_ok,
    iter_batches,
    parse_header,
    peek_sizes,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from odradek.wire.records import build_batch, decode_records

INT32_MAX = 2**31 - 1


def kafka_python_batch(codec: int = 0) -> bytes:
    """A batch as kafka-python's producer builds it (idempotent producer, three records)."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
        batch_size=1 << 20,
    )
    b.append(0, 1_700_000_000_000, b"k", b"v" * 100, [("h", b"1")])
    b.append(1, 1_700_000_000_009, None, b"w" * 100, [])
    b.append(2, 1_700_000_000_004, b"k2", None, [])
    return bytes(b.build())


def simple_batch(n: int = 3, **kw) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i, [], 1000 + i) for i in range(n)], **kw)


def test_header_sizes() -> None:
    assert HEADER_STRUCT.size == HEADER_SIZE == 61
    assert LOG_OVERHEAD == 12


@pytest.mark.parametrize("codec", [0, 1])
def test_parse_kafka_python_batch(codec: int) -> None:
    data = kafka_python_batch(codec)
    h = parse_header(data)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (0, 0, 2)
    assert h.size == len(data) and h.batch_length == len(data) - 12
    assert h.compression == codec and h.attributes == codec
    assert (h.last_offset_delta, h.last_offset, h.records_count) == (2, 2, 3)
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_009)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 17)
    assert h.last_sequence == 19
    assert h.timestamp_type == 0
    assert not (h.is_transactional or h.is_control or h.has_delete_horizon)
    assert crc_ok(data, 0, h)
    assert h.crc == DefaultRecordBatch(data).crc


def test_parse_needs_only_the_header() -> None:
    data = simple_batch(5)
    assert parse_header(data[:HEADER_SIZE]) == parse_header(data)
    assert parse_header(b"pad" + data, 3) == parse_header(data)


def test_attribute_bits() -> None:
    h = parse_header(
        simple_batch(
            compression=4,
            transactional=True,
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
            timestamp_type=1,
        )
    )
    assert (h.compression, h.timestamp_type, h.is_transactional, h.is_control) == (
        4,
        1,
        True,
        False,
    )
    h = parse_header(simple_batch(control=True))
    assert h.is_control and not h.is_transactional
    raw = bytearray(simple_batch())
    struct.pack_into(">h", raw, 21, 0x40)
    assert parse_header(raw).has_delete_horizon


def header(**kw: int) -> BatchHeader:
    fields = dict(
        base_offset=100,
        batch_length=49,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=0,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=0,
    )
    fields.update(kw)
    return BatchHeader(**fields)


def test_last_sequence_wraps_like_kafka() -> None:
    assert header(base_sequence=-1, last_offset_delta=5).last_sequence == -1
    assert header(base_sequence=10, last_offset_delta=5).last_sequence == 15
    assert header(base_sequence=INT32_MAX, last_offset_delta=0).last_sequence == INT32_MAX
    assert header(base_sequence=INT32_MAX, last_offset_delta=1).last_sequence == 0
    assert header(base_sequence=INT32_MAX - 1, last_offset_delta=3).last_sequence == 1
    assert header(base_offset=100, last_offset_delta=4).last_offset == 104


def test_parse_rejects_short_input() -> None:
    data = simple_batch()
    for n in (0, 1, 12, 16, 17, 60):
        with pytest.raises(CorruptRecordError, match="truncated"):
            parse_header(data[:n])
    with pytest.raises(CorruptRecordError):
        parse_header(data, len(data) - 10)


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_parse_rejects_other_magic(magic: int) -> None:
    data = bytearray(simple_batch())
    struct.pack_into(">b", data, 16, magic)
    with pytest.raises(UnsupportedMagicError, match=f"magic {magic}") as err:
        parse_header(data)
    assert err.value.magic == magic
    assert isinstance(err.value, CorruptRecordError)
    with pytest.raises(CorruptRecordError, match=f"magic {magic}"):
        parse_header(data[:20])  # an old, small message set still says which magic


def test_parse_rejects_short_batch_length() -> None:
    data = bytearray(simple_batch())
    struct.pack_into(">i", data, 8, 48)
    with pytest.raises(CorruptRecordError, match="length 48"):
        parse_header(data)
    struct.pack_into(">i", data, 8, -1)
    with pytest.raises(CorruptRecordError):
        parse_header(data)


def test_crc_detects_any_flipped_byte() -> None:
    data = simple_batch(4, compression=1, producer_id=9, producer_epoch=1, base_sequence=0)
    h = parse_header(data)
    for i in range(21, len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x01
        assert not crc_ok(damaged, 0, h), i
    damaged = bytearray(data)
    struct.pack_into(">I", damaged, 17, h.crc ^ 1)
    assert not crc_ok(damaged, 0, parse_header(damaged))


def test_crc_false_when_truncated() -> None:
    data = simple_batch()
    assert not crc_ok(data[:-1], 0, parse_header(data))


def test_patching_outside_crc_keeps_it_valid() -> None:
    first, second = simple_batch(2), simple_batch(3, compression=3)
    buf = bytearray(first + second)
    pos = len(first)
    set_base_offset(buf, pos, 1_000_000_000_000)
    set_partition_leader_epoch(buf, pos, 77)
    view = memoryview(buf)
    set_base_offset(view, 0, 5)
    set_partition_leader_epoch(view, 0, 76)
    batches = list(iter_batches(buf))
    assert [(p, h.base_offset, h.partition_leader_epoch) for p, h in batches] == [
        (0, 5, 76),
        (pos, 1_000_000_000_000, 77),
    ]
    assert all(crc_ok(buf, p, h) for p, h in batches)
    _h, records = decode_records(buf, pos)
    assert [r.offset for r in records] == [1_000_000_000_000 + i for i in range(3)]
    assert DefaultRecordBatch(bytes(buf[:pos])).validate_crc()


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_set_log_append_time(codec: int) -> None:
    first = simple_batch(1)
    buf = bytearray(first + simple_batch(3, compression=codec))
    pos = len(first)
    before = parse_header(buf, pos)
    set_log_append_time(buf, pos, 1_800_000_000_000)
    h = parse_header(buf, pos)
    assert h.timestamp_type == 1 and h.compression == codec
    assert h.max_timestamp == 1_800_000_000_000
    assert h.base_timestamp == before.base_timestamp  # as Kafka's setMaxTimestamp
    assert crc_ok(buf, pos, h)
    _h, records = decode_records(buf, pos)
    assert [r.timestamp for r in records] == [1_800_000_000_000] * 3
    if codec in (0, 1):
        kp = DefaultRecordBatch(bytes(buf[pos:]))
        assert kp.validate_crc()
        assert [r.timestamp for r in kp] == [1_800_000_000_000] * 3
    with pytest.raises(CorruptRecordError):
        set_log_append_time(bytearray(buf[: pos + 70]), pos, 1)


def test_iter_batches() -> None:
    batches = [simple_batch(n, base_offset=10 * n) for n in (1, 2, 3)] + [kafka_python_batch()]
    blob = b"".join(batches)
    walked = list(iter_batches(blob))
    assert [p for p, _h in walked] == [
        0,
        len(batches[0]),
        len(batches[0]) + len(batches[1]),
        sum(map(len, batches[:3])),
    ]
    assert [h.size for _p, h in walked] == [len(b) for b in batches]
    assert list(iter_batches(b"")) == []
    assert len(list(iter_batches(memoryview(blob)))) == 4


def test_iter_batches_rejects_a_truncated_batch() -> None:
    blob = simple_batch(2) + simple_batch(3)
    for cut in (1, 11, 12, 60, 61, 62):
        it = iter_batches(blob[:-cut])
        assert next(it)[0] == 0
        with pytest.raises(CorruptRecordError, match="truncated"):
            list(it)


def test_peek_sizes() -> None:
    data = simple_batch(2, base_offset=123)
    assert peek_sizes(data, 0) == (123, len(data) - 12)
    assert peek_sizes(b"ab" + data[:12], 2) == (123, len(data) - 12)
    with pytest.raises(CorruptRecordError):
        peek_sizes(data[:11], 0)


@settings(max_examples=300)
@given(st.binary(max_size=200), st.integers(0, 10))
def test_arbitrary_bytes_only_raise_corrupt_record(data: bytes, pos: int) -> None:
    for fn in (
        lambda: parse_header(data, pos),
        lambda: list(iter_batches(data)),
        lambda: peek_sizes(data, pos),
    ):
        try:
            fn()
        except CorruptRecordError:
            pass


@settings(max_examples=200)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=13, max_size=13), st.binary(max_size=80))
def test_arbitrary_headers_only_raise_corrupt_record(fields: list[int], tail: bytes) -> None:
    fields[0] = fields[0] * 2**32  # int64 base offset
    fields[3] = 2  # magic
    fields[4] &= 0xFFFFFFFF  # crc
    fields[5] = fields[5] % 2**16 - 2**15  # attributes int16
    fields[10] = fields[10] % 2**16 - 2**15  # producer epoch int16
    data = HEADER_STRUCT.pack(*fields) + tail
    try:
        for pos, h in iter_batches(data):
            assert pos + h.size <= len(data)
            crc_ok(data, pos, h)
    except CorruptRecordError:
        pass
