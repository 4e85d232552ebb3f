"""The request memory pool (Kafka's non-strict SimpleMemoryPool, `queued.max.request.bytes`)."""

from __future__ import annotations

import asyncio

from odradek.broker.network.memory_pool import MemoryPool


def test_non_strict_reservations_and_waiters_woken_on_release() -> None:
    async def scenario() -> list[str]:
        pool = MemoryPool(100)
        woken: list[str] = []
        assert pool.try_reserve(60)
        assert pool.try_reserve(60)  # memory was left: granted, the pool dips below zero
        assert pool.out_of_memory and pool.available == -20
        assert not pool.try_reserve(1)
        pool.wait(lambda: woken.append("a"))
        pool.release(10)  # still out: nobody is woken
        await asyncio.sleep(0)
        assert woken == []
        pool.release(50)
        await asyncio.sleep(0)  # callbacks run on the loop, not inside release()
        assert woken == ["a"]
        assert pool.try_reserve(200)  # one frame larger than the whole pool still goes through
        return woken

    asyncio.run(scenario())


def test_zero_or_negative_capacity_is_unbounded() -> None:
    for capacity in (-1, 0):
        pool = MemoryPool(capacity)
        assert not pool.bounded
        assert all(pool.try_reserve(1 << 30) for _ in range(10))
        assert not pool.out_of_memory
        pool.release(1 << 30)


def test_cancelled_waiter_is_not_called() -> None:
    async def scenario() -> None:
        pool = MemoryPool(10)
        called: list[int] = []

        def waiter() -> None:
            called.append(1)

        assert pool.try_reserve(20)
        pool.wait(waiter)
        pool.wait(waiter)  # registered once
        pool.cancel(waiter)
        pool.release(20)
        await asyncio.sleep(0)
        assert called == []

    asyncio.run(scenario())
