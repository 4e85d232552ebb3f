"""JoinGroup, as Kafka's GroupCoordinator.handleJoinGroup: `JoinGroupOp` takes one typed
request (`JoinParams`, built once from the JoinGroup request), validates it against the group and
calls `state.GroupStateMachine`, which owns the groups, their transitions, timers and persistence
and completes the join phase of the rebalance.

KIP-394: from JoinGroup v4 a dynamic member's first join gets MEMBER_ID_REQUIRED and a member id,
and is "pending" until it joins with it or its session times out. KIP-345: a static member that
joins with an unknown member id and a known group.instance.id replaces the old member id, which is
fenced, without a rebalance when the group is Stable and its protocol unchanged. KIP-814: from v9
such a rejoining static leader gets skip_assignment.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    Protocols,
)
from odradek.coordinator.group.state import GroupStateMachine
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.coordinator.group.state")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


@dataclass(slots=True, frozen=True)
class JoinParams:
    """One JoinGroup request (key 11), as the handler decodes it: v4 asks for a known member id
    (KIP-394), v5 adds group_instance_id (KIP-345), v8 the reason (KIP-800), v9 lets a static
    leader skip the assignment (KIP-814)."""

    group_id: str
    member_id: str
    instance_id: str | None
    require_known: bool
    support_skip: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    reason: str | None = None

    @property
    def why(self) -> str:
        return self.reason or "not provided"


class JoinGroupOp:
    """JoinGroup: a new member, a pending one (KIP-394), a static one (KIP-345), a current one."""

    def __init__(self, machine: GroupStateMachine) -> None:
        self.machine = machine

    def join(self, p: JoinParams, callback: JoinCallback) -> None:
        """Handle one JoinGroup; `callback` gets the answer, at once or when the join completes."""
        m = self.machine
        cfg = m.config
        member_id = p.member_id
        if not cfg.min_session_timeout_ms <= p.session_timeout_ms <= cfg.max_session_timeout_ms:
            callback(JoinResult.failed(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        unknown = member_id == ""
        group = m.get_or_create(p.group_id) if unknown else m.get(p.group_id)
        if group is None:
            callback(JoinResult.failed(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinResult.failed("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif unknown:
            self._new_member_join(group, p, callback)
        else:
            self._current_member_join(group, member_id, p, callback)
        if group.is_(Preparing):
            m.check_join(group)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.machine.config.max_size
        if group.state in (Empty, Dead):
            return True
        if group.is_(Preparing):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < limit
        return group.has(member_id) or group.size < limit

    def _new_member_join(self, group: ClassicGroup, p: JoinParams, callback: JoinCallback) -> None:
        m = self.machine
        instance_id = p.instance_id
        if group.is_(Dead):
            callback(JoinResult.failed("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            callback(JoinResult.failed("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = group.generate_member_id(p.client_id, instance_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                log.info(
                    "static member %s of group %s rejoins in state %s: member id %s replaces %s",
                    instance_id,
                    group.group_id,
                    group.state.value,
                    new_id,
                    old_id,
                )
                self._update_static_member(group, old_id, new_id, instance_id, p, callback)
                return
        elif p.require_known:
            log.debug(
                "dynamic member joins group %s in state %s: member id %s required",
                group.group_id,
                group.state.value,
                new_id,
            )
            group.pending_members.add(new_id)
            m.schedule_pending_expiry(group, new_id, p.session_timeout_ms)
            callback(JoinResult.failed(new_id, ErrorCode.MEMBER_ID_REQUIRED))
            return
        self._add_member_and_rebalance(group, new_id, p, callback)

    def _current_member_join(
        self, group: ClassicGroup, member_id: str, p: JoinParams, callback: JoinCallback
    ) -> None:
        m = self.machine
        instance_id, protocols, reason = p.instance_id, p.protocols, p.why
        if group.is_(Dead):
            callback(JoinResult.failed(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(p.protocol_type, [n for n, _ in protocols]):
            callback(JoinResult.failed(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if instance_id is not None:
                callback(JoinResult.failed(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            log.debug(
                "pending member %s joins group %s in state %s",
                member_id,
                group.group_id,
                group.state.value,
            )
            # p.instance_id is None here
            self._add_member_and_rebalance(group, member_id, p, callback)
            return
        error = m.validate_member(group, member_id, instance_id)
        if error is not None:
            callback(JoinResult.failed(member_id, error))
            return
        member = group.members[member_id]
        if group.is_(Preparing):
            self._update_member_and_rebalance(
                group,
                member,
                p,
                callback,
                f"member {member_id} joining group during {group.state.value}; "
                f"client reason: {reason}",
            )
        elif group.is_(Completing):
            if member.matches(protocols):
                # a repeated join (its response was lost): answer with the current generation
                callback(group.join_result(member, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(
                    group,
                    member,
                    p,
                    callback,
                    f"updating metadata for member {member_id} during "
                    f"{group.state.value}; client reason: {reason}",
                )
        elif group.is_(Stable):
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoins to make the group rebalance (e.g. new partitions)
                self._update_member_and_rebalance(
                    group,
                    member,
                    p,
                    callback,
                    f"{'leader' if group.is_leader(member_id) else 'member'} "
                    f"{member_id} re-joining group during Stable; client reason: {reason}",
                )
            else:
                callback(group.join_result(member, False))
        else:
            log.warning(
                "rejoining member %s of group %s in unexpected state %s",
                member_id,
                group.group_id,
                group.state.value,
            )
            callback(JoinResult.failed(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, p: JoinParams, callback: JoinCallback
    ) -> None:
        m = self.machine
        instance_id = p.instance_id
        member = Member(
            member_id,
            instance_id,
            p.client_id,
            p.client_host,
            p.rebalance_timeout_ms,
            p.session_timeout_ms,
            p.protocol_type,
            p.protocols,
        )
        member.is_new = True
        if group.is_(Preparing) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # a new member cannot heartbeat until its join completes; time the join out instead
        m.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        m.maybe_prepare_rebalance(
            group,
            f"adding new member {member_id} with group instance id {instance_id}; "
            f"client reason: {p.reason}",
        )

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        p: JoinParams,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        group.update_member(
            member, p.protocols, p.rebalance_timeout_ms, p.session_timeout_ms, callback
        )
        self.machine.maybe_prepare_rebalance(group, reason)

    def _update_static_member(
        self,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        instance_id: str,
        p: JoinParams,
        callback: JoinCallback,
    ) -> None:
        m = self.machine
        reason = p.why
        current_leader = group.leader_id
        m.cancel_heartbeat(group, old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        m.schedule_heartbeat(group, member)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member, p.protocols, p.rebalance_timeout_ms, p.session_timeout_ms, callback
        )
        if group.is_(Stable):
            if group.select_protocol() != group.protocol_name:
                m.maybe_prepare_rebalance(
                    group,
                    f"static member {new_id} with instance id {instance_id} changes "
                    f"the group's protocol; client reason: {reason}",
                )
                return
            assignment = {x.member_id: x.assignment for x in group.members.values()}
            error = m.store_group(group, assignment)
            if error != ErrorCode.NONE:
                log.warning(
                    "failed to persist group %s after static member %s rejoined: %s",
                    group.group_id,
                    instance_id,
                    error.name,
                )
                group.update_member(member, old[0], old[1], old[2], None)
                m.cancel_heartbeat(group, new_id)
                back = group.replace_static_member(instance_id, new_id, old_id)
                m.schedule_heartbeat(group, back)
                callback(
                    JoinResult(
                        error,
                        "",
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader or "",
                    )
                )
                return
            if p.support_skip:
                is_leader = group.is_leader(new_id)
                result = group.join_result(member, is_leader, skip=is_leader)
            else:
                # before v9: answer with the old leader id so nobody runs a useless assignment
                result = group.join_result(member, False, leader_id=current_leader)
            group.maybe_invoke_join(member, result)
        elif group.is_(Completing):
            # the leader may have been given the old member id: assign again
            m.prepare_rebalance(
                group,
                f"updating metadata for static member {new_id} with instance id "
                f"{instance_id}; client reason: {reason}",
            )
