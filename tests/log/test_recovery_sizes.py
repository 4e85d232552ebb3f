"""Recovery keeps every complete batch with a valid CRC, whatever its size (issue 11, defect 4).

Before, `LogSegment.recover` took a batch larger than max(max.message.bytes, 1 MiB) + 1 MiB for a
torn one and cut it and everything after it, so a coordinator's 8 MB group-metadata batch (or a
batch written before `max.message.bytes` was lowered) lost acknowledged data on an unclean
restart. Only a batch that runs past the end of the file or fails its header or CRC check is torn.
"""

from __future__ import annotations

import os
import time

from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.log.segment import RECOVER_CHUNK
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch, decode_records

BIG = 8 << 20


def config(max_message_bytes: int = 1048588) -> LogConfig:
    return LogConfig(
        segment_bytes=64 << 20,
        index_interval_bytes=4096,
        segment_index_bytes=1 << 16,
        max_message_bytes=max_message_bytes,
    )


def batch(value: bytes, key: bytes = b"k") -> bytearray:
    return bytearray(build_batch([(key, value, (), int(time.time() * 1000))]))


def append(lg: Log, data: bytearray) -> int:
    return lg.append_as_leader(data, list(iter_batches(data)), 0, False).first_offset


def values(lg: Log) -> list[tuple[int, int]]:
    """(offset, value length) of every record, read back through the segments."""
    out = []
    for seg in lg.segments:
        for bp in seg.batches_from(0):
            _h, records = decode_records(seg.read_bytes(bp.position, bp.size))
            out += [(r.offset, len(r.value or b"")) for r in records]
    return out


def _write_big_log(d: str) -> None:
    lg = Log(d, "t", 0, config(max_message_bytes=BIG + 1024))
    assert append(lg, batch(b"a" * 100)) == 0
    assert append(lg, batch(os.urandom(BIG))) == 1  # incompressible: the batch is > 8 MB
    assert append(lg, batch(b"b" * 100)) == 2
    assert append(lg, batch(b"c" * 100)) == 3
    # no close: the process dies with the data in the page cache


def test_a_valid_8mb_batch_and_the_batches_after_it_survive_unclean_recovery(tmp_path):
    d = str(tmp_path / "t-0")
    _write_big_log(d)
    # reopened after a kill, with the default max.message.bytes (1 MB) in force
    lg = Log(d, "t", 0, config(), clean_shutdown=False)
    assert lg.log_end_offset == 4
    assert values(lg) == [(0, 100), (1, BIG), (2, 100), (3, 100)]
    assert append(lg, batch(b"d")) == 4
    lg.close()


def test_a_large_batch_with_a_bad_crc_past_the_first_chunk_is_cut(tmp_path):
    d = str(tmp_path / "t-0")
    _write_big_log(d)
    lg = Log(d, "t", 0, config(), clean_shutdown=False)
    seg = lg.active
    position = seg.translate(1).position
    path = seg.path
    lg.close()
    with open(path, "r+b") as f:  # flip a byte well past the first chunk of the big batch
        f.seek(position + RECOVER_CHUNK + 12345)
        byte = f.read(1)
        f.seek(position + RECOVER_CHUNK + 12345)
        f.write(bytes([byte[0] ^ 0xFF]))
    lg = Log(d, "t", 0, config(), clean_shutdown=False, recovery_point=0)
    assert lg.log_end_offset == 1
    assert values(lg) == [(0, 100)]
    lg.close()


def test_a_large_batch_cut_short_by_the_file_end_is_torn(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, "t", 0, config(max_message_bytes=BIG + 1024))
    append(lg, batch(b"a" * 100))
    position = lg.active.size
    append(lg, batch(os.urandom(BIG)))
    path = lg.active.path
    os.truncate(path, position + BIG // 2)  # the write of the big batch never finished
    lg = Log(d, "t", 0, config(), clean_shutdown=False)
    assert lg.log_end_offset == 1
    assert os.path.getsize(path) == position
    lg.close()
