"""The internal topics' shared record codec (coordinator/codec.py)."""

from __future__ import annotations

import pytest

from odradek.coordinator.codec import (
    Reader,
    RecordFormatError,
    Writer,
    append_error,
    partition_for,
)
from odradek.wire.errors import ErrorCode


@pytest.mark.parametrize("flexible", [False, True])
def test_round_trip(flexible):
    w = Writer(flexible)
    w.i8(-3)
    w.i16(7)
    w.i32(-1)
    w.i64(1 << 40)
    w.string("héllo")
    w.string(None)
    w.bytes_(b"\x00\x01")
    w.array_len(None)
    w.array_len(2)
    w.tags()
    r = Reader(w.finish(), flexible)
    assert (r.i8(), r.i16(), r.i32(), r.i64()) == (-3, 7, -1, 1 << 40)
    assert r.string() == "héllo"
    assert r.string(nullable=True) is None
    assert r.bytes_() == b"\x00\x01"
    assert r.array_len(nullable=True) == -1
    assert r.array_len() == 2
    assert r.tags() == {}
    assert r.pos == len(r.data)


def test_reader_errors_are_record_format_errors():
    with pytest.raises(RecordFormatError):
        Reader(b"\x00").i16()
    with pytest.raises(RecordFormatError):
        Reader(b"\xff\xff").string()  # null where a string is required
    with pytest.raises(RecordFormatError):
        Reader(b"\x00\x02\xff\xfe").string()  # not UTF-8
    with pytest.raises(RecordFormatError):
        Reader(b"\xff\xff\xff\xff\xff\x01", flexible=True).uvarint()
    with pytest.raises(RecordFormatError):
        Reader(b"\xff\xff\xff\xff").array_len()


def test_partition_for_is_kafkas():
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
    assert partition_for("hello", 50) == 99162322 % 50


def test_append_error_mapping():
    assert append_error(ErrorCode.NOT_LEADER_OR_FOLLOWER) == ErrorCode.NOT_COORDINATOR
    assert append_error(ErrorCode.REQUEST_TIMED_OUT) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert append_error(ErrorCode.MESSAGE_TOO_LARGE) == ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    txn_too_large = append_error(ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert txn_too_large == ErrorCode.UNKNOWN_SERVER_ERROR
    assert append_error(ErrorCode.CORRUPT_MESSAGE) == ErrorCode.UNKNOWN_SERVER_ERROR
