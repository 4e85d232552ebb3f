"""JoinGroup and the rebalance it drives, as Kafka's GroupCoordinator (a mixin of
`state.GroupStateMachine`, which supplies groups, timers, persistence and member validation).

KIP-394: from JoinGroup v4 a dynamic member's first join gets MEMBER_ID_REQUIRED and a member id,
and is "pending" until it joins with it or its session times out. KIP-345: a static member that
joins with an unknown member id and a known group.instance.id replaces the old member id, which is
fenced, without a rebalance when the group is Stable and its protocol unchanged. KIP-814: from v9
such a rejoining static leader gets skip_assignment. `group.initial.rebalance.delay.ms` delays the
first rebalance of an Empty group, extended by each newcomer up to the rebalance timeout; members
that do not rejoin within the rebalance timeout are removed (static ones are kept).
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
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.coordinator.group.state")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


@dataclass(slots=True)
class JoinParams:
    """What a JoinGroup request says about the joining member, passed through the join steps."""

    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    callback: JoinCallback
    reason: str
    require_known: bool
    support_skip: bool


class JoinGroupMixin:
    """JoinGroup, the delayed join (rebalance timeout, initial delay) and its completion."""

    def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        callback: JoinCallback,
        reason: str | None = None,
    ) -> None:
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            callback(JoinResult.failed(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        unknown = member_id == ""
        group = self.get_or_create(group_id) if unknown else self.get(group_id)
        if group is None:
            callback(JoinResult.failed(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        why = reason or "not provided"
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinResult.failed("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        else:
            params = JoinParams(
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                callback,
                why,
                require_known_member_id,
                support_skip_assignment,
            )
            if unknown:
                self._new_member_join(group, params)
            else:
                self._current_member_join(group, member_id, params)
        if group.is_(Preparing):
            self._check_join(group)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if group.state in (Empty, Dead):
            return True
        if group.is_(Preparing):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < limit
        return group.has(member_id) or group.size < limit

    def _new_member_join(self, group: ClassicGroup, p: JoinParams) -> None:
        callback, instance_id = p.callback, p.instance_id
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
                self._update_static_member(group, old_id, new_id, instance_id, p)
                return
        elif p.require_known:
            log.debug(
                "dynamic member joins group %s in state %s: member id %s required",
                group.group_id,
                group.state.value,
                new_id,
            )
            group.pending_members.add(new_id)
            self._schedule_pending_expiry(group, new_id, p.session_timeout_ms)
            callback(JoinResult.failed(new_id, ErrorCode.MEMBER_ID_REQUIRED))
            return
        self._add_member_and_rebalance(group, new_id, p)

    def _current_member_join(self, group: ClassicGroup, member_id: str, p: JoinParams) -> None:
        callback, instance_id, protocols, reason = p.callback, p.instance_id, p.protocols, p.reason
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
            self._add_member_and_rebalance(group, member_id, p)  # p.instance_id is None here
            return
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            callback(JoinResult.failed(member_id, error))
            return
        member = group.members[member_id]
        if group.is_(Preparing):
            self._update_member_and_rebalance(
                group,
                member,
                p,
                f"member {member_id} joining group during {group.state.value}; "
                f"client reason: {reason}",
            )
        elif group.is_(Completing):
            if member.matches(protocols):
                # a repeated join (its response was lost): answer with the current generation
                callback(self._join_result(group, member, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(
                    group,
                    member,
                    p,
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
                    f"{'leader' if group.is_leader(member_id) else 'member'} "
                    f"{member_id} re-joining group during Stable; client reason: {reason}",
                )
            else:
                callback(self._join_result(group, member, False))
        else:
            log.warning(
                "rejoining member %s of group %s in unexpected state %s",
                member_id,
                group.group_id,
                group.state.value,
            )
            callback(JoinResult.failed(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(
        self,
        group: ClassicGroup,
        member: Member,
        with_members: bool,
        leader_id: str | None = None,
        skip: bool = False,
    ) -> JoinResult:
        return JoinResult(
            error=ErrorCode.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(group.leader_id if leader_id is None else leader_id) or "",
            skip_assignment=skip,
            members=group.current_member_metadata() if with_members else [],
        )

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, p: JoinParams) -> None:
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
        group.add(member, p.callback)
        # a new member cannot heartbeat until its join completes; time the join out instead
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group,
            f"adding new member {member_id} with group instance id {instance_id}; "
            f"client reason: {p.reason}",
        )

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, p: JoinParams, reason: str
    ) -> None:
        group.update_member(
            member, p.protocols, p.rebalance_timeout_ms, p.session_timeout_ms, p.callback
        )
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member(
        self, group: ClassicGroup, old_id: str, new_id: str, instance_id: str, p: JoinParams
    ) -> None:
        callback, reason = p.callback, p.reason
        current_leader = group.leader_id
        self._cancel_heartbeat(group, old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member, p.protocols, p.rebalance_timeout_ms, p.session_timeout_ms, callback
        )
        if group.is_(Stable):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(
                    group,
                    f"static member {new_id} with instance id {instance_id} changes "
                    f"the group's protocol; client reason: {reason}",
                )
                return
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            error = self.store_group(group, assignment)
            if error != ErrorCode.NONE:
                log.warning(
                    "failed to persist group %s after static member %s rejoined: %s",
                    group.group_id,
                    instance_id,
                    error.name,
                )
                group.update_member(member, old[0], old[1], old[2], None)
                self._cancel_heartbeat(group, new_id)
                back = group.replace_static_member(instance_id, new_id, old_id)
                self._schedule_heartbeat(group, back)
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
                result = self._join_result(group, member, is_leader, skip=is_leader)
            else:
                # before v9: answer with the old leader id so nobody runs a useless assignment
                result = self._join_result(group, member, False, leader_id=current_leader)
            group.maybe_invoke_join(member, result)
        elif group.is_(Completing):
            # the leader may have been given the old member id: assign again
            self._prepare_rebalance(
                group,
                f"updating metadata for static member {new_id} with instance id "
                f"{instance_id}; client reason: {reason}",
            )

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(Completing):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._clear_sync_expiration(group)
        was_empty = group.is_(Empty)
        group.transition_to(Preparing, self.now())
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

    def _check_join(self, group: ClassicGroup) -> None:
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
                self._cancel_heartbeat(group, member.member_id)
        if group.is_(Dead):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error(
                "group %s could not complete its rebalance: no member rejoined", group.group_id
            )
            self._watch_join(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation(self.now())
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
            result = self._join_result(group, member, group.is_leader(member.member_id))
            group.maybe_invoke_join(member, result)
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)
