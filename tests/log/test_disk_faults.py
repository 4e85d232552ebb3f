"""Disk faults in the log layer (issue 11): an ENOSPC or EIO on write or fsync takes the log
dir offline (Kafka's LogDirFailureChannel), a failed write leaves the segment ending in its last
complete batch, and a restart finds every record appended before the fault, with nothing to
truncate."""

from __future__ import annotations

import errno
import os
import time

import pytest

from odradek.log.config import LogConfig
from odradek.log.disk_faults import FSYNC, WRITE, KafkaStorageError
from odradek.log.manager import CLEAN_SHUTDOWN, LogManager
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch, decode_records

TOPIC_ID = __import__("uuid").UUID(int=7)


def batch(first: int, n: int = 3) -> bytearray:
    t = int(time.time() * 1000)
    return bytearray(build_batch([(b"k", b"v%d" % (first + i), [], t + i) for i in range(n)]))


def append(lg, data: bytearray):
    return lg.append_as_leader(data, list(iter_batches(data)), 0, False)


def values(lg) -> list[bytes | None]:
    out = []
    for seg in lg.segments:
        for bp in seg.batches_from(0):
            _h, recs = decode_records(seg.read_bytes(bp.position, bp.size))
            out += [r.value for r in recs]
    return out


def config(**kw) -> LogConfig:
    return LogConfig(segment_bytes=kw.pop("segment_bytes", 1 << 20), **kw)


def open_manager(path: str, cfg: LogConfig) -> LogManager:
    mgr = LogManager([path])
    mgr.load_all(lambda _topic: cfg)
    return mgr


def log_files(path: str) -> dict[str, int]:
    part = os.path.join(path, "t-0")
    return {
        n: os.path.getsize(os.path.join(part, n)) for n in os.listdir(part) if n.endswith(".log")
    }


def reopen_and_recover(path: str, cfg: LogConfig, caplog) -> tuple[LogManager, int]:
    """A restart after an unclean stop: the logs are CRC-scanned from their recovery points.
    Returns the manager and how many bytes recovery cut from the segment files."""
    before = log_files(path)
    caplog.clear()
    mgr = open_manager(path, cfg)
    after = log_files(path)
    cut = sum(before[n] - after.get(n, 0) for n in before)
    assert not [r for r in caplog.records if "truncat" in r.getMessage()], caplog.text
    return mgr, cut


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_failed_write_is_rolled_back_and_takes_the_dir_offline(tmp_path, code, caplog):
    cfg = config()
    mgr = open_manager(str(tmp_path), cfg)
    failures: list[str] = []
    mgr.on_dir_failure(failures.append)
    lg = mgr.get_or_create("t", 0, TOPIC_ID, cfg)
    for i in range(3):
        append(lg, batch(3 * i))
    size = lg.active.size
    file_size = os.path.getsize(lg.active.path)

    mgr.inject_fault(code)
    with pytest.raises(KafkaStorageError):
        append(lg, batch(9, n=50))
    assert lg.offline and mgr.offline_dirs == [str(tmp_path)]
    assert failures == [str(tmp_path)]  # told once
    # the half-written batch is gone: the file ends in the last complete batch
    assert lg.active.size == size and os.path.getsize(lg.active.path) == file_size
    assert lg.log_end_offset == 9
    # an offline dir stays offline even once the fault clears (until a restart)
    mgr.inject_fault(None)
    with pytest.raises(KafkaStorageError):
        append(lg, batch(9))
    mgr.close()
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN)  # the next start recovers

    mgr, truncated = reopen_and_recover(str(tmp_path), cfg, caplog)
    lg = mgr.logs[("t", 0)]
    assert truncated == 0
    assert values(lg) == [b"v%d" % i for i in range(9)]
    assert append(lg, batch(9)).first_offset == 9  # online again after the restart
    mgr.close()


def test_a_failed_write_of_request_bytes_in_pieces_is_rolled_back(tmp_path, caplog):
    """Immutable request bytes are written as patched pieces with pwritev: same roll back."""
    cfg = config()
    mgr = open_manager(str(tmp_path), cfg)
    lg = mgr.get_or_create("t", 0, TOPIC_ID, cfg)
    append(lg, batch(0))
    size = os.path.getsize(lg.active.path)
    mgr.inject_fault(errno.ENOSPC, ops=(WRITE,))
    data = bytes(batch(3, n=20) + batch(23, n=20))
    with pytest.raises(KafkaStorageError):
        lg.append_as_leader(data, list(iter_batches(data)), 0, False)
    assert os.path.getsize(lg.active.path) == size
    mgr.abandon()
    mgr, truncated = reopen_and_recover(str(tmp_path), cfg, caplog)
    assert truncated == 0
    assert values(mgr.logs[("t", 0)]) == [b"v0", b"v1", b"v2"]
    mgr.close()


def test_eio_on_fsync_takes_the_dir_offline_and_keeps_the_synced_records(tmp_path, caplog):
    cfg = config(flush_messages=1)  # every append syncs
    mgr = open_manager(str(tmp_path), cfg)
    lg = mgr.get_or_create("t", 0, TOPIC_ID, cfg)
    append(lg, batch(0))
    append(lg, batch(3))
    mgr.inject_fault(errno.EIO, ops=(FSYNC,))
    with pytest.raises(KafkaStorageError):
        append(lg, batch(6))
    assert lg.offline
    with pytest.raises(KafkaStorageError):
        lg.flush()
    mgr.close()  # no flush, checkpoint or clean marker in the offline dir
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN)

    mgr, truncated = reopen_and_recover(str(tmp_path), cfg, caplog)
    assert truncated == 0
    got = values(mgr.logs[("t", 0)])
    # the batch whose fsync failed was written whole (as in Kafka): it may be there, unacked
    assert got[:6] == [b"v%d" % i for i in range(6)] and len(got) in (6, 9)
    mgr.close()


def test_new_logs_go_to_an_online_dir(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    cfg = config()
    mgr = LogManager([a, b])
    mgr.load_all(lambda _t: cfg)
    first = mgr.get_or_create("t", 0, TOPIC_ID, cfg)
    mgr.inject_fault(errno.ENOSPC, directory=first.log_dir.path)
    with pytest.raises(KafkaStorageError):
        append(first, batch(0))
    assert mgr.offline_dirs == [first.log_dir.path]
    for p in range(1, 4):
        lg = mgr.get_or_create("t", p, TOPIC_ID, cfg)
        assert not lg.offline and append(lg, batch(0)).first_offset == 0
    mgr.close()
    assert os.path.exists(os.path.join(first.log_dir.path.replace(a, b), CLEAN_SHUTDOWN)) or (
        os.path.exists(os.path.join(b if first.log_dir.path == a else a, CLEAN_SHUTDOWN))
    )
