"""Log.append_as_leader with the two payload forms the validator hands over (issue 12 item 5:
the append path was re-typed; these pin what it does with each form)."""

from __future__ import annotations

import pytest

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.log.validator import validate
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch

T0 = 1_700_000_000_000


def _payload() -> bytes:
    one = build_batch([(b"k1", b"v1", (), T0)])
    two = build_batch([(b"k2", b"v2", (), T0 + 1), (b"k3", b"v3", (), T0 + 2)])
    return bytes(one + two)


def _stored(lg: Log) -> list[tuple[int, int, bool, int]]:
    """(base offset, partition leader epoch, LogAppendTime?, max timestamp) of each batch."""
    return [
        (h.base_offset, h.partition_leader_epoch, h.timestamp_type == 1, h.max_timestamp)
        for h, _records in lg.records()
    ]


def test_immutable_payload_is_stored_with_offsets_and_epoch_and_left_untouched(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    first = _payload()
    lg.append_as_leader(first, list(iter_batches(first)), 0, False)
    payload = _payload()
    info = lg.append_as_leader(payload, list(iter_batches(payload)), 7, False)
    assert payload == _payload()  # request bytes are not patched
    assert (info.first_offset, info.last_offset) == (3, 5)
    assert _stored(lg)[2:] == [(3, 7, False, T0), (4, 7, False, T0 + 2)]
    lg.close()


def test_log_append_time_payload_is_stamped_in_place(tmp_path):
    config = LogConfig(message_timestamp_type="LogAppendTime")
    lg = Log(str(tmp_path / "t-0"), "t", 0, config)
    validated = validate(_payload(), config, now=T0)
    assert isinstance(validated.buf, bytearray) and validated.log_append_time
    info = lg.append_as_leader(validated.buf, validated.batches, 3, True)
    assert info.log_append_time >= T0
    stamp = info.log_append_time
    assert _stored(lg) == [(0, 3, True, stamp), (1, 3, True, stamp)]
    lg.close()


def test_log_append_time_on_immutable_bytes_is_refused(tmp_path):
    lg = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    payload = _payload()
    with pytest.raises(TypeError):
        lg.append_as_leader(payload, list(iter_batches(payload)), 0, True)
    lg.close()
