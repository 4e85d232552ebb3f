"""A broker's replicas in a cluster, as Kafka's ReplicaManager (becomeLeaderOrFollower, ISR
management, the follower-fetch path) with its broker registration.

The metadata store says who leads each partition in which leader epoch and who is in sync; this
module makes the local replicas match it. It is installed only when the store is a cluster's
(`MetadataStore.clustered`), so a standalone broker never runs any of it.

- Becoming leader (a new leader epoch): the epoch is recorded at the log end offset in the
  leader-epoch cache (KIP-101), followers are tracked from their fetches (`isr.py`), the high
  watermark moves to the smallest log end offset over the ISR.
- Becoming follower: the partition goes to the fetcher of its leader's broker, which truncates
  any divergence first (`fetcher.py`).
- Fetches with a replica id reach `on_follower_fetch` (the fetch handler's `follower_fetch`
  hook): the follower's log end offset, the high watermark, ISR expansion.
- Every `replica.lag.time.max.ms / 2` lagging followers leave the ISR. ISR changes are
  conditional store updates (leader epoch and partition epoch), as Kafka's AlterPartition.
- acks=all waits in `purgatory.py` (the produce handler's `acks_all_wait` hook).
- Registration: after the listeners are bound the broker registers (endpoint, rack); on a clean
  stop it first hands its leadership over (controlled shutdown), then unregisters; a kill only
  unregisters, and the controller elects new leaders.
- Partition leadership changes are told to TopicManager listeners (the coordinators) through
  `on_become_leader(part)` / `on_become_follower(part)`.

Fault hooks for tests: `reachable(a, b)` (links between brokers; a cut link drops fetches both
ways) and `fetch_delay_ms` (a slowed follower).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from odradek.broker.cluster.controller import Controller
from odradek.broker.cluster.metadata_store import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    _load_or_create_cluster_id,
)
from odradek.broker.partitions.partition import AppendResult, Partition
from odradek.broker.replication.fetcher import ReplicaFetcher
from odradek.broker.replication.isr import LeaderTracker
from odradek.broker.replication.purgatory import wait_for_acks
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

Key = tuple[str, int]
FETCH_BACKOFF_S = 0.1  # Kafka's replica.fetch.backoff.ms is 1000; in-process peers recover fast


def now_ms() -> float:
    return time.monotonic() * 1000


class ReplicaManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = broker.store
        self.node_id: int = broker.node_id
        cfg = broker.config
        self.lag_ms = int(cfg.get("replica.lag.time.max.ms"))
        self.fetch_wait_ms = int(cfg.get("replica.fetch.wait.max.ms"))
        self.fetch_max_bytes = int(cfg.get("replica.fetch.max.bytes"))
        self.backoff_s = FETCH_BACKOFF_S
        self.controller = Controller(self.store, self.node_id, self._unclean_enabled)
        self.trackers: dict[Key, LeaderTracker] = {}
        self.applied: dict[Key, tuple[int, int]] = {}  # (leader, leader epoch) acted upon
        # partitions the store said this broker led when it registered, with that leader epoch:
        # it leads them only in a newer epoch, the controller's answer to the registration
        self.awaiting: dict[Key, int] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.registered = False
        self.closing = asyncio.Event()
        self.fetch_delay_ms = 0
        self.isr_changes = {"shrink": 0, "expand": 0}  # Kafka's IsrShrinks/IsrExpandsPerSec
        # followers caught up during this turn of the loop, added to their ISRs together by one
        # store update at its end (a follower's fetch covers many partitions)
        self._joining: dict[Key, tuple[Partition, int]] = {}
        self.reachable: Callable[[int, int], bool] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # a broker's data dir remembers its cluster and id, as Kafka's meta.properties
        _load_or_create_cluster_id(broker.logs.dirs[0], self.store.cluster_id, self.node_id)

    # -- cluster view -----------------------------------------------------------------------

    def live_brokers(self) -> list[int]:
        return self.store.live_brokers()

    def broker_endpoints(
        self, listener: str | None = None
    ) -> list[tuple[int, str, int, str | None]]:
        out = []
        for node in self.store.live_brokers():
            reg = self.store.broker(node)
            if reg is not None:
                host, port = reg.endpoint(listener)
                out.append((reg.node_id, host, port, reg.rack))
        return out

    def controller_id(self) -> int:
        return self.store.controller_id()

    def can_reach(self, peer: int) -> bool:
        fn = self.reachable
        return fn is None or fn(self.node_id, peer)

    def peer_addresses(self) -> set[str]:
        """Addresses ("host:port") of this broker's connections to its peers, as they see
        them: a broker cut off from clients still lets these in."""
        out = set()
        for fetcher in self.fetchers.values():
            client = fetcher.client
            if client is not None and client.local_address is not None:
                out.add(f"{client.local_address[0]}:{client.local_address[1]}")
        return out

    def _unclean_enabled(self, topic: str) -> bool:
        return bool(self.broker.topics.log_config(topic).unclean_leader_election_enable)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self.store.subscribe(self._on_change)
        interval = max(self.lag_ms / 2, 10) / 1000
        self._tasks.append(asyncio.create_task(self._isr_expiry(interval), name="isr-expiry"))

    def on_listening(self) -> None:
        """Register once clients and peers can connect, then take up the assigned replicas."""
        broker = self.broker
        adv = broker.advertised_listener(broker.security.inter_broker)
        protocols = broker.config.protocols
        endpoints = tuple(
            (a.name, a.host, a.port, protocols.get(a.name, "PLAINTEXT"))
            for a in (broker.advertised_listener(x.name) for x in broker.config.advertised)
        )
        self.controller.observe()
        # What the store says this broker led was decided before it (re)started: Kafka's broker
        # leads nothing until the controller's LeaderAndIsr for its new registration, and the
        # controller answers a registration by electing what it led again in a new epoch (or
        # another in-sync replica). Until then those partitions have no leader here.
        self.awaiting = {
            (info.name, idx): st.leader_epoch
            for info in list(self.store.topics.values())
            for idx, st in enumerate(info.partitions)
            if st.leader == self.node_id
        }
        self.registered = True
        self.store.register_broker(
            BrokerRegistration(
                self.node_id,
                adv.host,
                adv.port,
                broker.config.get("broker.rack"),
                endpoints=endpoints,
                registry_url=broker.schema_registry.url if broker.schema_registry else None,
            )
        )
        self.reconcile_all()

    async def controlled_shutdown(self) -> None:
        """Hand leadership to other ISR members and leave every ISR before stopping."""
        if not self.registered or not self.broker.config.get("controlled.shutdown.enable"):
            return
        self.closing.set()
        self.store.set_shutting_down(self.node_id)
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()  # no fetch may put us back into an ISR
        self.fetchers.clear()
        stuck = self.controller.controlled_shutdown(self.node_id)
        if stuck:
            log.warning(
                "controlled shutdown: %d partitions have no other ISR member to take over; "
                "they are offline until this broker returns",
                stuck,
            )
        self.reconcile_all()
        await asyncio.sleep(0)  # let the new leaders take over before the sockets close
        log.info("controlled shutdown of broker %d done", self.node_id)

    async def stop(self) -> None:
        self._close()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        self._unregister()

    def abandon(self) -> None:
        """A kill: drop the fetchers and the registration (the session ends), write nothing."""
        self._close()
        for fetcher in self.fetchers.values():
            fetcher.abandon()
        self.fetchers.clear()
        self._unregister()

    def _close(self) -> None:
        self.closing.set()
        self.store.unsubscribe(self._on_change)
        for task in self._tasks:
            task.cancel()
        for part in list(self.broker.topics.partitions.values()):
            part.wake()  # acks=all waits end

    def _unregister(self) -> None:
        self._tasks.clear()
        if self.registered:
            self.registered = False
            self.store.unregister_broker(self.node_id)

    # -- store changes ----------------------------------------------------------------------

    def _on_change(self, change: MetadataChange) -> None:
        if not self.registered:
            return
        if change.kind == "broker":
            self.controller.on_brokers_changed()
        elif change.kind == "reassign-request" and self.controller.active:
            self.controller.start_requested()
        elif change.kind == "topic" and change.topic is not None:
            self.reconcile_topic(change.topic)
            if self.controller.active:  # e.g. unclean.leader.election.enable was turned on
                self.controller.elect_offline()
                self.controller.complete_reassignments(change.topic)
        elif change.kind == "partition" and change.topic is not None:
            self.reconcile_partition(change.topic, change.partition or 0)
            if self.controller.active:  # an adding replica joined the ISR: done?
                self.controller.complete_reassignments(change.topic, change.partition or 0)

    def reconcile_all(self) -> None:
        names = set(self.store.topics) | {t for t, _ in self.broker.topics.partitions}
        names |= {t for t, _ in self.broker.logs.logs}  # a stray copy left from a move
        for name in sorted(names):
            self.reconcile_topic(name)

    def reconcile_topic(self, name: str) -> None:
        topics = self.broker.topics
        info = self.store.topics.get(name)
        for key in [k for k in list(self.applied) + list(topics.partitions) if k[0] == name]:
            part = topics.partitions.get(key)
            gone = info is None or key[1] >= len(info.partitions)
            if part is None or gone or (info is not None and part.topic_id != info.topic_id):
                self._forget(key)
                if part is not None:
                    topics.remove_local(*key)
        if info is not None:
            for idx in range(len(info.partitions)):
                self.reconcile_partition(name, idx)

    def reconcile_partition(self, topic: str, idx: int) -> None:
        info = self.store.topics.get(topic)
        if info is None or not 0 <= idx < len(info.partitions):
            return
        st = info.partitions[idx]
        key = (topic, idx)
        if self.node_id not in st.replicas:
            # reassigned away (or never here): stop following and delete the copy, as Kafka's
            # StopReplica with deletePartition
            # (or moved while this broker was down: a stray log found at start-up)
            topics = self.broker.topics
            if key in self.applied or key in topics.partitions or key in topics.logs.logs:
                log.info(
                    "%s-%d: replica moved off broker %d, deleting it", topic, idx, self.node_id
                )
                self._forget(key)
                part = self.broker.topics.partitions.get(key)
                if part is not None:  # acks=all waits and fetches answer NOT_LEADER_OR_FOLLOWER
                    part.leader, part.leader_epoch = st.leader, st.leader_epoch
                self.broker.topics.remove_local(topic, idx)
            return
        part = self.broker.topics.open_partition(info, idx)
        if part is None:
            return
        waited = self.awaiting.get(key)
        if waited is not None:
            if st.leader == self.node_id and st.leader_epoch <= waited:
                st = st.with_leader_isr(-1, st.leader_epoch, st.isr)  # no leader here yet
            else:
                del self.awaiting[key]
        previous = self.applied.get(key)
        if previous != (st.leader, st.leader_epoch):
            self.applied[key] = (st.leader, st.leader_epoch)
            if st.leader == self.node_id:
                # first since the start (or since waiting for the controller after it)
                self._become_leader(part, st, first=previous is None or previous[0] < 0)
            else:
                self._become_follower(part, st)
            return
        if part.isr != st.isr or part.replicas != st.replicas:
            part.isr = list(st.isr)
            part.replicas = list(st.replicas)
            tracker = self.trackers.get(key)
            if tracker is not None:
                tracker.set_replicas(part.replicas)
            if part.is_leader:
                self._advance_high_watermark(part)
            part.wake()

    def _forget(self, key: Key) -> None:
        self.applied.pop(key, None)
        self.trackers.pop(key, None)
        for fetcher in self.fetchers.values():
            fetcher.remove(key)

    # -- leader and follower ----------------------------------------------------------------

    def _become_leader(self, part: Partition, st: PartitionState, first: bool) -> None:
        key = (part.topic, part.index)
        for fetcher in self.fetchers.values():
            fetcher.remove(key)
        lg = part.log
        part.replicas = list(st.replicas)
        part.isr = list(st.isr) or [self.node_id]
        part.leader = self.node_id
        part.leader_epoch = st.leader_epoch
        if first and len(st.replicas) > 1:
            # after a restart only the checkpointed high watermark is known to be replicated
            checkpointed = self.broker.logs.high_watermarks.get(key, 0)
            part.high_watermark = min(checkpointed, lg.log_end_offset)
        lg.epochs.assign(st.leader_epoch, lg.log_end_offset)
        part.leader_epoch_start_offset = lg.log_end_offset
        self.trackers[key] = LeaderTracker(
            self.node_id, part.replicas, part.isr, lg.log_end_offset, now_ms()
        )
        self._advance_high_watermark(part)
        part.wake()
        log.info(
            "%s-%d: leader in epoch %d from offset %d, ISR %s",
            part.topic,
            part.index,
            st.leader_epoch,
            lg.log_end_offset,
            part.isr,
        )
        self.broker.topics.notify_leadership(part, True)

    def _become_follower(self, part: Partition, st: PartitionState) -> None:
        key = (part.topic, part.index)
        self.trackers.pop(key, None)
        part.replicas = list(st.replicas)
        part.isr = list(st.isr)
        part.leader = st.leader
        part.leader_epoch = st.leader_epoch
        part.leader_epoch_start_offset = None
        part.high_watermark = min(part.high_watermark, part.log.log_end_offset)
        part.wake()  # waiting fetches and acks=all answer NOT_LEADER_OR_FOLLOWER
        for node, fetcher in self.fetchers.items():
            if node != st.leader:
                fetcher.remove(key)
        if st.leader >= 0 and not self.closing.is_set():
            leader_fetcher = self.fetchers.get(st.leader)
            if leader_fetcher is None:
                leader_fetcher = self.fetchers[st.leader] = ReplicaFetcher(self, st.leader)
            leader_fetcher.add(part.topic, part.index, st.leader_epoch)
        log.info(
            "%s-%d: follower of %d in epoch %d at offset %d",
            part.topic,
            part.index,
            st.leader,
            st.leader_epoch,
            part.log.log_end_offset,
        )
        self.broker.topics.notify_leadership(part, False)

    # -- leader side: follower fetches, high watermark, ISR ---------------------------------

    def on_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        """The fetch handler's hook for every partition of a fetch with a replica id."""
        tracker = self.trackers.get((part.topic, part.index))
        if tracker is None or not part.is_leader:
            return
        leo = part.log.log_end_offset
        moved = tracker.on_fetch(replica_id, fetch_offset, leo, now_ms())
        if moved is None:
            return
        if (
            replica_id not in part.isr
            and tracker.can_join(replica_id, part.isr, part.high_watermark)
            and self._eligible(replica_id)
        ):
            if not self._joining:
                asyncio.get_running_loop().call_soon(self._expand_isrs)
            self._joining[(part.topic, part.index)] = (part, replica_id)
        elif moved:
            # the high watermark follows the followers' log ends (the leader's own appends,
            # ISR changes and leadership call it themselves): a fetch at the same offset as
            # the last one, e.g. every idle partition of a follower's session, cannot move it
            self._advance_high_watermark(part)

    def _eligible(self, node: int) -> bool:
        reg = self.store.broker(node)
        return reg is not None and not reg.shutting_down

    def _advance_high_watermark(self, part: Partition) -> None:
        tracker = self.trackers.get((part.topic, part.index))
        leo = part.log.log_end_offset
        hw = leo if tracker is None else tracker.high_watermark(part.isr, leo)
        if hw > part.high_watermark:
            part.high_watermark = hw
            part.wake_high_watermark()  # acks=all produces and consumers; followers need records

    def _expand_isrs(self) -> None:
        """Add the followers that caught up during the last turn of the loop to their ISRs."""
        joining, self._joining = self._joining, {}
        if self.closing.is_set():
            return  # stopping: what the store holds stays as it is
        changes = []
        for part, replica_id in joining.values():
            tracker = self.trackers.get((part.topic, part.index))
            if (
                tracker is not None
                and part.is_leader
                and replica_id not in part.isr
                and tracker.can_join(replica_id, part.isr, part.high_watermark)
            ):
                changes.append((part, [*part.isr, replica_id], "caught up"))
        try:
            self._alter_isrs(changes)
        except Exception:  # (a callback: nobody else would see it)
            log.exception("ISR expansion failed")

    def _alter_isrs(self, changes: list[tuple[Partition, list[int], str]]) -> None:
        """Change ISRs in the store (each conditional on our epochs), then locally. One store
        update for all of them, as Kafka's AlterPartition batches its partitions: a metadata
        save (an fsync on the event loop) per partition made ISR churn on a slow disk stall
        every broker of a process, which made followers lag and the ISRs churn more."""
        updates = []
        changing = []
        for part, isr, why in changes:
            info = self.store.topics.get(part.topic)
            if info is None or part.index >= len(info.partitions):
                continue
            cur = info.partitions[part.index]
            if cur.leader != self.node_id or cur.leader_epoch != part.leader_epoch:
                continue  # deposed: the change notification is on its way
            if any(r not in cur.replicas for r in isr):
                continue  # a replica reassigned away (ZooKeeper: its topic node came first)
            new = cur.with_leader_isr(self.node_id, cur.leader_epoch, isr)
            updates.append((part.topic, part.index, new, cur.leader_epoch, cur.partition_epoch))
            changing.append((part, isr, why))
        if not updates:
            return
        applied = self.store.update_partitions(updates)
        for ok, (part, isr, why) in zip(applied, changing, strict=True):
            if not ok:
                continue
            log.info("%s-%d: ISR %s -> %s (%s)", part.topic, part.index, part.isr, isr, why)
            self.isr_changes["shrink" if len(isr) < len(part.isr) else "expand"] += 1
            part.isr = list(isr)
            self._advance_high_watermark(part)
            part.wake()

    async def _isr_expiry(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.shrink_isrs()
            except Exception:
                log.exception("ISR expiry failed")

    def shrink_isrs(self) -> None:
        now = now_ms()
        topics = self.broker.topics
        shrinking: list[tuple[Partition, list[int], str]] = []
        for key, tracker in list(self.trackers.items()):
            part = topics.get(*key)
            if part is None or not part.is_leader:
                continue
            lagging = tracker.out_of_sync(part.isr, part.log.log_end_offset, now, self.lag_ms)
            if lagging:
                isr = [r for r in part.isr if r not in lagging]
                shrinking.append((part, isr, f"{lagging} behind for {self.lag_ms} ms"))
        self._alter_isrs(shrinking)

    # -- acks=all -----------------------------------------------------------------------------

    async def wait_for_acks(
        self, pending: Sequence[tuple[Partition | None, AppendResult]], timeout_ms: int
    ) -> None:
        await wait_for_acks(pending, timeout_ms, self.closing)

    async def wait_for_isr(self, part: Partition | None, timeout_ms: int) -> ErrorCode:
        """Wait until the ISR holds everything appended so far to `part` (acks=-1 for a write
        already made, e.g. a coordinator's); NONE when this broker does not lead it."""
        if part is None or not part.is_leader:
            return ErrorCode.NONE
        result = AppendResult(ErrorCode.NONE)
        await self.wait_for_acks([(part, result)], timeout_ms)
        return ErrorCode(result.error)
