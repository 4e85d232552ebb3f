"""Creating the internal topics (`__consumer_offsets`, `__transaction_state`) on first use,
off the request path, as Kafka's AutoTopicCreationManager.

The first FindCoordinator (or InitProducerId, AddOffsetsToTxn) starts the creation and is
answered COORDINATOR_NOT_AVAILABLE; clients retry until the topic's partitions are open and
their coordinators loaded. The creation opens this broker's logs one per event-loop iteration
(`TopicManager.create_topic_async`), so a 50-partition topic no longer holds every other client
for hundreds of milliseconds.

As Kafka, an internal topic is created with its configured replication factor or not at all:
while fewer brokers are alive than that factor the lookup answers COORDINATOR_NOT_AVAILABLE
("Number of alive brokers 'N' does not meet the required replication factor 'R' ... This error
can be ignored if the cluster is starting up"). Creating it with fewer replicas would leave it
under-replicated for good.

The creator is a broker service (`stop` / `abandon` cancel a creation under way).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.partitions.topics import TopicError
from odradek.coordinator.group.coordinator import OFFSETS_TOPIC, GroupCoordinator, append_error
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

EXTENSION = "internal_topic_creator"


class InternalTopicCreator:
    """Starts at most one creation per internal topic and remembers what it last logged."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.pending: dict[str, asyncio.Task[None]] = {}
        self._warned: dict[str, tuple[int, int]] = {}

    def ensure(
        self,
        name: str,
        num_partitions: int,
        rf: int,
        configs: dict[str, str],
        on_created: Callable[[], None] | None = None,
        internal: bool = True,
    ) -> bool:
        """True when `name` exists; else start creating it (once) and return False.
        `internal=False`: a topic the broker keeps that Kafka lists as a normal one
        (the Schema Registry's `_schemas`)."""
        broker = self.broker
        if broker.topics.info(name) is not None:
            return True
        if name in self.pending:
            return False
        live = len(broker.live_brokers())
        if live < rf:
            if self._warned.get(name) != (live, rf):  # once per situation, not per retry
                self._warned[name] = (live, rf)
                log.warning(
                    "Number of alive brokers '%d' does not meet the required replication "
                    "factor '%d' for the internal topic %s; it is created once enough brokers "
                    "are alive (this can be ignored while the cluster is starting up)",
                    live,
                    rf,
                    name,
                )
            return False
        self._warned.pop(name, None)
        task = asyncio.get_running_loop().create_task(
            self._create(name, num_partitions, rf, configs, on_created, internal),
            name=f"create-{name}",
        )
        self.pending[name] = task
        return False

    async def _create(
        self,
        name: str,
        num_partitions: int,
        rf: int,
        configs: dict[str, str],
        on_created: Callable[[], None] | None,
        internal: bool = True,
    ) -> None:
        try:
            await self.broker.topics.create_topic_async(
                name, num_partitions, rf, configs, internal=internal
            )
        except TopicError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("cannot create %s: %s", name, exc)
                return
        except Exception:
            log.exception("creating %s failed", name)
            return
        finally:
            self.pending.pop(name, None)
        if on_created is not None:
            on_created()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.abandon()

    def abandon(self) -> None:
        for task in self.pending.values():
            task.cancel()
        self.pending.clear()


def creator(broker: Broker) -> InternalTopicCreator:
    """This broker's creator."""
    creator: InternalTopicCreator = broker.internal_topics
    return creator


def ensure_offsets_topic(broker: Broker, coord: GroupCoordinator) -> bool:
    """True when `__consumer_offsets` exists; else its creation starts (in the background, with
    the configured replication factor once enough brokers are alive: `internal_topics.py`) and
    the caller answers COORDINATOR_NOT_AVAILABLE, as Kafka's auto topic creation."""
    if broker.topics.info(OFFSETS_TOPIC) is not None:
        return True
    cfg = coord.config

    def created() -> None:
        for index in range(cfg.num_partitions):
            part = broker.topics.get(OFFSETS_TOPIC, index)
            if part is not None and part.is_leader:
                coord.on_election(index)

    return creator(broker).ensure(
        OFFSETS_TOPIC, cfg.num_partitions, cfg.replication_factor, cfg.topic_configs(), created
    )


async def offsets_replicated(broker: Broker, group_id: str) -> ErrorCode:
    """Wait until the ISR holds everything appended so far to the group's `__consumer_offsets`
    partition. Kafka answers the coordinator's writes (OffsetCommit, TxnOffsetCommit, the
    assignment of SyncGroup) only once they are replicated (acks=-1 within
    `offsets.commit.timeout.ms`), so what a client saw succeed survives the coordinator's death.
    Call it right after the write, with no await in between. Returns the client's error."""
    part = broker.group_coordinator.offsets_partition(group_id)
    timeout_ms = int(broker.config.get("offsets.commit.timeout.ms"))
    error = await broker.replicas.wait_for_isr(part, timeout_ms)
    return error if error == ErrorCode.NONE else append_error(error)
