"""One iterator over a log's batches and records (log/reader.py, Log.batches / Log.records),
and the one transaction-marker parser (wire.records.end_txn_marker)."""

from __future__ import annotations

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.log.reader import data_records
from odradek.wire.batch import iter_batches, parse_header
from odradek.wire.records import (
    ABORT,
    COMMIT,
    build_batch,
    build_control_batch,
    decode_records,
    end_txn_marker,
)


def _log(tmp_path) -> Log:
    config = LogConfig(segment_bytes=300, index_interval_bytes=64, segment_index_bytes=4096)
    return Log(str(tmp_path / "t-0"), "t", 0, config)


def _append(lg: Log, values: list[bytes]) -> None:
    data = bytearray(build_batch([(b"k", v, (), 1000) for v in values]))
    lg.append_as_leader(data, list(iter_batches(data)), 0, False)


def test_batches_span_segments_and_respect_bounds(tmp_path):
    lg = _log(tmp_path)
    for i in range(8):
        _append(lg, [b"a%d" % i, b"b%d" % i])  # offsets 2i, 2i+1
    assert len(lg.segments) > 1
    assert [b.base_offset for b in lg.batches()] == list(range(0, 16, 2))
    assert [b.base_offset for b in lg.batches(5, 11)] == [4, 6, 8, 10]
    first = next(iter(lg.batches(7)))
    assert parse_header(first.read()).base_offset == first.header().base_offset == 6
    values = [r.value for _h, recs in lg.records(3, 6) for r in recs]
    assert values == [b"a1", b"b1", b"a2", b"b2"]
    lg.close()


def test_records_skip_an_undecodable_batch(tmp_path, caplog):
    lg = _log(tmp_path)
    _append(lg, [b"one"])
    _append(lg, [b"two"])
    _append(lg, [b"three"])
    bad = list(lg.batches(1, 2))[0]
    # a record count beyond what the batch holds: header and CRC are fine for iteration, the
    # decoder refuses it
    with open(bad.segment.path, "r+b") as f:
        f.seek(bad.position + 57)
        f.write((99).to_bytes(4, "big"))
    got = [r.value for _h, recs in lg.records() for r in recs]
    assert got == [b"one", b"three"]
    assert "skipping undecodable batch at offset 1" in caplog.text
    lg.close()


def test_data_records_are_from_log_start_and_skip_markers(tmp_path):
    lg = _log(tmp_path)
    _append(lg, [b"x", b"y"])
    marker = bytearray(build_control_batch(7, 0, True, 3, 1000))
    lg.append_control(marker, parse_header(marker), 0)
    _append(lg, [b"z"])
    lg.log_start_offset = 1
    assert list(data_records(lg, lg.log_end_offset)) == [(b"k", b"y"), (b"k", b"z")]
    assert list(data_records(lg, 3)) == [(b"k", b"y")]
    lg.close()


def test_end_txn_marker():
    for commit in (True, False):
        _h, recs = decode_records(build_control_batch(1, 0, commit, 42, 0))
        assert end_txn_marker(recs) == (COMMIT if commit else ABORT, 42)
    assert end_txn_marker([]) is None
    _h, short = decode_records(build_batch([(b"\x00", None, (), 0)], control=True))
    assert end_txn_marker(short) is None
    _h, other = decode_records(build_batch([(b"\x00\x00\x00\x03", None, (), 0)], control=True))
    assert end_txn_marker(other) is None  # KRaft's leader change, not a marker
    _h, no_value = decode_records(build_batch([(b"\x00\x00\x00\x01", None, (), 0)], control=True))
    assert end_txn_marker(no_value) == (COMMIT, -1)
