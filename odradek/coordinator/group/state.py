"""The classic rebalance protocol, as Kafka's GroupCoordinator: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, session expiry, rebalance and initial-delay timers.

`GroupStateMachine` is the one class that changes a group's state: every transition is an event
looked up in `TRANSITIONS` (h11's rule: all that affects the state lives here), with the
rebalance it drives (the delayed and initial joins, the pending-sync expiry, the assignment
handed to the members), the groups, their session timers and their persistence, Heartbeat and
LeaveGroup. The JoinGroup and SyncGroup requests are `join.JoinGroupOp` and `sync.SyncGroupOp`:
collaborators that take one typed request (`JoinParams`, `SyncParams`), validate it and call
the machine's transitions. Sans-IO: no sockets and no asyncio. Responses that must wait for the
rebalance (JoinGroup, SyncGroup) go out through callbacks, time comes from a `Scheduler`, and
the group's metadata is persisted through an injected `append(group_id, records) -> ErrorCode`
before it is applied (validate -> records -> append -> apply -> answer).

The join phase (Kafka's DelayedJoin / InitialDelayedJoin): `group.initial.rebalance.delay.ms`
delays the first rebalance of an Empty group, extended by each newcomer up to the rebalance
timeout; members that do not rejoin within the rebalance timeout are removed (static ones are
kept). The sync phase: members that do not send SyncGroup within the rebalance timeout after the
join completed are removed and the group rebalances.

Sessions (Kafka's DelayedHeartbeat): every heartbeat, join, sync or offset commit of a member
restarts its session timer; when it fires, a member waiting in a rebalance is spared (unless it
is new), any other is removed and the group rebalances. Static members (KIP-345) are removed only
by their session or an administrative LeaveGroup naming their group.instance.id (LeaveGroup v3+).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    IllegalTransition,
    JoinResult,
    Member,
    SyncResult,
)
from odradek.coordinator.group.timers import Scheduler
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]
Appender = Callable[[str, list[Record]], ErrorCode]
# (group id, done): calls done(error) once everything appended so far to the group's offsets
# partition is replicated (NONE) or cannot be (the client's error), as Kafka's appends with
# acks=-1 complete; at once with NONE where there is nothing to replicate.
Replicator = Callable[[str, Callable[[ErrorCode], None]], None]


def replicated_at_once(_group_id: str, done: Callable[[ErrorCode], None]) -> None:
    done(ErrorCode.NONE)


Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


class GroupEvent(Enum):
    """What moves a group from one state to another."""

    REBALANCE = "rebalance"  # a member joins, changes, leaves or expires
    JOINED = "joined"  # the join phase completed with members: the next generation
    EMPTIED = "emptied"  # the join phase completed with nobody left
    ASSIGNED = "assigned"  # the leader's assignment is stored
    DROPPED = "dropped"  # the group is deleted or its offsets partition unloaded
    MIGRATED = "migrated"  # its members moved into a consumer group (KIP-848 online upgrade)
    RETURNED = "returned"  # they came back with a current assignment (KIP-848 downgrade)


# (state, event) -> next state; a pair not here is a bug (Kafka's assertValidTransition)
TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState] = {
    (Empty, GroupEvent.REBALANCE): Preparing,
    (Stable, GroupEvent.REBALANCE): Preparing,
    (Completing, GroupEvent.REBALANCE): Preparing,
    (Preparing, GroupEvent.JOINED): Completing,
    (Preparing, GroupEvent.EMPTIED): Empty,
    (Completing, GroupEvent.ASSIGNED): Stable,
    **{(state, GroupEvent.DROPPED): Dead for state in GroupState},
    **{(state, GroupEvent.MIGRATED): Empty for state in (Stable, Preparing, Completing)},
    (Empty, GroupEvent.RETURNED): Stable,
}


@dataclass(slots=True, frozen=True)
class GroupConfig:
    """Kafka's group.* broker settings."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000


@dataclass(slots=True, frozen=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


class GroupStateMachine:
    """Every group of this coordinator and the rebalance protocol over them."""

    def __init__(self, config: GroupConfig, scheduler: Scheduler, append: Appender) -> None:
        self.config = config
        self.scheduler = scheduler
        self.append = append
        self.replicated: Replicator = replicated_at_once
        self.groups: dict[str, ClassicGroup] = {}
        self.rebalances = 0

    def now(self) -> int:
        return self.scheduler.now_ms()

    # -- transitions --------------------------------------------------------------------------

    def _transition(self, group: ClassicGroup, event: GroupEvent) -> None:
        target = TRANSITIONS.get((group.state, event))
        if target is None:
            raise IllegalTransition(
                f"group {group.group_id} cannot take {event.value} in {group.state.value}"
            )
        group.state = target
        group.state_timestamp = self.now()

    @staticmethod
    def can_rebalance(group: ClassicGroup) -> bool:
        return (group.state, GroupEvent.REBALANCE) in TRANSITIONS

    # -- groups -------------------------------------------------------------------------------

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.now())
        return group

    def drop(self, group: ClassicGroup) -> None:
        """Forget a group (deleted or unloaded): Dead, timers cancelled, waiters answered."""
        previous = group.state
        if not group.is_(Dead):
            self._transition(group, GroupEvent.DROPPED)
        if previous is Preparing:
            for member in list(group.members.values()):
                group.maybe_invoke_join(
                    member, JoinResult.failed(member.member_id, ErrorCode.NOT_COORDINATOR)
                )
        elif previous in (Stable, Completing):
            for member in list(group.members.values()):
                group.maybe_invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
        for member_id in list(group.members) + list(group.pending_members):
            self.scheduler.cancel(("heartbeat", group.group_id, member_id))
        self.scheduler.cancel(("join", group.group_id))
        self.scheduler.cancel(("sync", group.group_id))
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def hand_over(self, group: ClassicGroup) -> None:
        """The group's members now belong to a consumer group (KIP-848 online upgrade): it
        stays, Empty, with its committed offsets; waiters are told to rejoin, timers cancelled.
        Nothing is written here (the conversion writes the classic group's tombstone)."""
        previous = group.state
        if previous in (Stable, Preparing, Completing):
            self._transition(group, GroupEvent.MIGRATED)
        for member in list(group.members.values()):
            if previous is Preparing:
                group.maybe_invoke_join(
                    member, JoinResult.failed(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
                )
            else:
                group.maybe_invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        for member_id in list(group.members) + list(group.pending_members):
            self.scheduler.cancel(("heartbeat", group.group_id, member_id))
        self.scheduler.cancel(("join", group.group_id))
        self.scheduler.cancel(("sync", group.group_id))
        for member_id in list(group.members):
            group.remove(member_id)
        group.pending_members.clear()
        group.pending_sync_members.clear()
        group.static_members.clear()
        group.protocol_type = group.protocol_name = group.leader_id = None
        group.join_timer = None
        group.subscribed = None

    # -- persistence --------------------------------------------------------------------------

    def returned(self, group: ClassicGroup) -> None:
        """Its members came back from a consumer group whose target assignment is current
        (KIP-848 online downgrade by a static member's replacement): Stable at once, as
        Kafka's ClassicGroup.fromConsumerGroup."""
        self._transition(group, GroupEvent.RETURNED)

    def group_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> Record:
        value = rec.GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[
                rec.MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    assignment.get(m.member_id, b""),
                )
                for m in group.members.values()
            ],
        )
        return rec.group_key(group.group_id), rec.group_value(value)

    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> ErrorCode:
        """Append the group's metadata record. A record too large for the offsets topic is
        UNKNOWN_SERVER_ERROR here, as Kafka's GroupMetadataManager.storeGroup answers for
        MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE / INVALID_FETCH_SIZE (the appender reports
        them as offset commits see them, INVALID_COMMIT_OFFSET_SIZE)."""
        error = self.append(group.group_id, [self.group_record(group, assignment)])
        if error == ErrorCode.INVALID_COMMIT_OFFSET_SIZE:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return error

    def load_group(self, group_id: str, value: rec.GroupValue) -> ClassicGroup:
        """A group as its last GroupMetadataValue left it: Stable with members, else Empty."""
        group = self.get_or_create(group_id)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        # replay is not a transition: the record says which state the group was left in
        group.state = Stable if value.members else Empty
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        group.members.clear()
        group.static_members.clear()
        for mv in value.members:
            member = Member(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.rebalance_timeout,
                mv.session_timeout,
                value.protocol_type,
                [(value.protocol or "", mv.subscription)],
            )
            member.assignment = mv.assignment
            group.members[mv.member_id] = member
            if mv.group_instance_id is not None:
                group.static_members[mv.group_instance_id] = mv.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed = group.compute_subscribed_topics()
        return group

    def on_group_loaded(self, group: ClassicGroup) -> None:
        """Members of a loaded Stable group keep their session: their heartbeats continue."""
        if group.size > self.config.max_size:
            self.prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in group.members.values():
            self.schedule_heartbeat(group, member)

    # -- timers -------------------------------------------------------------------------------

    def schedule_heartbeat(
        self, group: ClassicGroup, member: Member, timeout_ms: int | None = None
    ) -> None:
        member_id = member.member_id
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.scheduler.schedule(
            ("heartbeat", group.group_id, member_id),
            timeout,
            lambda: self._expire_heartbeat(group, member_id),
        )

    def schedule_pending_expiry(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        self.scheduler.schedule(
            ("heartbeat", group.group_id, member_id),
            timeout_ms,
            lambda: self._expire_pending(group, member_id),
        )

    def cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        self.scheduler.cancel(("heartbeat", group.group_id, member_id))

    def _live(self, group: ClassicGroup) -> bool:
        return not group.is_(Dead) and self.groups.get(group.group_id) is group

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if not self._live(group) or not group.is_pending_member(member_id):
            return
        log.info(
            "pending member %s in group %s removed after its session timed out",
            member_id,
            group.group_id,
        )
        self._remove_pending_member(group, member_id)

    def _expire_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        if not self._live(group):
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # members waiting in a rebalance satisfy their heartbeats, except new ones
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return
        log.info(
            "member %s in group %s has failed (session timeout %d ms), removing it",
            member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on heartbeat expiration"
        )

    def validate_member(
        self, group: ClassicGroup, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        """Kafka's validateCurrentMember: fenced instance, unknown instance, unknown member."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info(
                    "member %s with group.instance.id %s of group %s is fenced by %s",
                    member_id,
                    instance_id,
                    group.group_id,
                    current,
                )
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # -- Heartbeat ----------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        group = self.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(Dead):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(Empty):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.members[member_id])
        if group.is_(Preparing):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """An offset commit from a member keeps its session alive, as a heartbeat does."""
        member = group.members.get(member_id)
        if member is not None:
            self.schedule_heartbeat(group, member)

    # -- LeaveGroup ---------------------------------------------------------------------------

    def leave(
        self, group_id: str, leaving: list[LeaveMember]
    ) -> tuple[ErrorCode, list[tuple[LeaveMember, ErrorCode]]]:
        group = self.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving]
        if group.is_(Dead):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for m in leaving:
            results.append((m, self._leave_one(group, m)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: ClassicGroup, m: LeaveMember) -> ErrorCode:
        why = m.reason or "not provided"
        if m.member_id == "":
            # administrative removal of a static member by its instance id
            current = group.static_member_id(m.group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_current_member(group, current, why)
            return ErrorCode.NONE
        if group.is_pending_member(m.member_id):
            self._remove_pending_member(group, m.member_id)
            self.cancel_heartbeat(group, m.member_id)
            log.info("pending member %s has left group %s", m.member_id, group.group_id)
            return ErrorCode.NONE
        error = self.validate_member(group, m.member_id, m.group_instance_id)
        if error is not None:
            return error
        self._remove_current_member(group, m.member_id, why)
        return ErrorCode.NONE

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.members[member_id]
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup; client reason: {reason}"
        )
        self.cancel_heartbeat(group, member_id)
        log.info(
            "member %r has left group %s through LeaveGroup; client reason: %s",
            member,
            group.group_id,
            reason,
        )

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, reason: str
    ) -> None:
        # a new member may time out while its JoinGroup waits: answer it so it can retry
        group.maybe_invoke_join(member, JoinResult.failed("", ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (Stable, Completing):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(Preparing):
            self.check_join(group)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(Preparing):
            self.check_join(group)

    # -- the rebalance: join phase ------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if self.can_rebalance(group):
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(Completing):
            self.fail_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._clear_sync_expiration(group)
        was_empty = group.is_(Empty)
        self._transition(group, GroupEvent.REBALANCE)
        log.info(
            "preparing to rebalance group %s with old generation %d (reason: %s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            self._watch_join(group, group.rebalance_timeout_ms())

    def _schedule_initial_join(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        group.join_timer = "initial"
        self.scheduler.schedule(
            ("join", group.group_id), delay, lambda: self._initial_join_due(group, delay, remaining)
        )

    def _initial_join_due(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if not self._live(group):
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            self._schedule_initial_join(group, next_delay, max(remaining - delay, 0))
        else:
            self._complete_join(group)

    def _watch_join(self, group: ClassicGroup, timeout_ms: int) -> None:
        """Kafka's DelayedJoin: complete now if everyone joined, else on join or timeout."""
        group.join_timer = "delayed"
        if group.has_all_members_joined():
            self._complete_join(group)
            return
        self.scheduler.schedule(
            ("join", group.group_id), timeout_ms, lambda: self._join_timed_out(group)
        )

    def _join_timed_out(self, group: ClassicGroup) -> None:
        if self._live(group) and group.join_timer == "delayed":
            self._complete_join(group)

    def check_join(self, group: ClassicGroup) -> None:
        if group.join_timer == "delayed" and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's onCompleteJoin: drop who did not rejoin, start the next generation."""
        self.scheduler.cancel(("join", group.group_id))
        group.join_timer = None
        stragglers = [m for m in group.members.values() if not m.awaiting_join and not m.is_static]
        if stragglers:
            log.info(
                "group %s removed dynamic members who did not rejoin: %s",
                group.group_id,
                [m.member_id for m in stragglers],
            )
            for member in stragglers:
                group.remove(member.member_id)
                self.cancel_heartbeat(group, member.member_id)
        if group.is_(Dead):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error(
                "group %s could not complete its rebalance: no member rejoined", group.group_id
            )
            self._watch_join(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation()
        self._transition(group, GroupEvent.JOINED if group.members else GroupEvent.EMPTIED)
        if group.is_(Empty):
            log.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )
            error = self.store_group(group, {})
            if error != ErrorCode.NONE:
                log.warning(
                    "failed to write empty metadata for group %s: %s", group.group_id, error.name
                )
            return
        self.rebalances += 1
        log.info(
            "stabilized group %s generation %d with %d members (protocol %s)",
            group.group_id,
            group.generation_id,
            group.size,
            group.protocol_name,
        )
        for member in list(group.members.values()):
            result = group.join_result(member, group.is_leader(member.member_id))
            group.maybe_invoke_join(member, result)
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # -- the rebalance: sync phase ------------------------------------------------------------

    def complete_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """The leader's stored assignment goes to every member; the group is Stable."""
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, ErrorCode.NONE)
        self._transition(group, GroupEvent.ASSIGNED)

    def fail_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.maybe_invoke_sync(member, result):
                self.schedule_heartbeat(group, member)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        generation = group.generation_id
        self.scheduler.schedule(
            ("sync", group.group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group, generation),
        )

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.scheduler.cancel(("sync", group.group_id))

    def _clear_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.scheduler.cancel(("sync", group.group_id))

    def _expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        if not self._live(group) or generation != group.generation_id:
            return
        if group.state not in (Completing, Stable) or not group.pending_sync_members:
            return
        late = sorted(group.pending_sync_members)
        for member_id in late:
            group.remove(member_id)
            self.cancel_heartbeat(group, member_id)
        log.info(
            "group %s removed members who did not send SyncGroup in time: %s", group.group_id, late
        )
        self.prepare_rebalance(group, f"removing {late} on pending sync request expiration")
