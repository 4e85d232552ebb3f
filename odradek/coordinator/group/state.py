"""The classic rebalance protocol, as Kafka's GroupCoordinator: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, session expiry, rebalance and initial-delay timers.

`GroupStateMachine` holds the groups, their timers and their persistence, answers Heartbeat and
LeaveGroup, and takes JoinGroup from `join.JoinGroupMixin` and SyncGroup from
`sync.SyncGroupMixin`. Sans-IO: no sockets and no asyncio. Requests come in as calls, responses
that must wait for the rebalance (JoinGroup, SyncGroup) go out through callbacks, time comes from
a `Scheduler`, and the group's metadata is persisted through an injected
`append(group_id, records) -> ErrorCode` before it is applied (validate -> records -> append ->
apply -> answer).

Sessions (Kafka's DelayedHeartbeat): every heartbeat, join, sync or offset commit of a member
restarts its session timer; when it fires, a member waiting in a rebalance is spared (unless it
is new), any other is removed and the group rebalances. Static members (KIP-345) are removed only
by their session or an administrative LeaveGroup naming their group.instance.id (LeaveGroup v3+).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.join import JoinGroupMixin
from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from odradek.coordinator.group.sync import SyncGroupMixin
from odradek.coordinator.group.timers import Scheduler
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]
Appender = Callable[[str, list[Record]], ErrorCode]

Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


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


class GroupStateMachine(JoinGroupMixin, SyncGroupMixin):
    """Every group of this coordinator and the rebalance protocol over them."""

    def __init__(self, config: GroupConfig, scheduler: Scheduler, append: Appender) -> None:
        self.config = config
        self.scheduler = scheduler
        self.append = append
        self.groups: dict[str, ClassicGroup] = {}
        self.rebalances = 0

    def now(self) -> int:
        return self.scheduler.now_ms()

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
            group.transition_to(Dead, self.now())
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

    # -- persistence --------------------------------------------------------------------------

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
            self._prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    # -- timers -------------------------------------------------------------------------------

    def _schedule_heartbeat(
        self, group: ClassicGroup, member: Member, timeout_ms: int | None = None
    ) -> None:
        member_id = member.member_id
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.scheduler.schedule(
            ("heartbeat", group.group_id, member_id),
            timeout,
            lambda: self._expire_heartbeat(group, member_id),
        )

    def _schedule_pending_expiry(
        self, group: ClassicGroup, member_id: str, timeout_ms: int
    ) -> None:
        self.scheduler.schedule(
            ("heartbeat", group.group_id, member_id),
            timeout_ms,
            lambda: self._expire_pending(group, member_id),
        )

    def _cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
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
        self._schedule_heartbeat(group, group.members[member_id])
        if group.is_(Preparing):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """An offset commit from a member keeps its session alive, as a heartbeat does."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)

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
            self._cancel_heartbeat(group, m.member_id)
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
        self._cancel_heartbeat(group, member_id)
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
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(Preparing):
            self._check_join(group)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(Preparing):
            self._check_join(group)
