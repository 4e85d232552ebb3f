"""KIP-1071 streams groups (`group.protocol=streams`), as Kafka's GroupMetadataManager,
StreamsGroup and the streams CurrentAssignmentBuilder model them.

The first member to join brings the application's topology (its subtopologies with their source,
repartition and changelog topics); the broker keeps it with its epoch. The group is *configured*
when every source topic exists and every internal topic (repartition, changelog) exists; until
then the group is NOT_READY, members get no tasks (but do get the group epoch) and every
heartbeat answers a status (MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS with the topics it is
creating, INCORRECTLY_PARTITIONED_TOPICS). The internal topics to create, with the partition
counts the topology asks for (or its subtopology's, for a changelog or an unsized repartition
topic), are handed to the broker (`StreamsHeartbeatResult.create_topics`).

Like a consumer group, a group epoch is bumped by a member joining or leaving or the topics
changing; the sticky task assignor (streams_assignor.py) computes the target at the assignment
epoch, and each member reconciles one heartbeat at a time: it first gives up the active tasks it
must revoke (UNREVOKED_TASKS, at its old epoch), then gets its target minus the active tasks
another member still holds (UNRELEASED_TASKS) at the new epoch. Epochs are fenced as in KIP-848;
a member whose session expires is removed.

Sans-IO: time and timers come from a `Scheduler`, topics from the same view as consumer groups.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from odradek.coordinator.group import modern
from odradek.coordinator.group import streams_records as srec
from odradek.coordinator.group.modern import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    Appender,
    HeartbeatError,
    TopicsView,
    commit_member,
    fenced_epoch,
    update_member,
)
from odradek.coordinator.group.streams_assignor import (
    AssignorMember,
    Tasks,
    assign,
    flatten,
    nest,
)
from odradek.coordinator.group.timers import Scheduler
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

# StreamsGroupHeartbeatResponse Status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4


class StreamsGroupState(Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class StreamsMemberState(Enum):
    STABLE = "Stable"
    UNREVOKED_TASKS = "UnrevokedTasks"
    UNRELEASED_TASKS = "UnreleasedTasks"


@dataclass(slots=True, frozen=True)
class StreamsGroupConfig(modern.ModernGroupConfig):
    num_standby_replicas: int = 0
    max_size: int = 2147483647


@dataclass(slots=True, frozen=True)
class TopicInfo:
    """An internal topic of the topology: partitions 0 = not fixed, replication 0 = default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True, frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(slots=True, frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    process_id: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    topology_epoch: int = 0
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: StreamsMemberState = StreamsMemberState.STABLE
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    revoking: Tasks = field(default_factory=dict)


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, tuple[Tasks, Tasks]] = field(default_factory=dict)  # (active, standby)
    # task counts per subtopology when the group is configured; None while it is not
    partitions: dict[str, int] | None = None
    status: list[tuple[int, str]] = field(default_factory=list)
    topics_seen: dict[str, int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    assigned_standbys: int | None = None  # the standby count of the target (None: not known)

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.partitions is None:
            return StreamsGroupState.NOT_READY
        if self.group_epoch != self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(
            m.member_epoch != self.assignment_epoch or m.state != StreamsMemberState.STABLE
            for m in self.members.values()
        ):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE


@dataclass(slots=True)
class StreamsHeartbeatRequest(modern.ModernHeartbeatRequest):
    topology: Topology | None = None
    active: Tasks | None = None
    standby: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class StreamsHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    status: list[tuple[int, str]] | None = None
    # (active, standby) when the member's tasks changed or it (re)joined; None: unchanged
    tasks: tuple[Tasks, Tasks] | None = None
    create_topics: list[TopicInfo] = field(default_factory=list)

    @classmethod
    def failed(cls, error: ErrorCode, message: str | None = None) -> StreamsHeartbeatResult:
        return cls(error, message)


class StreamsGroupManager(modern.ModernGroupManager[StreamsGroup, "srec.StreamsKey"]):
    """Streams groups of one coordinator (all its offsets partitions); a group's own
    streams.session.timeout.ms, streams.heartbeat.interval.ms and streams.num.standby.replicas
    override the broker's."""

    kind = "streams"
    label = "streams group"
    timer = "sg"

    def __init__(
        self,
        config: StreamsGroupConfig,
        scheduler: Scheduler,
        topics: TopicsView,
        append: Appender | None = None,
    ) -> None:
        super().__init__(config, scheduler, topics, append, StreamsGroup)
        self.config = config
        self.metadata_kind = srec.GROUP_METADATA  # set here: streams_records imports this module

    def num_standby_replicas(self, group_id: str) -> int:
        return self._group_config(
            group_id, "num.standby.replicas", self.config.num_standby_replicas
        )

    def get(self, group_id: str) -> StreamsGroup | None:
        return self.groups.get(group_id)

    def is_streams_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def delete(self, group_id: str) -> None:
        """DeleteGroups of an empty streams group: tombstones, then forgotten."""
        group = self.groups.get(group_id)
        if group is not None:
            records = [r for m in group.members for r in srec.member_tombstones(group_id, m)]
            self._write(group_id, records + srec.group_tombstones(group_id))
        self.drop(group_id)

    def drop(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self._cancel_timers(group_id, member_id)

    # -- the heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        try:
            _validate(req)
            if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except HeartbeatError as exc:
            return StreamsHeartbeatResult.failed(exc.error, exc.message)

    def _heartbeat(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found."
                )
            group = self.groups[req.group_id] = StreamsGroup(req.group_id)
        member, joining, replaced = self._member(group, req)
        epoch_before, topology_before = group.group_epoch, group.topology
        target_epoch_before = group.assignment_epoch
        meta_before = None if joining or replaced else _metadata_of(member)
        current_before = None if joining or replaced else _current_of(member)
        if replaced is not None:
            self._replace(group, replaced, member)

        # 1. the topology: the first one is kept; a member with another epoch is told
        status: list[tuple[int, str]] = []
        bump = joining
        if req.topology is not None:
            if group.topology is None or (
                not group.members and req.topology.epoch != group.topology.epoch
            ):
                group.topology = req.topology
                bump = True
            elif req.topology.epoch != group.topology.epoch:
                status.append(
                    (
                        STALE_TOPOLOGY,
                        f"The member's topology epoch {req.topology.epoch} differs from the "
                        f"group's topology epoch {group.topology.epoch}.",
                    )
                )
            member.topology_epoch = req.topology.epoch
        if req.process_id is not None:
            bump |= member.process_id != req.process_id
            member.process_id = req.process_id
        update_member(member, req)
        if req.user_endpoint is not None:
            member.user_endpoint = req.user_endpoint
        if req.client_tags is not None:
            member.client_tags = dict(req.client_tags)
        member.client_id = req.client_id
        member.client_host = req.client_host
        if joining:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            log.info("[GroupId %s] Member %s joined the streams group.", group.group_id,
                     member.member_id)  # fmt: skip

        # 2. the topics: a change (created, deleted, repartitioned) bumps the group epoch
        create = self._configure(group)
        status.extend(group.status)
        standbys = self.num_standby_replicas(group.group_id)
        if group.assigned_standbys not in (None, standbys):
            bump = True  # Kafka's LastAssignmentConfig: a changed standby count reassigns
        if bump:
            group.group_epoch += 1
            self.rebalances += 1

        # 3. the target assignment, when the group epoch moved past it
        if group.assignment_epoch != group.group_epoch:
            self._compute_target(group)

        # 4. the member's reconciliation towards its target
        before = (member.member_epoch, _copy(member.active), _copy(member.standby))
        if req.active is not None and member.revoking:
            still = flatten(req.active) & flatten(member.revoking)
            if not still:
                member.revoking = {}
        self._reconcile(group, member)
        self._arm_revocation(group.group_id, member)
        changed = before != (member.member_epoch, member.active, member.standby)
        self._persist(
            group, member, epoch_before, topology_before, target_epoch_before, meta_before,
            current_before,
        )  # fmt: skip
        self._arm_session(group.group_id, member.member_id)
        if req.shutdown_application:
            group.status.append((SHUTDOWN_APPLICATION, f"Member {member.member_id} asked the "
                                 "application to shut down."))  # fmt: skip
            status.append(group.status[-1])
        return StreamsHeartbeatResult(
            ErrorCode.NONE,
            None,
            member.member_id,
            member.member_epoch,
            self.heartbeat_interval_ms(group.group_id),
            status,
            (_copy(member.active), _copy(member.standby))
            if changed or joining or req.member_epoch == 0
            else None,
            create,
        )

    def _member(
        self, group: StreamsGroup, req: StreamsHeartbeatRequest
    ) -> tuple[StreamsMember, bool, str | None]:
        """Kafka's getOrMaybeCreate{Dynamic,Static}StreamsGroupMember: the member, whether it
        joins, and the id of the static member (left with epoch -2) it replaces."""
        existing: StreamsMember | None
        if req.instance_id is None:
            existing = group.members.get(req.member_id)
        else:
            owner = group.static_members.get(req.instance_id)
            existing = None if owner is None else group.members.get(owner)
        if req.member_epoch == 0:
            if existing is None:
                self._check_size(group)
                return StreamsMember(req.member_id, instance_id=req.instance_id), True, None
            if existing.member_id == req.member_id:
                return existing, False, None  # the same member joining again
            if existing.member_epoch != LEAVE_STATIC_EPOCH:
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} cannot "
                    f"join the group because the instance id is owned by {existing.member_id} "
                    "member.",
                )
            # the static member comes back under a new member id: it takes over its tasks
            member = replace(
                existing,
                member_id=req.member_id,
                member_epoch=0,
                previous_member_epoch=0,
                state=StreamsMemberState.STABLE,
                client_tags=dict(existing.client_tags),
                active=_copy(existing.active),
                standby=_copy(existing.standby),
                revoking=_copy(existing.revoking),
            )
            return member, False, existing.member_id
        if existing is None:
            if req.instance_id is not None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {group.group_id}.",
            )
        if existing.member_id != req.member_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced "
                f"by member {existing.member_id}.",
            )
        _check_epoch(existing, req.member_epoch, req.active)
        return existing, False, None

    def _check_size(self, group: StreamsGroup) -> None:
        if len(group.members) >= self.config.max_size:
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The streams group has reached its maximum capacity of "
                f"{self.config.max_size} members.",
            )

    def _replace(self, group: StreamsGroup, old_id: str, new: StreamsMember) -> None:
        """Kafka's replaceStreamsMember: the old member's records go, the new member gets its
        target; the group epoch stays."""
        gid = group.group_id
        group.members.pop(old_id, None)
        self._cancel_timers(gid, old_id)
        group.members[new.member_id] = new
        if new.instance_id is not None:
            group.static_members[new.instance_id] = new.member_id
        records = srec.member_tombstones(gid, old_id)
        target = group.target.pop(old_id, None)
        if target is not None:
            group.target[new.member_id] = target
            records.append(srec.target_member(gid, new.member_id, *target))
        self._write(gid, records)
        log.info("[GroupId %s][MemberId %s] Static member with instance id %s re-joins the "
                 "streams group using the streams protocol. Created a new member %s to replace "
                 "the existing member %s.", gid, new.member_id, new.instance_id, new.member_id,
                 old_id)  # fmt: skip

    def _persist(
        self,
        group: StreamsGroup,
        member: StreamsMember,
        epoch_before: int,
        topology_before: Topology | None,
        target_epoch_before: int,
        meta_before: tuple[object, ...] | None,
        current_before: tuple[object, ...] | None,
    ) -> None:
        """The records of what a heartbeat changed, in Kafka's order."""
        gid = group.group_id
        records = []
        if group.topology is not None and group.topology is not topology_before:
            records.append(srec.topology(gid, group.topology))
        if _metadata_of(member) != meta_before:
            records.append(srec.member_metadata(gid, member))
        if group.group_epoch != epoch_before:
            records.append(srec.group_metadata(gid, group.group_epoch))
        if group.assignment_epoch != target_epoch_before:
            for mid, (active, standby) in sorted(group.target.items()):
                records.append(srec.target_member(gid, mid, active, standby))
            records.append(srec.target_metadata(gid, group.assignment_epoch))
        if _current_of(member) != current_before:
            records.append(srec.current_assignment(gid, member))
        self._write(gid, records)

    def _configure(self, group: StreamsGroup) -> list[TopicInfo]:
        """Check the topology's topics against the cluster's: sets `partitions` (None while
        not configured) and `status`; returns the internal topics to create."""
        topology = group.topology
        group.status = []
        if topology is None:
            group.partitions = None
            return []
        existing = self.topics()
        seen = {
            name: existing[name][1]
            for sub in topology.subtopologies
            for name in (
                *sub.source_topics,
                *(t.name for t in sub.repartition_source_topics),
                *(t.name for t in sub.state_changelog_topics),
            )
            if name in existing
        }
        missing_sources = sorted(
            {t for sub in topology.subtopologies for t in sub.source_topics if t not in existing}
        )
        if missing_sources:
            group.status.append(
                (MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing_sources)} are missing.")
            )
            return self._settle(group, None, seen)
        repartition = _repartition_counts(topology, existing)
        create: list[TopicInfo] = []
        counts: dict[str, int] = {}
        for sub in topology.subtopologies:
            n = max(
                [existing[t][1] for t in sub.source_topics]
                + [repartition.get(t.name, 0) for t in sub.repartition_source_topics]
                + [0]
            )
            counts[sub.subtopology_id] = n
            for t in sub.repartition_source_topics:
                if t.name not in existing:
                    create.append(
                        TopicInfo(
                            t.name, repartition.get(t.name, n), t.replication_factor, t.configs
                        )  # fmt: skip
                    )
            for t in sub.state_changelog_topics:
                if t.name not in existing:
                    create.append(TopicInfo(t.name, n, t.replication_factor, t.configs))
                elif existing[t.name][1] != n:
                    group.status.append(
                        (
                            INCORRECTLY_PARTITIONED_TOPICS,
                            f"Expected {n} partitions for changelog topic {t.name} but found "
                            f"{existing[t.name][1]}.",
                        )
                    )
        if create:
            group.status.append(
                (
                    MISSING_INTERNAL_TOPICS,
                    "Internal topics are missing: " + ", ".join(sorted(t.name for t in create)),
                )
            )
            return self._settle(group, None, seen, create)
        if group.status:
            return self._settle(group, None, seen)
        return self._settle(group, counts, seen)

    def _settle(
        self,
        group: StreamsGroup,
        partitions: dict[str, int] | None,
        seen: dict[str, int],
        create: list[TopicInfo] | None = None,
    ) -> list[TopicInfo]:
        if partitions != group.partitions or seen != group.topics_seen:
            if group.members and (group.partitions is not None or partitions is not None):
                group.group_epoch += 1  # the topics changed: a new target
            group.partitions = partitions
            group.topics_seen = seen
        return create or []

    def _compute_target(self, group: StreamsGroup) -> None:
        planned = assign(
            group.partitions or {},  # a group that is not ready has no tasks
            [
                AssignorMember(
                    m.member_id,
                    m.process_id or m.member_id,
                    _union(m.active, m.revoking),
                    m.standby,
                )  # fmt: skip
                for m in group.members.values()
            ],
            self.num_standby_replicas(group.group_id),
        )
        group.target = {mid: (t.active, t.standby) for mid, t in planned.items()}
        group.assignment_epoch = group.group_epoch
        group.assigned_standbys = self.num_standby_replicas(group.group_id)
        log.info("[GroupId %s] computed a new target assignment for epoch %d: %s",
                 group.group_id, group.group_epoch,
                 {mid: sorted(flatten(a)) for mid, (a, _) in group.target.items()})  # fmt: skip

    def _reconcile(self, group: StreamsGroup, member: StreamsMember) -> None:
        """Kafka's streams CurrentAssignmentBuilder, one step."""
        target_active, target_standby = group.target.get(member.member_id, ({}, {}))
        if member.revoking:  # still giving tasks up: stays at its epoch
            return
        mine = flatten(member.active)
        revoke = mine - flatten(target_active)
        if revoke:
            member.active = nest(mine - revoke)
            member.revoking = nest(revoke)
            member.standby = nest(flatten(member.standby) & flatten(target_standby))
            member.state = StreamsMemberState.UNREVOKED_TASKS
            return
        held = {
            t
            for other in group.members.values()
            if other.member_id != member.member_id
            for t in flatten(other.active) | flatten(other.revoking)
        }
        wanted = flatten(target_active)
        granted = wanted - held
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.active = nest(granted)
        member.standby = nest(flatten(target_standby) - granted)
        member.state = (
            StreamsMemberState.STABLE if granted == wanted else StreamsMemberState.UNRELEASED_TASKS
        )

    def _leave(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        group = self.groups.get(req.group_id)
        member = None if group is None else group.members.get(req.member_id)
        if req.instance_id is not None and group is not None:
            owner = group.static_members.get(req.instance_id)
            if owner is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if owner != req.member_id:
                raise HeartbeatError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {owner}.",
                )
        if group is None or member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            # a temporary departure: the tasks stay with it until its session expires
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_STATIC_EPOCH
            self._write(group.group_id, [srec.current_assignment(group.group_id, member)])
            self._revoking.pop((group.group_id, member.member_id), None)
            self.scheduler.cancel(("sg-rebalance", group.group_id, member.member_id))
            log.info("[GroupId %s] Static member %s with instance id %s temporarily left the "
                     "streams group.", group.group_id, member.member_id,
                     member.instance_id)  # fmt: skip
            return StreamsHeartbeatResult(ErrorCode.NONE, None, req.member_id, LEAVE_STATIC_EPOCH)
        log.info("[GroupId %s] Member %s left the streams group.", group.group_id,
                 member.member_id)  # fmt: skip
        self.remove_member(group, member.member_id)
        return StreamsHeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch)

    def remove_member(self, group: StreamsGroup, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.instance_id is not None and group.static_members.get(member.instance_id) == (
            member_id
        ):
            del group.static_members[member.instance_id]
        group.target.pop(member_id, None)
        self._cancel_timers(group.group_id, member_id)
        group.group_epoch += 1
        records = srec.member_tombstones(group.group_id, member_id)
        records.append(srec.group_metadata(group.group_id, group.group_epoch))
        self._write(group.group_id, records)
        self.rebalances += 1

    def _arm_session(self, group_id: str, member_id: str) -> None:
        self.scheduler.schedule(
            ("sg-session", group_id, member_id),
            self.session_timeout_ms(group_id),
            lambda: self._expire_session(group_id, member_id),
        )

    def _arm_revocation(self, group_id: str, member: StreamsMember) -> None:
        """Kafka's rebalance timeout: a member that has not given up the tasks it must revoke
        within its rebalance timeout (armed once per epoch) is removed from the group."""
        key = ("sg-rebalance", group_id, member.member_id)
        if not member.revoking:
            self._revoking.pop((group_id, member.member_id), None)
            self.scheduler.cancel(key)
            return
        epoch = member.member_epoch
        if self._revoking.get((group_id, member.member_id)) == epoch:
            return
        self._revoking[(group_id, member.member_id)] = epoch

        def expire() -> None:
            self._revoking.pop((group_id, member.member_id), None)
            group = self.groups.get(group_id)
            current = None if group is None else group.members.get(member.member_id)
            if group is not None and current is not None and current.revoking:
                if current.member_epoch == epoch:
                    log.info("[GroupId %s] Member %s fenced from the streams group because it "
                             "failed to revoke tasks within its rebalance timeout of %d ms.",
                             group_id, member.member_id, member.rebalance_timeout_ms)  # fmt: skip
                    self.remove_member(group, member.member_id)

        self.scheduler.schedule(key, member.rebalance_timeout_ms, expire)

    # -- loading (replay of __consumer_offsets) ----------------------------------------------------

    def _apply_record(self, group: StreamsGroup, key: srec.StreamsKey, value: bytes | None) -> None:
        if key.kind == srec.GROUP_METADATA and value is not None:
            group.group_epoch = srec.read_epoch(value)
        elif key.kind == srec.TOPOLOGY:
            group.topology = None if value is None else srec.read_topology(value)
        elif key.kind == srec.TARGET_METADATA:
            group.assignment_epoch = 0 if value is None else srec.read_epoch(value)
        elif key.member_id is None:
            return
        elif key.kind == srec.TARGET_MEMBER:
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = srec.read_target(value)
        elif key.kind == srec.MEMBER_METADATA:
            if value is None:
                group.members.pop(key.member_id, None)
            else:
                group.members[key.member_id] = srec.read_member(
                    key.member_id, value, group.members.get(key.member_id)
                )
        elif key.kind == srec.CURRENT_ASSIGNMENT and value is not None:
            member = group.members.setdefault(key.member_id, StreamsMember(key.member_id))
            srec.read_current(value, member)

    def on_loaded(self, group_ids: set[str]) -> None:
        """After a partition's replay: every member gets a fresh session (one that does not
        heartbeat to this coordinator is removed) and the topics are checked again."""
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                continue
            group.static_members = {
                m.instance_id: mid for mid, m in group.members.items() if m.instance_id is not None
            }
            epoch = group.group_epoch
            self._configure(group)  # the topics as they are now, without a new epoch
            group.group_epoch = epoch
            for mid, member in group.members.items():
                self._arm_session(gid, mid)
                self._arm_revocation(gid, member)
            log.info("[GroupId %s] loaded streams group: epoch %d, assignment epoch %d, "
                     "%d members", gid, group.group_epoch, group.assignment_epoch,
                     len(group.members))  # fmt: skip

    # -- offsets and administration ----------------------------------------------------------------

    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, transactional: bool = False
    ) -> ErrorCode | None:
        """Kafka's StreamsGroup.validateOffsetCommit; None when the commit may go ahead."""
        group = self.groups.get(group_id)
        member = commit_member(None if group is None else group.members, member_id, member_epoch)
        if not isinstance(member, StreamsMember):
            return member
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
        return None


def _validate(req: StreamsHeartbeatRequest) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid (the parts a client can get wrong)."""
    if not req.member_id:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if not req.group_id:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if req.instance_id == "":
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
    if req.member_epoch == LEAVE_STATIC_EPOCH and req.instance_id is None:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
            )
        if req.topology is None:
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST, "Topology must be non-null in first request."
            )
        if req.process_id is None:
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST, "ProcessId must be provided in first request."
            )
    elif req.member_epoch < LEAVE_STATIC_EPOCH:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def _check_epoch(member: StreamsMember, received: int, owned: Tasks | None) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid."""
    if received > member.member_epoch or (
        received < member.member_epoch
        and (
            received != member.previous_member_epoch
            or owned is None
            or not flatten(owned) <= flatten(member.active)
        )
    ):
        raise fenced_epoch("streams", "tasks", received, member.member_epoch)


def _repartition_counts(
    topology: Topology, existing: Mapping[str, tuple[object, int]]
) -> dict[str, int]:
    """Partition counts of the repartition topics: the topology's, the existing topic's, or
    (Kafka's RepartitionTopics) the largest source of the subtopologies writing to it."""
    counts: dict[str, int] = {}
    for sub in topology.subtopologies:
        for t in sub.repartition_source_topics:
            if t.partitions > 0:
                counts[t.name] = t.partitions
            elif t.name in existing:
                counts[t.name] = existing[t.name][1]
    for _ in range(len(topology.subtopologies) + 1):
        for sub in topology.subtopologies:
            n = max(
                [existing[t][1] for t in sub.source_topics if t in existing]
                + [counts.get(t.name, 0) for t in sub.repartition_source_topics]
                + [0]
            )
            for sink in sub.repartition_sink_topics:
                if n > 0 and counts.get(sink, 0) == 0:
                    counts[sink] = n
    return counts


def _metadata_of(m: StreamsMember) -> tuple[object, ...]:
    return (
        (m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms),
        (m.topology_epoch, m.process_id, m.user_endpoint, sorted(m.client_tags.items())),
    )


def _current_of(m: StreamsMember) -> tuple[object, ...]:
    return (m.member_epoch, m.previous_member_epoch, m.state, _copy(m.active), _copy(m.standby),
            _copy(m.revoking))  # fmt: skip


def _copy(tasks: Tasks) -> Tasks:
    return {sub: set(parts) for sub, parts in tasks.items() if parts}


def _union(a: Tasks, b: Tasks) -> Tasks:
    return nest(flatten(a) | flatten(b))
