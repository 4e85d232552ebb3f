"""Waiting requests of a leader's partition (Kafka's fetch and produce purgatories): a high
watermark move wakes consumers' fetches and acks=all produces, not followers' fetches, which
wait for records past the log end (Kafka's DelayedFetch of a follower reads to the log end)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from odradek.broker.partitions.partition import Partition
from odradek.log.config import LogConfig
from odradek.log.log import Log


def test_a_high_watermark_move_wakes_all_but_the_followers_fetches(tmp_path: Path) -> None:
    asyncio.run(_wakes(tmp_path))


async def _wakes(tmp_path: Path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    part = Partition("t", 0, uuid.uuid4(), lg, 1, [1, 2, 3], 1, 0, [1, 2, 3])
    try:
        loop = asyncio.get_running_loop()
        consumer: asyncio.Future[None] = loop.create_future()
        follower: asyncio.Future[None] = loop.create_future()
        part.add_waiter(consumer)
        part.add_waiter(follower, follower=True)
        part.wake_high_watermark()
        assert consumer.done()
        assert not follower.done()
        part.wake()  # an append, a leadership or ISR change: news for every waiting request
        assert follower.done()
    finally:
        lg.close()
