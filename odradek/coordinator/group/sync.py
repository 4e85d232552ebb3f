"""SyncGroup, as Kafka's GroupCoordinator.handleSyncGroup: `SyncGroupOp` takes one typed request
(`SyncParams`, built once from the SyncGroup request), validates it, and hands the leader's
assignment to `state.GroupStateMachine`, which stores it and, once the record is replicated,
gives every member its part and makes the group Stable. Members that do not send SyncGroup
within the rebalance timeout after the join completed are removed by the machine and the group
rebalances. v5 adds protocol_type and
protocol_name, checked against the group's (KIP-559).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    SyncCallback,
    SyncResult,
)
from odradek.coordinator.group.state import GroupStateMachine
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.coordinator.group.state")

Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


@dataclass(slots=True, frozen=True)
class SyncParams:
    """One SyncGroup request (key 14), as the handler decodes it."""

    group_id: str
    generation_id: int
    member_id: str
    protocol_type: str | None = None
    protocol_name: str | None = None
    instance_id: str | None = None
    assignments: dict[str, bytes] = field(default_factory=dict)  # only the leader's has any


class SyncGroupOp:
    """SyncGroup: followers wait for the leader's assignment, the leader's is stored."""

    def __init__(self, machine: GroupStateMachine) -> None:
        self.machine = machine

    def sync(self, p: SyncParams, callback: SyncCallback) -> None:
        """Handle one SyncGroup; `callback` gets the answer, at once or when it is assigned."""
        m = self.machine
        group = m.get(p.group_id)
        if group is None:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate(group, p)
        if error is not None:
            callback(SyncResult(error))
        elif group.is_(Empty):
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(Preparing):
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(Completing):
            member = group.members[p.member_id]
            member.sync_callback = callback
            m.remove_pending_sync_member(group, p.member_id)
            if group.is_leader(p.member_id):
                self._leader_sync(group, p.member_id, p.assignments)
        elif group.is_(Stable):
            m.remove_pending_sync_member(group, p.member_id)
            member = group.members[p.member_id]
            callback(
                SyncResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                )
            )
            m.schedule_heartbeat(group, member)

    def _validate(self, group: ClassicGroup, p: SyncParams) -> ErrorCode | None:
        if group.is_(Dead):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.machine.validate_member(group, p.member_id, p.instance_id)
        if error is not None:
            return error
        if p.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if p.protocol_type is not None and p.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if p.protocol_name is not None and p.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _leader_sync(
        self, group: ClassicGroup, leader_id: str, assignments: dict[str, bytes]
    ) -> None:
        m = self.machine
        log.info(
            "assignment received from leader %s of group %s for generation %d: %d "
            "members, %d static",
            leader_id,
            group.group_id,
            group.generation_id,
            group.size,
            sum(1 for x in group.members.values() if x.is_static),
        )
        missing = [x for x in group.members if x not in assignments]
        if missing:
            log.warning(
                "setting empty assignments for members %s of %s for generation %d",
                missing,
                group.group_id,
                group.generation_id,
            )
        assignment = {x: bytes(assignments.get(x, b"")) for x in group.members}
        generation = group.generation_id

        def stored(error: ErrorCode) -> None:
            # as Kafka's storeGroup callback: only the same generation, still completing
            if not group.is_(Completing) or generation != group.generation_id:
                return
            if error != ErrorCode.NONE:
                m.fail_assignment(group, error)
                m.maybe_prepare_rebalance(
                    group, f"error {error.name} storing the assignment of leader {leader_id}"
                )
                return
            m.complete_assignment(group, assignment)

        error = m.store_group(group, assignment)
        if error != ErrorCode.NONE:
            stored(error)
        else:
            # the group stays CompletingRebalance, and no member sees the assignment, until
            # the record is replicated: a coordinator that dies before then leaves nothing
            # behind that its successor does not have
            m.replicated(group.group_id, stored)
