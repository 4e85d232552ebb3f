"""A failing disk meets the checkpoint files too: they are written and fsync'd before their
rename (as Kafka's CheckpointFile), so an injected EIO on fsync (or write) fails the next
checkpoint and takes the log dir offline, though no append has synced since. With Kafka's
default flush settings an append never fsyncs: without this an fsync fault went unnoticed."""

from __future__ import annotations

import errno
import time
import uuid

import pytest

from odradek.log.config import LogConfig
from odradek.log.disk_faults import FSYNC, WRITE
from odradek.log.manager import LogManager
from odradek.wire.batch import iter_batches
from odradek.wire.records import build_batch


def append(lg, n: int = 3) -> None:
    t = int(time.time() * 1000)
    data = bytearray(build_batch([(b"k", b"v%d" % i, [], t) for i in range(n)]))
    lg.append_as_leader(data, list(iter_batches(data)), 0, False)


@pytest.mark.parametrize("op", [FSYNC, WRITE])
@pytest.mark.parametrize("which", ["high watermarks", "all"])
def test_an_injected_error_fails_the_next_checkpoint(tmp_path, op: str, which: str) -> None:
    cfg = LogConfig(segment_bytes=1 << 20)  # flush.messages / flush.ms: never
    mgr = LogManager([str(tmp_path)])
    mgr.load_all(lambda _topic: cfg)
    lg = mgr.get_or_create("t", 0, uuid.UUID(int=7), cfg)
    append(lg)
    mgr.inject_fault(errno.EIO, ops=(op,))
    if op == FSYNC:
        append(lg)  # appends do not sync: the fault is not met yet
        assert not lg.offline
    (mgr.checkpoint_high_watermarks if which == "high watermarks" else mgr.checkpoint)()
    assert mgr.offline_dirs == [str(tmp_path)] and lg.offline
    mgr.close()
