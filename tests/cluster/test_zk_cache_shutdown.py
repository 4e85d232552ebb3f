"""A broker that stops (halting on a failed log dir, say) closes its ZooKeeper session while a
watch callback may be reading: that read's ConnectionLoss is expected then, and is no error
with a traceback in the broker's log; the same failure on an open session still is."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from kazoo.exceptions import ConnectionLoss

from odradek.broker.cluster.zk_cache import ZooKeeperWatchCache


@pytest.mark.parametrize("closes", [True, False])
def test_a_read_cut_by_the_closing_session_is_not_an_error(caplog, closes: bool) -> None:
    session = SimpleNamespace(closed=False, post=lambda *a: None)

    def get_children(path: str) -> list[str]:
        session.closed = closes  # the broker stops while the read is in flight (or not)
        raise ConnectionLoss()

    session.zk = SimpleNamespace(get_children=get_children)
    c = ZooKeeperWatchCache(session, lambda change: None, lambda: None, lambda: -1)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="odradek.broker.cluster.zk_cache"):
        c._refresh_brokers()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (errors == []) is closes
