"""The replica manager of a standalone broker: a null object with ReplicaManager's joints.

A broker without a cluster's metadata store is the only replica of every partition, so acks=all
is complete once the leader has appended, no follower ever fetches, and the cluster is this one
broker. Handlers and coordinators call the same methods either way (no `is None` checks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partitions.partition import AppendResult, Partition


class SingleBrokerReplicas:
    def __init__(
        self, node_id: int, endpoint: Callable[[str | None], tuple[str, int]], rack: str | None
    ):
        self.node_id = node_id
        self._endpoint = endpoint
        self._rack = rack

    def live_brokers(self) -> list[int]:
        return [self.node_id]

    def broker_endpoints(
        self, listener: str | None = None
    ) -> list[tuple[int, str, int, str | None]]:
        host, port = self._endpoint(listener)
        return [(self.node_id, host, port, self._rack)]

    def controller_id(self) -> int:
        return self.node_id

    def on_listening(self) -> None:
        return None

    async def controlled_shutdown(self) -> None:
        return None

    def on_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        return None  # no followers: a replica id here is a client pretending

    async def wait_for_isr(self, part: Partition | None, timeout_ms: int) -> ErrorCode:
        return ErrorCode.NONE  # the leader is the whole ISR

    async def wait_for_acks(
        self, pending: list[tuple[Partition, AppendResult]], timeout_ms: int
    ) -> None:
        return None  # the leader is the whole ISR: appended means acknowledged
