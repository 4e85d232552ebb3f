"""The controller: partition leader elections, as Kafka's KafkaController and its
PartitionStateMachine / ReplicaStateMachine with the election strategies of
`PartitionLeaderElectionAlgorithms`.

One broker at a time is the controller: the lowest live broker id in the in-process store (the
`/controller` node's owner with ZooKeeper). Every broker runs a `Controller`; only the active one
acts on broker changes, all of them may run the explicit operations (controlled shutdown,
ElectLeaders), which are conditional updates on the store and so safe from any broker.

- A broker leaves (killed, session lost): every partition it led gets a new leader, the first
  replica in assignment order that is live and in the ISR, in a new leader epoch; the ISR loses
  the dead broker. With none, the partition stays offline (its last state kept, so the last ISR
  member can lead again when it returns), unless `unclean.leader.election.enable` lets the first
  live replica lead with an ISR of itself (data it lacks is lost, as in Kafka). Partitions it
  only followed lose it from their ISR at once, so acks=all does not wait for
  replica.lag.time.max.ms.
- A broker (re)registers: offline partitions it can lead get it, and partitions still recorded
  as led by it are elected again in a new epoch. A broker registering again under a new broker
  epoch (restarted, perhaps after losing power) is treated as gone first, as Kafka's controller
  treats a bounced broker: another in-sync replica leads what it led and it leaves every ISR
  (it rejoins once caught up); it leads again only when it was the last in-sync replica.
- A broker becoming the active controller (Kafka's onControllerFailover) has not seen what its
  predecessor left undone: it reads every registration and partition state, and a leader or
  ISR member registered after the state was written (its registration's creation zxid is newer
  than the state node's mzxid) restarted since, so it is handled as bounced, as above.
- Controlled shutdown: leadership of the broker's partitions moves to another ISR member, and
  it leaves the ISR of the partitions it follows, before it stops.
- A partition without any state yet (created in ZooKeeper by another tool) gets its first live
  replica as leader, with every live replica in the ISR, as Kafka's controller does for new
  partitions.
- ElectLeaders (KIP-460): preferred (the first assigned replica, when live and in the ISR) or
  unclean (any live replica, for a partition without a live leader).
- Replica reassignment (KIP-455, AlterPartitionReassignments): the replicas become the target
  followed by the original replicas not in it, with `adding_replicas` (target - original) and
  `removing_replicas` (original - target) recorded in the partition state, in a new leader
  epoch; the adding replicas fetch from the leader like any follower and join the ISR once
  caught up. When every target replica is in the ISR the active controller completes it
  (`complete_reassignments`, run on every partition change): the replicas become the target,
  the removing ones leave the ISR, and a leader being removed hands over to the first target
  replica in the ISR, all in a new leader epoch; the removed brokers then delete their copies.
  A null target cancels: the adding replicas are dropped and the original set is back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.cluster.metadata_store import MetadataStore, PartitionState
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1

Update = tuple[str, int, PartitionState, int, int]


class Controller:
    def __init__(
        self, store: MetadataStore, node_id: int, unclean_enabled: Callable[[str], bool]
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.unclean_enabled = unclean_enabled
        self.known: dict[int, int] = {}  # live broker id -> broker epoch, as last seen
        self.was_active = False  # as of the last broker change: becoming active is a failover

    @property
    def active(self) -> bool:
        return self.store.controller_id() == self.node_id

    def _eligible(self, node_id: int) -> bool:
        reg = self.store.broker(node_id)
        return reg is not None and not reg.shutting_down

    # -- broker changes ---------------------------------------------------------------------

    def observe(self) -> None:
        """Take the current registrations as known, without acting (a broker starting up)."""
        self.known = self._registrations()

    def _registrations(self) -> dict[int, int]:
        out = {}
        for node in self.store.live_brokers():
            reg = self.store.broker(node)
            if reg is not None:
                out[node] = reg.broker_epoch
        return out

    def on_brokers_changed(self) -> None:
        """React to registrations coming and going (every broker tracks them; the active
        controller acts, so a newly active one acts on what its predecessor left undone)."""
        current = self._registrations()
        restarted = {n for n, epoch in current.items() if self.known.get(n) != epoch}
        self.known = current
        active = self.active
        failover, self.was_active = active and not self.was_active, active
        if active:
            self.elect_offline(restarted, failover=failover)
            self.complete_reassignments()  # a predecessor's, or a removed leader came back
            self.start_requested()

    def elect_offline(self, restarted: set[int] | None = None, failover: bool = False) -> int:
        """Elect leaders where the leader is gone (or came back), drop dead ISR members.
        On `failover`, brokers registered since a partition's state was written count as
        restarted for that partition."""
        restarted = restarted or set()
        live = set(self.store.live_brokers())
        epochs = self._registrations() if failover else {}
        updates: list[Update] = []
        for info in list(self.store.topics.values()):
            for idx, st in enumerate(info.partitions):
                new: PartitionState | None = None
                bounced = restarted | _registered_since(st, epochs) if failover else restarted
                if st.leader not in live or st.leader in bounced:
                    new = self._offline_leader(info.name, idx, st, live, bounced)
                elif any(r not in live or r in bounced for r in st.isr):
                    isr = [r for r in st.isr if r in live and r not in bounced]
                    new = st.with_leader_isr(st.leader, st.leader_epoch, isr)
                if new is not None:
                    updates.append((info.name, idx, new, st.leader_epoch, st.partition_epoch))
        return self._apply(updates, "offline partitions")

    def _offline_leader(
        self,
        topic: str,
        idx: int,
        st: PartitionState,
        live: set[int],
        restarted: set[int] | None = None,
    ) -> PartitionState | None:
        if st.partition_epoch < 0 and not st.isr:
            # a new partition whose state nobody wrote yet (a topic created in ZooKeeper by
            # Kafka's own tools leaves that to the controller): every live replica is in sync
            isr = [r for r in st.replicas if self._eligible(r)]
            return PartitionState(list(st.replicas), isr[0], 0, isr) if isr else None
        # a restarted broker went down first (Kafka's onBrokerFailure for a bounced broker): it
        # may have lost what it had not flushed, so another in-sync replica leads and it leaves
        # the ISR; it leads again only as the last in-sync replica
        bounced = restarted or set()
        in_sync = [r for r in st.replicas if r in st.isr and self._eligible(r)]
        candidates = [r for r in in_sync if r not in bounced] or in_sync
        if candidates:
            isr = [r for r in st.isr if r in live and (r not in bounced or r == candidates[0])]
            return st.with_leader_isr(candidates[0], st.leader_epoch + 1, isr)
        if self.unclean_enabled(topic):
            candidates = [r for r in st.replicas if self._eligible(r)]
            if candidates:
                log.warning(
                    "unclean leader election for %s-%d: %d leads without the ISR %s "
                    "(records it lacks are lost)",
                    topic,
                    idx,
                    candidates[0],
                    st.isr,
                )
                return st.with_leader_isr(candidates[0], st.leader_epoch + 1, [candidates[0]])
        if st.leader in live:
            # the restarted leader is not in the ISR: offline (no leader) in a new epoch, so
            # it knows the controller saw its registration and does not lead in the old one
            log.warning("%s-%d is offline: its restarted leader is not in the ISR", topic, idx)
            return st.with_leader_isr(-1, st.leader_epoch + 1, list(st.isr))
        log.warning("%s-%d is offline: no live replica in the ISR %s", topic, idx, st.isr)
        return None

    # -- controlled shutdown ----------------------------------------------------------------

    def controlled_shutdown(self, node_id: int) -> int:
        """Move leadership away from `node_id` and take it out of every ISR it is in.
        Returns how many partitions it still leads (no other ISR member to take over)."""
        updates: list[Update] = []
        stuck = 0
        for info in list(self.store.topics.values()):
            for idx, st in enumerate(info.partitions):
                if node_id not in st.replicas:
                    continue
                isr = [r for r in st.isr if r != node_id]
                if st.leader == node_id:
                    candidates = [r for r in st.replicas if r in isr and self._eligible(r)]
                    if not candidates:
                        stuck += 1
                        continue
                    new = st.with_leader_isr(candidates[0], st.leader_epoch + 1, isr)
                elif node_id in st.isr and isr:
                    new = st.with_leader_isr(st.leader, st.leader_epoch, isr)
                else:
                    continue
                updates.append((info.name, idx, new, st.leader_epoch, st.partition_epoch))
        self._apply(updates, f"controlled shutdown of broker {node_id}")
        return stuck

    # -- ElectLeaders -----------------------------------------------------------------------

    def elect(
        self, partitions: list[tuple[str, int]], election_type: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        updates: list[Update] = []
        live = set(self.store.live_brokers())
        for topic, idx in partitions:
            info = self.store.topics.get(topic)
            if info is None or not 0 <= idx < len(info.partitions):
                results[(topic, idx)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "The partition does not exist.",
                )
                continue
            st = info.partitions[idx]
            if election_type == PREFERRED:
                outcome = self._preferred(topic, idx, st, live)
            else:
                outcome = self._unclean(topic, idx, st, live)
            if isinstance(outcome, PartitionState):
                updates.append((topic, idx, outcome, st.leader_epoch, st.partition_epoch))
                results[(topic, idx)] = (ErrorCode.NONE, None)
            else:
                results[(topic, idx)] = outcome
        applied = self.store.update_partitions(updates) if updates else []
        for (topic, idx, *_), ok in zip(updates, applied, strict=True):
            if not ok:
                results[(topic, idx)] = (
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    "The partition changed during the election; retry.",
                )
        return results

    def _preferred(
        self, topic: str, idx: int, st: PartitionState, live: set[int]
    ) -> PartitionState | tuple[ErrorCode, str | None]:
        preferred = st.replicas[0]
        if st.leader == preferred and preferred in live:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        if preferred in st.isr and self._eligible(preferred):
            log.info("preferred leader election: %d leads %s-%d", preferred, topic, idx)
            return st.with_leader_isr(preferred, st.leader_epoch + 1, st.isr)
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"Failed to elect leader for partition {topic}-{idx} under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        )

    def _unclean(
        self, topic: str, idx: int, st: PartitionState, live: set[int]
    ) -> PartitionState | tuple[ErrorCode, str | None]:
        if st.leader in live:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        candidates = [r for r in st.replicas if r in st.isr and self._eligible(r)]
        isr = [r for r in st.isr if r in live]
        if not candidates:
            candidates = [r for r in st.replicas if self._eligible(r)]
            isr = candidates[:1]
        if not candidates:
            return (
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition {topic}-{idx} under strategy "
                "UncleanPartitionLeaderElectionStrategy",
            )
        log.warning(
            "unclean leader election (requested): %d leads %s-%d", candidates[0], topic, idx
        )
        return st.with_leader_isr(candidates[0], st.leader_epoch + 1, isr)

    # -- reassignment (KIP-455) -------------------------------------------------------------

    def reassign(
        self, topic: str, idx: int, target: list[int] | None
    ) -> tuple[ErrorCode, str | None]:
        """Start (or replace, or with None cancel) the reassignment of one partition."""
        info = self.store.topics.get(topic)
        if info is None or not 0 <= idx < len(info.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        st = info.partitions[idx]
        original = [r for r in st.replicas if r not in st.adding_replicas]
        if target is None:
            if not st.adding_replicas and not st.removing_replicas:
                return (
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    f"No reassignment in progress for {topic}-{idx}.",
                )
            new = self._settle(st, original)
            why = "reassignment cancelled"
        else:
            if not target:
                return ErrorCode.INVALID_REPLICATION_ASSIGNMENT, "Empty replica list."
            if len(set(target)) != len(target):
                return (
                    ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                    f"The proposed assignment {target} has duplicate replicas.",
                )
            live = set(self.store.live_brokers())
            if any(r not in live for r in target):
                return (
                    ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                    f"The proposed assignment {target} contains brokers that are not alive.",
                )
            if target == original and not st.adding_replicas and not st.removing_replicas:
                return ErrorCode.NONE, None
            adding = [r for r in target if r not in original]
            removing = [r for r in original if r not in target]
            merged = list(target) + removing
            # replicas being cancelled (an earlier target's adding ones) leave the ISR
            isr = [r for r in st.isr if r in merged]
            new = PartitionState(
                merged,
                st.leader,
                st.leader_epoch + 1,
                isr or list(st.isr),
                adding_replicas=adding,
                removing_replicas=removing,
            )
            if st.leader not in merged:  # the leader was an adding replica now cancelled
                new = self._settle(new, merged)
                new.adding_replicas, new.removing_replicas = adding, removing
            why = f"reassignment to {target} started"
        (ok,) = self.store.update_partitions(
            [(topic, idx, new, st.leader_epoch, st.partition_epoch)]
        )
        if not ok:
            return ErrorCode.REASSIGNMENT_IN_PROGRESS, "The partition changed meanwhile; retry."
        log.info("%s-%d: %s, replicas %s ISR %s", topic, idx, why, new.replicas, new.isr)
        if self.active:
            self.complete_reassignments(topic, idx)
        return ErrorCode.NONE, None

    def start_requested(self) -> None:
        """Start the moves of ZooKeeper's /admin/reassign_partitions (Kafka's ZooKeeper-era
        tool writes it); those refused or already done leave the node at once, the others
        when they complete."""
        requested = self.store.requested_reassignments()
        if not requested:
            return
        settled = set()
        for (topic, idx), target in requested.items():
            info = self.store.topics.get(topic)
            st = info.partitions[idx] if info and 0 <= idx < len(info.partitions) else None
            if (
                st is not None
                and st.adding_replicas + st.removing_replicas
                and ([r for r in st.replicas if r not in st.removing_replicas] == target)
            ):
                continue  # that move is under way
            code, message = self.reassign(topic, idx, target)
            if code != ErrorCode.NONE:
                log.warning(
                    "/admin/reassign_partitions: %s-%d: %s %s", topic, idx, code.name, message
                )
                settled.add((topic, idx))
                continue
            info = self.store.topics.get(topic)
            if info is not None and not (
                info.partitions[idx].adding_replicas or info.partitions[idx].removing_replicas
            ):
                settled.add((topic, idx))  # nothing to move, or done at once
        if settled:
            self.store.forget_requested_reassignments(settled)

    def _settle(self, st: PartitionState, replicas: list[int]) -> PartitionState:
        """`st` with exactly `replicas`: the others leave the ISR, and a leader that is not
        among them hands over to the first of them that is live and in the ISR."""
        isr = [r for r in st.isr if r in replicas]
        leader = st.leader
        if leader not in replicas or not self._eligible(leader):
            candidates = [r for r in replicas if r in isr and self._eligible(r)]
            leader = candidates[0] if candidates else -1
        if not isr and leader >= 0:
            isr = [leader]
        return PartitionState(list(replicas), leader, st.leader_epoch + 1, isr)

    def reassignments(self) -> list[tuple[str, int, PartitionState]]:
        return [
            (info.name, idx, st)
            for info in list(self.store.topics.values())
            for idx, st in enumerate(info.partitions)
            if st.adding_replicas or st.removing_replicas
        ]

    def complete_reassignments(self, topic: str | None = None, idx: int | None = None) -> int:
        """Finish the reassignments whose target replicas are all in the ISR."""
        updates: list[Update] = []
        if topic is None:
            candidates = self.reassignments()
        else:  # one topic (or partition) changed: only it can have finished
            info = self.store.topics.get(topic)
            parts = list(enumerate(info.partitions)) if info is not None else []
            candidates = [
                (topic, i, st)
                for i, st in parts
                if (idx is None or i == idx) and (st.adding_replicas or st.removing_replicas)
            ]
        for name, i, st in candidates:
            target = [r for r in st.replicas if r not in st.removing_replicas]
            if not all(r in st.isr for r in target):
                continue
            new = self._settle(st, target)
            if new.leader < 0:
                continue
            updates.append((name, i, new, st.leader_epoch, st.partition_epoch))
        done = self._apply(updates, "reassignment completed")
        if done:
            self.store.forget_requested_reassignments({(u[0], u[1]) for u in updates})
        return done

    # -- applying ---------------------------------------------------------------------------

    def _apply(self, updates: list[Update], why: str) -> int:
        if not updates:
            return 0
        applied = self.store.update_partitions(updates)
        done = 0
        for (topic, idx, st, *_), ok in zip(updates, applied, strict=True):
            if ok:
                done += 1
                log.info(
                    "%s: %s-%d leader %d epoch %d ISR %s",
                    why,
                    topic,
                    idx,
                    st.leader,
                    st.leader_epoch,
                    st.isr,
                )
        return done


def _registered_since(st: PartitionState, epochs: dict[int, int]) -> set[int]:
    """The leader and ISR members of `st` whose registration (broker epoch: its creation zxid)
    is newer than the write of `st` (its mzxid): they restarted after the state was decided."""
    if st.written_zxid < 0:
        return set()
    named = {st.leader, *st.isr}
    return {n for n, epoch in epochs.items() if n in named and epoch > st.written_zxid}
