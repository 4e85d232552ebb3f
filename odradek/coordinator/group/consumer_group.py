"""KIP-848 consumer groups (`group.protocol=consumer`), as Kafka's GroupMetadataManager,
ConsumerGroup and CurrentAssignmentBuilder model them.

A group has a group epoch (bumped whenever a member joins, leaves, changes its subscription, or
the subscribed topics' metadata changes), a target assignment computed by a server-side assignor
(`uniform` or `range`) at the assignment epoch, and members each with their own member epoch
reconciling towards the target one heartbeat at a time:

- STABLE: the member has its target (member epoch == assignment epoch);
- UNREVOKED_PARTITIONS: it must give up partitions first; it stays at its epoch until a
  heartbeat's owned partitions no longer list them (or its rebalance timeout fences it);
- UNRELEASED_PARTITIONS: it is at the new epoch but some of its target partitions are still held
  (assigned or pending revocation) by another member; they are handed over once released.

A partition is thus never assigned to a member while another still owns it. Static members
(instance id) leave with epoch -2 and keep their assignment for their session; a new member with
the same instance id takes it over. A regex subscription is matched (fully, as RE2J's matches)
against the topic names at every heartbeat, so a new topic it matches bumps the group epoch.

Sans-IO like the classic machine: time and timers come from a `Scheduler`, topics from a
callable returning {name: (topic id, partition count)}, and records go through `append`.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from odradek.coordinator.group import assignors
from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group.assignors import Assignment, MemberSpec
from odradek.coordinator.group.modern import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    Appender,
    HeartbeatError,
    ModernGroupConfig,
    ModernGroupManager,
    ModernHeartbeatRequest,
    Record,
    TopicsView,
    commit_member,
    fenced_epoch,
    update_member,
)
from odradek.coordinator.group.timers import Scheduler
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class MemberState(Enum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class GroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True, frozen=True)
class ConsumerGroupConfig(ModernGroupConfig):
    assignors: tuple[str, ...] = (assignors.UNIFORM, assignors.RANGE)
    max_size: int = 2147483647
    migration_policy: str = "bidirectional"  # disabled, upgrade, downgrade, bidirectional

    @property
    def upgrade_allowed(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_allowed(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: crec.ClassicMemberMetadata | None = None  # a classic-protocol member (migration)

    def subscription(self) -> tuple[tuple[str, ...], str | None, str | None]:
        return (
            tuple(sorted(self.subscribed_topic_names)),
            self.subscribed_topic_regex,
            self.server_assignor,
        )


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)  # assigned or revoking
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    assignor: str = assignors.UNIFORM

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return GroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        owner = self.owners.get((topic_id, partition))
        member = self.members.get(owner) if owner is not None else None
        return -1 if member is None else member.member_epoch


@dataclass(slots=True)
class HeartbeatRequest(ModernHeartbeatRequest):
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[uuid.UUID, list[int]]] | None = None
    client_id: str = ""
    client_host: str = ""
    classic: crec.ClassicMemberMetadata | None = None  # a classic member's JoinGroup


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None

    @classmethod
    def failed(cls, error: ErrorCode, message: str | None = None) -> HeartbeatResult:
        return cls(error, message, None, 0, 0, None)  # Kafka's error answer: epoch 0


def _copy(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items() if p}


def _owned_map(owned: list[tuple[uuid.UUID, list[int]]] | None) -> Assignment | None:
    if owned is None:
        return None
    out: Assignment = {}
    for tid, parts in owned:
        out.setdefault(tid, set()).update(parts)
    return out


class ConsumerGroupManager(ModernGroupManager[ConsumerGroup, crec.ConsumerKey]):
    """Consumer groups of one coordinator (all its offsets partitions); a group's own
    consumer.session.timeout.ms and consumer.heartbeat.interval.ms override the broker's."""

    kind = "consumer"
    timer = "cg"
    metadata_kind = crec.GROUP_METADATA

    def __init__(
        self,
        config: ConsumerGroupConfig,
        scheduler: Scheduler,
        topics: TopicsView,
        append: Appender | None = None,
    ) -> None:
        super().__init__(
            config,
            scheduler,
            topics,
            append,
            lambda group_id: ConsumerGroup(group_id, assignor=config.assignors[0]),
        )
        self.config = config
        self._regex_cache: dict[str, re.Pattern[str]] = {}
        # asked before a member is fenced (left, session, rebalance, join or sync timeout): True
        # when it converted the group instead (KIP-848 online downgrade, set by the coordinator)
        self.on_fence: Callable[[ConsumerGroup, str], bool] | None = None

    # -- queries ---------------------------------------------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def drop(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self._cancel_timers(group_id, member_id)

    # -- the heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, classic_busy: bool = False) -> HeartbeatResult:
        """ConsumerGroupHeartbeat; `classic_busy`: a classic group with members has this id."""
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, classic_busy)
        except HeartbeatError as exc:
            return HeartbeatResult.failed(exc.error, exc.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        bad = ErrorCode.INVALID_REQUEST
        if not req.group_id or not req.group_id.strip():  # Kafka: InvalidRequestException
            raise HeartbeatError(bad, "GroupId can't be empty.")
        if req.instance_id is not None and req.instance_id == "":
            raise HeartbeatError(bad, "InstanceId can't be empty.")
        if req.rack_id is not None and req.rack_id == "":
            raise HeartbeatError(bad, "RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise HeartbeatError(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise HeartbeatError(bad, "TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and req.subscribed_topic_regex is None:
                raise HeartbeatError(
                    bad,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif req.member_epoch > 0 or req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            if not req.member_id:
                raise HeartbeatError(bad, "MemberId can't be empty.")
            if req.member_epoch == LEAVE_STATIC_EPOCH and req.instance_id is None:
                raise HeartbeatError(bad, "InstanceId can't be null.")
        else:
            raise HeartbeatError(bad, f"MemberEpoch is invalid: {req.member_epoch}.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.assignors)}.",
            )
        if req.subscribed_topic_regex is not None:
            self._regex(req.subscribed_topic_regex)

    def _regex(self, pattern: str) -> re.Pattern[str]:
        compiled = self._regex_cache.get(pattern)
        if compiled is None:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}.",
                ) from None
            if len(self._regex_cache) > 1024:
                self._regex_cache.clear()
            self._regex_cache[pattern] = compiled
        return compiled

    def _heartbeat(self, req: HeartbeatRequest, classic_busy: bool) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found."
                )
            if classic_busy:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
                )
            group = ConsumerGroup(req.group_id, assignor=self.config.assignors[0])
            self.groups[req.group_id] = group
        member, predecessor = self._get_or_create_member(group, req)
        known = member.member_id in group.members or predecessor is not None
        old_subscription = member.subscription() if known else None
        old_assigned = _copy(member.assigned)
        old_epoch = member.member_epoch

        # 1. the member's fields; a new or changed subscription bumps the group epoch
        updated = _clone(member)
        update_member(updated, req)
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = list(req.subscribed_topic_names)
        if req.subscribed_topic_regex is not None:
            updated.subscribed_topic_regex = req.subscribed_topic_regex or None
        updated.client_id = req.client_id
        updated.client_host = req.client_host
        if req.classic is not None:
            updated.classic = req.classic
        bump = old_subscription is None or old_subscription != updated.subscription()

        members_after = dict(group.members)
        if predecessor is not None:
            members_after.pop(predecessor, None)
        members_after[updated.member_id] = updated
        metadata = self._subscription_metadata(members_after.values())
        if metadata != group.subscription_metadata:
            bump = True
        records: list[Record] = []
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(crec.group_metadata(group.group_id, group_epoch))
            records.append(crec.partition_metadata(group.group_id, metadata))

        # 2. the target assignment, when the group epoch moved past it
        target_epoch = group.assignment_epoch
        if group_epoch > group.assignment_epoch:
            target_all = self._compute_target(group, members_after, metadata)
            target_epoch = group_epoch
        else:
            target_all = group.target
            if predecessor is not None and predecessor in target_all:
                target_all = dict(target_all)
                target_all[updated.member_id] = target_all.pop(predecessor)
        target = target_all.get(updated.member_id, {})

        # 3. reconcile the member towards its target
        owned = _owned_map(req.owned)
        updated = _reconcile(updated, target_epoch, target, owned, group)
        # only what changed is written (a plain heartbeat writes nothing)
        if predecessor is not None:
            records[:0] = crec.member_tombstones(group.group_id, predecessor)
        if not known or predecessor is not None or _metadata_of(member) != _metadata_of(updated):
            records.append(crec.member_metadata(group.group_id, updated))
        if (
            not known
            or predecessor is not None
            or _assignment_of(member) != _assignment_of(updated)
        ):
            records.append(crec.current_assignment(group.group_id, updated))
        if bump or group_epoch > group.assignment_epoch:
            records.extend(crec.target_assignment(group.group_id, target_all, target_epoch))
        elif predecessor is not None:
            records.extend(
                crec.target_assignment(group.group_id, {updated.member_id: target}, target_epoch)
            )

        if self.append is not None and records:
            error = self.append(group.group_id, records)
            if error != ErrorCode.NONE:
                raise HeartbeatError(
                    error, f"The group's state could not be written: {error.name}."
                )

        # apply
        if bump:
            group.group_epoch = group_epoch
            group.subscription_metadata = metadata
            self.rebalances += 1
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group_epoch)
        if target_epoch != group.assignment_epoch or target_all is not group.target:
            group.target = target_all
            group.assignment_epoch = target_epoch
            group.assignor = self._group_assignor(members_after.values())
        self._put_member(group, member, updated)
        self._schedule_session(group.group_id, updated.member_id)
        self._schedule_rebalance_timeout(group.group_id, updated)

        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.owned is not None
        )
        changed = old_assigned != _copy(updated.assigned) or old_epoch != updated.member_epoch
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            updated.member_id,
            updated.member_epoch,
            self.heartbeat_interval_ms(group.group_id),
            _copy(updated.assigned) if full or changed else None,
        )

    def _get_or_create_member(
        self, group: ConsumerGroup, req: HeartbeatRequest
    ) -> tuple[ConsumerMember, str | None]:
        """The member, and the id of the static member it replaces (None if none)."""
        return self._member(group, req)

    def _member(
        self, group: ConsumerGroup, req: HeartbeatRequest
    ) -> tuple[ConsumerMember, str | None]:
        member_id = req.member_id or str(uuid.uuid4())
        owned = _owned_map(req.owned)
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if req.member_epoch != 0:
                    raise HeartbeatError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                self._check_size(group)
                return ConsumerMember(member_id), None
            if req.member_epoch == 0:
                return ConsumerMember(member_id), None  # rejoining: from scratch
            _check_epoch(member, req.member_epoch, owned)
            return member, None
        existing_id = group.static_members.get(req.instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if req.member_epoch == 0:
            if existing is None:
                self._check_size(group)
                return ConsumerMember(member_id, instance_id=req.instance_id), None
            # a classic member (or one replacing a classic member) takes over at once (Kafka)
            both_consumer = req.classic is None and existing.classic is None
            if both_consumer and existing.member_epoch != LEAVE_STATIC_EPOCH:
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {existing.member_id} with instance id {req.instance_id} "
                    "is not released yet.",
                )
            # the static member comes back: the new member id takes over its assignment
            replaced = _clone(existing)
            replaced.member_id = member_id
            replaced.member_epoch = 0
            replaced.previous_member_epoch = 0
            replaced.state = MemberState.STABLE
            return replaced, (existing.member_id if existing.member_id != member_id else None)
        if existing is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Instance id {req.instance_id} is unknown in group {group.group_id}.",
            )
        if existing.member_id != member_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by "
                f"member {existing.member_id}.",
            )
        _check_epoch(existing, req.member_epoch, owned)
        return existing, None

    def _check_size(self, group: ConsumerGroup) -> None:
        if len(group.members) >= self.config.max_size:
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} "
                "members.",
            )

    def _subscribed_names(
        self, member: ConsumerMember, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> set[str]:
        names = {t for t in member.subscribed_topic_names if t in topics}
        if member.subscribed_topic_regex:
            try:
                pattern = self._regex(member.subscribed_topic_regex)
            except HeartbeatError:
                return names
            names.update(t for t in topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t))
        return names

    def _subscription_metadata(
        self, members: Iterable[ConsumerMember]
    ) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.topics()
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for m in members:
            for name in self._subscribed_names(m, topics):
                out[name] = topics[name]
        return out

    def _group_assignor(self, members: Iterable[ConsumerMember]) -> str:
        """The most used client-chosen assignor, else the first configured (Kafka's)."""
        counts: dict[str, int] = {}
        for m in members:
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        return max(sorted(counts), key=lambda a: counts[a])

    def _compute_target(
        self,
        group: ConsumerGroup,
        members: Mapping[str, ConsumerMember],
        metadata: Mapping[str, tuple[uuid.UUID, int]],
    ) -> dict[str, Assignment]:
        topics = self.topics()
        partitions = {tid: count for tid, count in metadata.values()}
        specs = {}
        for member_id, m in members.items():
            subscribed = {
                metadata[n][0] for n in self._subscribed_names(m, topics) if n in metadata
            }
            current = group.target.get(member_id)
            if current is None and m.instance_id is not None:
                # a replaced static member keeps its predecessor's target
                previous = group.static_members.get(m.instance_id)
                current = group.target.get(previous) if previous is not None else None
            specs[member_id] = MemberSpec(subscribed, _copy(current or {}))
        return assignors.assign(self._group_assignor(members.values()), specs, partitions)

    def _put_member(self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> None:
        """Replace `old` (possibly a static predecessor under another id) by `new`."""
        for key in (old.member_id, new.member_id):
            prev = group.members.pop(key, None)
            if prev is not None:
                self._release(group, prev)
                if prev.member_id != new.member_id:
                    self._cancel_timers(group.group_id, prev.member_id)
        if new.instance_id is not None:
            previous = group.static_members.get(new.instance_id)
            if previous is not None and previous != new.member_id:
                stale = group.members.pop(previous, None)
                if stale is not None:
                    self._release(group, stale)
                self._cancel_timers(group.group_id, previous)
                group.target.pop(previous, None)
            group.static_members[new.instance_id] = new.member_id
        group.members[new.member_id] = new
        for tid, parts in list(new.assigned.items()) + list(new.pending_revocation.items()):
            for p in parts:
                group.owners[(tid, p)] = new.member_id

    def _release(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        for tid, parts in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in parts:
                if group.owners.get((tid, p)) == member.member_id:
                    del group.owners[(tid, p)]

    # -- leaving and fencing ---------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found."
            )
        if req.instance_id is not None:
            member_id = group.static_members.get(req.instance_id)
            if member_id is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Instance id {req.instance_id} is unknown in group {req.group_id}.",
                )
            if member_id != req.member_id:
                raise HeartbeatError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {member_id}.",
                )
        member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            # a temporary departure: the assignment stays for the session timeout
            updated = _clone(member)
            updated.member_epoch = LEAVE_STATIC_EPOCH
            updated.previous_member_epoch = member.member_epoch
            self._write(group.group_id, [crec.current_assignment(group.group_id, updated)])
            group.members[member.member_id] = updated  # still holding its partitions
            self._revoking.pop((group.group_id, member.member_id), None)
            self.scheduler.cancel(("cg-rebalance", group.group_id, member.member_id))
            log.info(
                "[GroupId %s] Static member %s with instance id %s left the group temporarily.",
                group.group_id,
                member.member_id,
                member.instance_id,
            )
            return HeartbeatResult(ErrorCode.NONE, None, req.member_id, LEAVE_STATIC_EPOCH, 0)
        log.info("[GroupId %s] Member %s left the group.", group.group_id, member.member_id)
        self.remove_member(group, member.member_id)
        return HeartbeatResult(ErrorCode.NONE, None, req.member_id, LEAVE_EPOCH, 0)

    def remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove (leave, session expiry, fencing): the group epoch is bumped."""
        member = group.members.get(member_id)
        if member is None:
            return
        if self.on_fence is not None and self.on_fence(group, member_id):
            return  # the group is classic now, without this member
        records = crec.member_tombstones(group.group_id, member_id)
        records.append(crec.group_metadata(group.group_id, group.group_epoch + 1))
        self._write(group.group_id, records)
        del group.members[member_id]
        self._release(group, member)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member_id
        ):
            del group.static_members[member.instance_id]
        group.target.pop(member_id, None)
        self._cancel_timers(group.group_id, member_id)
        group.group_epoch += 1
        group.subscription_metadata = self._subscription_metadata(group.members.values())
        self.rebalances += 1

    # -- timers ----------------------------------------------------------------------------------

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        super()._cancel_timers(group_id, member_id)
        self.scheduler.cancel(("cg-join", group_id, member_id))  # a classic member's
        self.scheduler.cancel(("cg-sync", group_id, member_id))

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        def expire() -> None:
            self._expire_session(group_id, member_id)

        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        timeout = self.session_timeout_ms(group_id)
        if member is not None and member.classic is not None:
            timeout = member.classic.session_timeout_ms  # a classic member's own session
        self.scheduler.schedule(("cg-session", group_id, member_id), timeout, expire)

    def touch(self, group_id: str, member_id: str) -> None:
        """A classic member's Heartbeat or SyncGroup: its session starts again."""
        self._schedule_session(group_id, member_id)

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerMember) -> None:
        """Armed once when a member starts revoking at an epoch (Kafka's rebalance timeout):
        heartbeats that still own the partitions do not push it back."""
        key = ("cg-rebalance", group_id, member.member_id)
        armed = (group_id, member.member_id)
        # a classic member has its join and sync timeouts instead (migration.py), as in Kafka
        if member.state != MemberState.UNREVOKED_PARTITIONS or member.classic is not None:
            if self._revoking.pop(armed, None) is not None:
                self.scheduler.cancel(key)
            return
        epoch = member.member_epoch
        if self._revoking.get(armed) == epoch:
            return
        self._revoking[armed] = epoch

        def expire() -> None:
            self._revoking.pop(armed, None)
            group = self.groups.get(group_id)
            current = group.members.get(member.member_id) if group is not None else None
            if (
                group is not None
                and current is not None
                and current.state == MemberState.UNREVOKED_PARTITIONS
                and current.member_epoch == epoch
            ):
                log.info(
                    "[GroupId %s] Member %s fenced from the group because it failed to revoke "
                    "partitions within its rebalance timeout of %d ms.",
                    group_id,
                    member.member_id,
                    member.rebalance_timeout_ms,
                )
                self.remove_member(group, member.member_id)

        self.scheduler.schedule(key, member.rebalance_timeout_ms, expire)

    # -- loading (replay of __consumer_offsets) ----------------------------------------------------

    def _apply_record(
        self, group: ConsumerGroup, key: crec.ConsumerKey, value: bytes | None
    ) -> None:
        decoded = None if value is None else crec.decode_value(key.kind, value)
        if key.kind == crec.GROUP_METADATA:
            assert isinstance(decoded, int)
            group.group_epoch = decoded
        elif key.kind == crec.PARTITION_METADATA:
            group.subscription_metadata = decoded if isinstance(decoded, dict) else {}
        elif key.kind == crec.TARGET_METADATA:
            group.assignment_epoch = decoded if isinstance(decoded, int) else 0
        elif key.kind == crec.TARGET_MEMBER:
            assert key.member_id is not None
            if isinstance(decoded, dict):
                group.target[key.member_id] = decoded
            else:
                group.target.pop(key.member_id, None)
        elif key.kind == crec.MEMBER_METADATA:
            assert key.member_id is not None
            if not isinstance(decoded, crec.MemberMetadataValue):
                group.members.pop(key.member_id, None)
                return
            m = group.members.setdefault(key.member_id, ConsumerMember(key.member_id))
            m.instance_id = decoded.instance_id
            m.rack_id = decoded.rack_id
            m.client_id = decoded.client_id
            m.client_host = decoded.client_host
            m.subscribed_topic_names = decoded.subscribed_topic_names
            m.subscribed_topic_regex = decoded.subscribed_topic_regex
            m.rebalance_timeout_ms = decoded.rebalance_timeout_ms
            m.server_assignor = decoded.server_assignor
            m.classic = decoded.classic
        elif key.kind == crec.CURRENT_ASSIGNMENT:
            assert key.member_id is not None
            if not isinstance(decoded, crec.CurrentAssignmentValue):
                return  # the member metadata tombstone removes the member
            m = group.members.setdefault(key.member_id, ConsumerMember(key.member_id))
            m.member_epoch = decoded.member_epoch
            m.previous_member_epoch = decoded.previous_member_epoch
            try:
                m.state = MemberState(decoded.state)
            except ValueError:
                m.state = MemberState.UNKNOWN
            m.assigned = decoded.assigned
            m.pending_revocation = decoded.pending_revocation

    def on_loaded(self, group_ids: set[str]) -> None:
        """After a partition's replay: rebuild the derived state of its groups and give every
        member a fresh session (one that does not heartbeat to this coordinator is fenced)."""
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                continue
            group.static_members.clear()
            group.owners.clear()
            for m in group.members.values():
                if m.instance_id is not None:
                    group.static_members[m.instance_id] = m.member_id
                for tid, parts in list(m.assigned.items()) + list(m.pending_revocation.items()):
                    for p in parts:
                        group.owners[(tid, p)] = m.member_id
                self._schedule_session(group_id, m.member_id)
                self._schedule_rebalance_timeout(group_id, m)
            group.assignor = self._group_assignor(group.members.values())
            log.info(
                "[GroupId %s] loaded consumer group: epoch %d, assignment epoch %d, %d members",
                group_id,
                group.group_epoch,
                group.assignment_epoch,
                len(group.members),
            )

    # -- offsets and administration ---------------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        api_version: int,
        transactional: bool = False,
    ) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit; None when the commit may go ahead.
        TxnOffsetCommit (`transactional`) answers ILLEGAL_GENERATION for another epoch."""
        group = self.groups.get(group_id)
        member = commit_member(None if group is None else group.members, member_id, member_epoch)
        if not isinstance(member, ConsumerMember):
            return member  # None (the admin client, assign()) or UNKNOWN_MEMBER_ID
        if transactional or member.classic is not None:  # a classic member commits by generation
            return ErrorCode.ILLEGAL_GENERATION if member_epoch != member.member_epoch else None
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics the members of a consumer group subscribe to (names and regex matches)."""
        group = self.groups.get(group_id)
        if group is None or not group.members:
            return set()
        return set(self._subscription_metadata(group.members.values()))

    def take_over_from_classic(self, group_id: str) -> None:
        """A classic member joins an empty consumer group (downgrade): the group is classic now."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            self._write(group_id, crec.group_tombstones(group))
            self.drop(group_id)


def _metadata_of(m: ConsumerMember) -> tuple[object, ...]:
    """The fields of a ConsumerGroupMemberMetadata record."""
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        tuple(m.subscribed_topic_names),
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
        _classic_key(m.classic),
    )


def _classic_key(c: crec.ClassicMemberMetadata | None) -> tuple[object, ...] | None:
    return None if c is None else (c.session_timeout_ms, tuple(c.supported_protocols))


def _assignment_of(m: ConsumerMember) -> tuple[object, ...]:
    """The fields of a ConsumerGroupCurrentMemberAssignment record."""
    return (
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        _copy(m.assigned),
        _copy(m.pending_revocation),
    )


def _clone(m: ConsumerMember) -> ConsumerMember:
    return ConsumerMember(
        m.member_id,
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        list(m.subscribed_topic_names),
        m.subscribed_topic_regex,
        m.server_assignor,
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        _copy(m.assigned),
        _copy(m.pending_revocation),
        None
        if m.classic is None
        else crec.ClassicMemberMetadata(
            m.classic.session_timeout_ms, list(m.classic.supported_protocols)
        ),
    )


def _check_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
    if received > member.member_epoch or (
        received < member.member_epoch
        and (received != member.previous_member_epoch or not _is_subset(owned, member.assigned))
    ):
        raise fenced_epoch("consumer", "partitions", received, member.member_epoch)


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(parts <= assigned.get(tid, set()) for tid, parts in owned.items())


def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:
        return True
    return any(parts & revoking.get(tid, set()) for tid, parts in owned.items())


def _reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    group: ConsumerGroup,
) -> ConsumerMember:
    """Kafka's CurrentAssignmentBuilder.build."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, group)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, owned, group)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, group)
    if owned is None or owned:
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin.",
        )
    return _next_assignment(member, target_epoch, target_epoch, target, owned, group)


def _next_assignment(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    group: ConsumerGroup,
) -> ConsumerMember:
    unreleased = False
    new_assigned: Assignment = {}
    revoking: Assignment = {}
    pending_assign: Assignment = {}
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, set())
        current = member.assigned.get(tid, set())
        keep = current & want
        revoke = current - keep
        add = want - keep
        held = {p for p in add if _epoch_of(group, member, tid, p) != -1}
        if held:
            unreleased = True
            add -= held
        if keep:
            new_assigned[tid] = keep
        if revoke:
            revoking[tid] = revoke
        if add:
            pending_assign[tid] = add
    out = _clone(member)
    out.previous_member_epoch = member.member_epoch
    if revoking and _owns_any(owned, revoking):
        out.state = MemberState.UNREVOKED_PARTITIONS
        out.member_epoch = member_epoch
        out.assigned = new_assigned
        out.pending_revocation = revoking
        if member_epoch == member.member_epoch:
            out.previous_member_epoch = member.previous_member_epoch
        return out
    for tid, parts in pending_assign.items():
        new_assigned.setdefault(tid, set()).update(parts)
    out.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    out.member_epoch = target_epoch
    out.assigned = new_assigned
    out.pending_revocation = {}
    if target_epoch == member.member_epoch:
        out.previous_member_epoch = member.previous_member_epoch
    return out


def _epoch_of(group: ConsumerGroup, member: ConsumerMember, tid: uuid.UUID, p: int) -> int:
    """The epoch of the member holding a partition, -1 when free (its own count as free; so do
    those of a static member this one replaces)."""
    owner = group.owners.get((tid, p))
    if owner is None or owner == member.member_id:
        return -1
    holder = group.members.get(owner)
    if holder is None:
        return -1
    if member.instance_id is not None and holder.instance_id == member.instance_id:
        return -1
    return holder.member_epoch
