"""SyncGroup: the leader's assignment is stored, then handed to every member, as Kafka's
GroupCoordinator (a mixin of `state.GroupStateMachine`). Members that do not send SyncGroup
within the rebalance timeout after the join completed are removed and the group rebalances.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    SyncCallback,
    SyncResult,
)
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.coordinator.group.state")

Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


class SyncGroupMixin:
    """SyncGroup and the expiry of members that never send it."""

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        instance_id: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        group = self.get(group_id)
        if group is None:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(
            group, generation_id, member_id, protocol_type, protocol_name, instance_id
        )
        if error is not None:
            callback(SyncResult(error))
        elif group.is_(Empty):
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(Preparing):
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(Completing):
            member = group.members[member_id]
            member.sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._leader_sync(group, member_id, assignments)
        elif group.is_(Stable):
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            callback(
                SyncResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                )
            )
            self._schedule_heartbeat(group, member)

    def _validate_sync(
        self,
        group: ClassicGroup,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        instance_id: str | None,
    ) -> ErrorCode | None:
        if group.is_(Dead):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _leader_sync(
        self, group: ClassicGroup, leader_id: str, assignments: dict[str, bytes]
    ) -> None:
        log.info(
            "assignment received from leader %s of group %s for generation %d: %d "
            "members, %d static",
            leader_id,
            group.group_id,
            group.generation_id,
            group.size,
            sum(1 for m in group.members.values() if m.is_static),
        )
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning(
                "setting empty assignments for members %s of %s for generation %d",
                missing,
                group.group_id,
                group.generation_id,
            )
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
        generation = group.generation_id
        error = self.store_group(group, assignment)
        if not group.is_(Completing) or generation != group.generation_id:
            return
        if error != ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(
                group, f"error {error.name} storing the assignment of leader {leader_id}"
            )
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(Stable, self.now())

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
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
                self._schedule_heartbeat(group, member)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        generation = group.generation_id
        self.scheduler.schedule(
            ("sync", group.group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group, generation),
        )

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
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
            self._cancel_heartbeat(group, member_id)
        log.info(
            "group %s removed members who did not send SyncGroup in time: %s", group.group_id, late
        )
        self._prepare_rebalance(group, f"removing {late} on pending sync request expiration")
