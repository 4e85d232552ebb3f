"""The legacy path of the produce validator (issue 16): a Produce v0-2 magic 0/1 message set is
checked as Kafka 3.x's LogValidator checks it with a v2 log, and becomes one v2 batch with the
same keys, values and timestamps. The broker-level tests (tests/broker/test_produce_legacy.py)
drive it with real old clients; these cover the topic settings and limits."""

from __future__ import annotations

import pytest

from odradek.log.config import LogConfig
from odradek.log.validator import ValidationError, validate
from odradek.wire.batch import CorruptRecordError, iter_batches
from odradek.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from odradek.wire.errors import ErrorCode
from odradek.wire.legacy_records import TIMESTAMP_TYPE_MASK, encode_message_set, write_message
from odradek.wire.records import decode_records

NOW = 1_700_000_000_000
RECORDS = [(i, NOW - 10 + i, b"k%d" % i, b"v%d" % i) for i in range(4)]


def up(data: bytes, version: int = 2, **config: object) -> tuple[int, list[tuple[object, ...]]]:
    """(codec, [(key, value, timestamp)]) of the v2 batch the set becomes."""
    v = validate(data, LogConfig(**config), NOW, produce_version=version)  # type: ignore[arg-type]
    ((_pos, header),) = v.batches
    assert (header.producer_id, header.base_sequence, v.converted) == (-1, -1, header.records_count)
    _header, records = decode_records(bytes(v.buf))
    assert [r.offset for r in records] == list(range(len(records)))
    return header.compression, [(r.key, r.value, r.timestamp) for r in records]


def code(data: bytes, **config: object) -> ErrorCode | None:
    try:
        validate(data, LogConfig(**config), NOW, produce_version=2)  # type: ignore[arg-type]
    except ValidationError as exc:
        return exc.code
    return None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4])
def test_up_converted_with_codec_and_timestamps(magic: int, codec: int) -> None:
    got_codec, records = up(encode_message_set(RECORDS, magic, codec), version=magic + 1)
    assert got_codec == codec
    assert records == [(k, v, t if magic else -1) for _o, t, k, v in RECORDS]


def test_topic_codec_wins() -> None:
    got_codec, records = up(encode_message_set(RECORDS, 1, GZIP), compression_type="zstd")
    assert got_codec == ZSTD and len(records) == 4
    assert up(encode_message_set(RECORDS, 1, SNAPPY), compression_type="uncompressed")[0] == NONE


def test_log_append_time_topic_marks_the_batch() -> None:
    v = validate(
        encode_message_set(RECORDS, 1),
        LogConfig(message_timestamp_type="LogAppendTime"),
        NOW,
        produce_version=2,
    )
    assert v.log_append_time and isinstance(v.buf, bytearray)  # the log stamps it


def test_wrapper_offset_zero_or_last_inner() -> None:
    inner = encode_message_set([(i, NOW, None, b"x") for i in range(3)], 1)
    for wrapper_offset in (0, 2, 7):  # librdkafka sent 0; kafka-python the last inner offset
        out = bytearray()
        write_message(out, wrapper_offset, 1, GZIP, NOW, None, compress(GZIP, inner))
        assert len(up(bytes(out))[1]) == 3
    out = bytearray()
    write_message(out, 1, 1, GZIP, NOW, None, compress(GZIP, inner))
    assert code(bytes(out)) == ErrorCode.INVALID_RECORD  # below the last inner offset, not 0


def test_two_wrappers_in_one_set_are_invalid() -> None:
    wrapper = encode_message_set(RECORDS, 1, GZIP)
    assert code(wrapper + wrapper) == ErrorCode.INVALID_RECORD


def test_limits_and_timestamps() -> None:
    big = encode_message_set([(0, NOW, None, b"x" * 2000)], 1)
    assert code(big, max_message_bytes=1000) == ErrorCode.MESSAGE_TOO_LARGE
    # compressed small, up-converted big: the v2 batch is checked too
    squeezed = encode_message_set([(i, NOW, None, b"y" * 400) for i in range(5)], 1, GZIP)
    assert len(squeezed) < 1000
    limits = {"max_message_bytes": 1000, "compression_type": "uncompressed"}
    assert code(squeezed, **limits) == ErrorCode.MESSAGE_TOO_LARGE
    old = encode_message_set([(0, NOW - 60_000, None, b"old")], 1)
    assert code(old, message_timestamp_before_max_ms=1000) == ErrorCode.INVALID_TIMESTAMP
    assert (
        code(old, message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=1000)
        is None
    )
    magic0 = encode_message_set([(0, -1, None, b"no timestamp")], 0)
    assert code(magic0, message_timestamp_before_max_ms=1000) is None
    stamped = bytearray()
    write_message(stamped, 0, 1, TIMESTAMP_TYPE_MASK, -1, None, b"producer says LogAppendTime")
    assert code(bytes(stamped)) == ErrorCode.INVALID_TIMESTAMP


def test_compacted_topic_needs_keys() -> None:
    keyless = encode_message_set([(0, NOW, None, b"v")], 1, LZ4)
    assert code(keyless, cleanup_policy="compact") == ErrorCode.INVALID_RECORD
    assert code(encode_message_set(RECORDS, 1, LZ4), cleanup_policy="compact") is None


def test_produce_v3_still_takes_only_magic_2() -> None:
    with pytest.raises(ValidationError) as err:
        validate(encode_message_set(RECORDS, 1), LogConfig(), NOW, produce_version=3)
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_a_bomb_inside_a_wrapper_is_bounded() -> None:
    inner = encode_message_set([(0, NOW, None, b"\0" * (40 << 20))], 1)
    out = bytearray()
    write_message(out, 0, 1, GZIP, NOW, None, compress(GZIP, inner))
    assert len(out) < 100_000
    assert code(bytes(out)) == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(out)))  # not a v2 batch: other readers refuse it too
