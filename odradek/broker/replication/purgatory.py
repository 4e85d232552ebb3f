"""acks=all produce waiting for replication, as Kafka's DelayedProduce in the produce purgatory.

The produce handler appends first, then awaits `wait_for_acks(pending, timeout_ms)` with the
partitions appended with acks=-1. Each waits until the partition's high watermark passes the
end of what the request appended there (the log end offset when the wait starts: nothing else
can append between the handler's appends and the wait). Then, as Kafka's
`checkEnoughReplicasReachOffset`:

- still the leader, and ISR size >= min.insync.replicas: the append stands (NONE);
- still the leader, ISR smaller than min.insync.replicas: NOT_ENOUGH_REPLICAS_AFTER_APPEND
  (the records are in the log, but not as safe as asked);
- no longer the leader: NOT_LEADER_OR_FOLLOWER;
- the timeout passed first: REQUEST_TIMED_OUT.

It waits on the partitions' own wake-ups (appends, high watermark moves, ISR and leadership
changes all call `Partition.wake()`), so there is no polling and no timer per partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partitions.partition import AppendResult, Partition


def _settle(part: Partition, required: int, epoch: int, result: AppendResult) -> bool:
    """Decide `result` when its wait is over; False while it must keep waiting."""
    if not part.is_leader or part.leader_epoch != epoch:
        result.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return True
    if part.high_watermark < required:
        return False
    if len(part.isr) < part.log.config.min_insync_replicas:
        result.error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return True


async def wait_for_acks(
    pending: Sequence[tuple[Partition | None, AppendResult]],
    timeout_ms: int,
    closing: asyncio.Event | None = None,
) -> None:
    """Hold an acks=all produce until every (partition, AppendResult) is settled."""
    waiting = []
    for part, result in pending:
        if part is None:
            continue
        required = part.log.log_end_offset
        if part.high_watermark >= required and part.is_leader:
            _settle(part, required, part.leader_epoch, result)
            continue
        waiting.append((part, required, part.leader_epoch, result))
    if not waiting:
        return
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    while waiting:
        waiting = [w for w in waiting if not _settle(*w)]
        remaining = deadline - time.monotonic()
        if not waiting:
            return
        if remaining <= 0 or (closing is not None and closing.is_set()):
            break
        fut: asyncio.Future[None] = loop.create_future()
        for part, *_ in waiting:
            part.add_waiter(fut)
        try:
            async with asyncio.timeout(remaining):
                await fut
        except TimeoutError:
            pass
        finally:
            for part, *_ in waiting:
                part.remove_waiter(fut)
    for _part, _required, _epoch, result in waiting:
        result.error = ErrorCode.REQUEST_TIMED_OUT
