"""KIP-848 online migration (`group.consumer.migration.policy`): a live classic group becomes a
consumer group whose members are "classic members" (Kafka 4.x's `ConsumerGroup.fromClassicGroup`,
`GroupMetadataManager.validateOnlineUpgrade` and `classicGroup*ToConsumerGroup`).

- `upgrade_refusal`: why a classic group may not be converted (None when it may): the policy
  forbids upgrades, a member does not use the `consumer` protocol type, or the group is full.
- `consumer_group_from_classic`: the consumer group Kafka builds: group and assignment epoch =
  the classic generation; every member at that epoch, STABLE, its target = its current
  assignment (the classic SyncGroup assignment decoded, topics resolved to ids, unknown topics
  dropped), its subscription from its ConsumerProtocolSubscription, and its classic session
  timeout and protocols in `ClassicMemberMetadata`.
- `conversion_records`: what Kafka appends for it: the classic group's GroupMetadata tombstone,
  then each member's metadata, the group epoch, the partition metadata, the target assignment
  and its epoch, each member's current assignment. Committed offsets are not touched.
- `classic_join` / `classic_sync` / `classic_heartbeat` / `classic_leave`: the classic requests
  of a classic member, answered by the consumer group (generation = member epoch), with Kafka's
  timers: told to rejoin (REBALANCE_IN_PROGRESS), a member that does not JoinGroup within its
  rebalance timeout is fenced (classicGroupJoinTimeout); one that joined and does not SyncGroup
  within it is fenced too (classicGroupSyncTimeout); Heartbeat and SyncGroup renew its session.
- `downgrade_refusal` / `classic_group_members`: the downgrade (Kafka's
  validateOnlineDowngradeWithFencedMembers / ...WithReplacedMember and
  ClassicGroup.fromConsumerGroup), applied by the coordinator's `_downgrade`.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group import records as classic_records
from odradek.coordinator.group.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupManager,
    ConsumerMember,
    HeartbeatRequest,
    MemberState,
)
from odradek.coordinator.group.metadata import ClassicGroup, Member
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
Record = tuple[bytes, bytes | None]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def decode_assignment(data: bytes) -> dict[str, list[int]] | None:
    """A ConsumerProtocolAssignment (v0-v3: int16 version, [topic, [int32]], user data) as
    {topic: partitions}; empty bytes are an empty assignment, malformed bytes None."""
    if not data:
        return {}
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            return None
        (count,) = _I32.unpack_from(data, 2)
        if count < 0 or count > len(data):
            return None
        pos = 6
        out: dict[str, list[int]] = {}
        for _ in range(count):
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topic = bytes(data[pos : pos + n]).decode("utf-8")
            pos += n
            (parts,) = _I32.unpack_from(data, pos)
            pos += 4
            if parts < 0 or pos + 4 * parts > len(data):
                return None
            out.setdefault(topic, []).extend(struct.unpack_from(f">{parts}i", data, pos))
            pos += 4 * parts
        return out
    except (struct.error, UnicodeDecodeError):
        return None


@dataclass(slots=True, frozen=True)
class Subscription:
    """A ConsumerProtocolSubscription (v0 topics and user data, v1+ owned partitions, v2+
    generation, v3+ rack), what a classic member's JoinGroup tells a consumer group."""

    version: int
    topics: list[str]
    owned: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


class _Cursor:
    """Reads the embedded consumer protocol's non-flexible fields; raises struct.error."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise struct.error("string past the end")
        self.pos += n
        return self.data[self.pos - n : self.pos].decode("utf-8")

    def count(self) -> int:
        n = self.i32()
        if n > len(self.data):
            raise struct.error("count past the end")
        return max(n, 0)

    def skip_bytes(self) -> None:
        n = self.i32()
        if n > 0:
            if self.pos + n > len(self.data):
                raise struct.error("bytes past the end")
            self.pos += n

    def partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.count()):
            topic = self.string() or ""
            out.setdefault(topic, []).extend(self.i32() for _ in range(self.count()))
        return out


def decode_subscription(data: bytes) -> Subscription | None:
    """A ConsumerProtocolSubscription, or None when malformed (versions above 3 read as 3, as
    Kafka's ConsumerProtocol does)."""
    try:
        r = _Cursor(bytes(data))
        version = r.i16()
        if version < 0:
            return None
        topics = [t for t in (r.string() for _ in range(r.count())) if t is not None]
        r.skip_bytes()
        owned = r.partitions() if version >= 1 else {}
        generation = r.i32() if version >= 2 else -1
        rack = r.string() if version >= 3 else None
        return Subscription(version, topics, owned, generation, rack or None)  # "": no rack
    except (struct.error, UnicodeDecodeError):
        return None


def encode_assignment(assigned: Mapping[str, Iterable[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment (the SyncGroup answer to a classic member), in the version
    of the member's subscription capped at 3, null user data."""
    out = bytearray(_I16.pack(min(max(version, 0), 3)))
    out += _I32.pack(len(assigned))
    for topic in sorted(assigned):
        raw = topic.encode("utf-8")
        parts = sorted(assigned[topic])
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    out += _I32.pack(-1)
    return bytes(out)


def upgrade_refusal(group: ClassicGroup, config: ConsumerGroupConfig) -> str | None:
    """Why `group` cannot be converted into a consumer group now, or None (Kafka's
    validateOnlineUpgrade, whose messages these follow)."""
    if not config.upgrade_allowed:
        return (
            f"Cannot upgrade classic group {group.group_id} to consumer group because the "
            "online upgrade is disabled."
        )
    if any(m.protocol_type != CONSUMER_PROTOCOL_TYPE for m in group.members.values()):
        return (
            f"Cannot upgrade classic group {group.group_id} to consumer group because the "
            "group does not use the consumer embedded protocol."
        )
    if len(group.members) >= config.max_size:
        return (
            f"Cannot upgrade classic group {group.group_id} to consumer group because the "
            "group size exceeds the maximum size."
        )
    return None


def _classic_member(
    m: Member, protocol: str | None, generation: int, topics: Mapping[str, tuple[uuid.UUID, int]]
) -> ConsumerMember:
    subscription = decode_subscription(m.metadata(protocol))
    decoded = decode_assignment(m.assignment) or {}
    assigned: Assignment = {}
    for name, parts in decoded.items():
        if name in topics:
            tid, count = topics[name]
            valid = {p for p in parts if 0 <= p < count}
            if valid:
                assigned.setdefault(tid, set()).update(valid)
    return ConsumerMember(
        m.member_id,
        instance_id=m.group_instance_id,
        rack_id=None if subscription is None else subscription.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        subscribed_topic_names=[] if subscription is None else sorted(set(subscription.topics)),
        member_epoch=generation,
        previous_member_epoch=generation,
        state=MemberState.STABLE,
        assigned=assigned,
        classic=crec.ClassicMemberMetadata(
            m.session_timeout_ms, [(name, bytes(meta)) for name, meta in m.protocols]
        ),
    )


def consumer_group_from_classic(
    group: ClassicGroup, topics: Mapping[str, tuple[uuid.UUID, int]], assignor: str
) -> ConsumerGroup:
    """The consumer group a live classic group becomes (Kafka's ConsumerGroup.fromClassicGroup)."""
    generation = group.generation_id
    out = ConsumerGroup(
        group.group_id, group_epoch=generation, assignment_epoch=generation, assignor=assignor
    )
    for m in group.members.values():
        member = _classic_member(m, group.protocol_name, generation, topics)
        out.members[member.member_id] = member
        if member.instance_id is not None:
            out.static_members[member.instance_id] = member.member_id
        out.target[member.member_id] = {t: set(p) for t, p in member.assigned.items()}
        for tid, parts in member.assigned.items():
            for p in parts:
                out.owners[(tid, p)] = member.member_id
    subscribed = {t for m in out.members.values() for t in m.subscribed_topic_names}
    out.subscription_metadata = {t: topics[t] for t in sorted(subscribed) if t in topics}
    return out


def conversion_records(group: ConsumerGroup) -> list[Record]:
    """The records of a conversion, in Kafka's order, the classic group's tombstone first."""
    out: list[Record] = [(classic_records.group_key(group.group_id), None)]
    members = [group.members[m] for m in sorted(group.members)]
    out += [crec.member_metadata(group.group_id, m) for m in members]
    out.append(crec.group_metadata(group.group_id, group.group_epoch))
    out.append(crec.partition_metadata(group.group_id, group.subscription_metadata))
    out += crec.target_assignment(group.group_id, group.target, group.assignment_epoch)
    out += [crec.current_assignment(group.group_id, m) for m in members]
    return out


# -- classic members inside a consumer group (Kafka's classicGroup*ToConsumerGroup) -------------


@dataclass(slots=True)
class ClassicJoinAnswer:
    """A JoinGroup answered by a consumer group: no leader, no member list; the generation is
    the member epoch, the protocol the member's first."""

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_name: str | None = None
    message: str | None = None


def classic_join(
    manager: ConsumerGroupManager,
    group_id: str,
    member_id: str,
    instance_id: str | None,
    protocols: list[tuple[str, bytes]],
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    client_id: str,
    client_host: str,
) -> ClassicJoinAnswer:
    """A classic member (re)joins a consumer group (Kafka's classicGroupJoinToConsumerGroup):
    its subscription updates the member (bumping the group epoch when it changed), the target
    is recomputed, and the member reconciles with the partitions its subscription says it owns."""
    group = manager.get(group_id)
    subscription = decode_subscription(protocols[0][1]) if protocols else None
    if group is None or subscription is None:
        return ClassicJoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
    known = bool(member_id)  # else new, or a static member replacing its predecessor at once
    member_id = member_id or f"{client_id}-{uuid.uuid4()}"
    existing = group.members.get(member_id) if known else None
    if instance_id is not None and known:  # Kafka: a known static member must be the one
        static_id = group.static_members.get(instance_id)
        if static_id is None:
            return ClassicJoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if static_id != member_id:
            return ClassicJoinAnswer(ErrorCode.FENCED_INSTANCE_ID, member_id)
    if existing is not None and existing.classic is None:
        return ClassicJoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
    topics = manager.topics()
    owned = [
        (topics[name][0], list(parts))
        for name, parts in subscription.owned.items()
        if name in topics
    ]
    epoch = existing.member_epoch if existing is not None else 0
    request = HeartbeatRequest(
        group_id,
        member_id,
        epoch,
        instance_id=instance_id,
        rack_id=subscription.rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=sorted(set(subscription.topics)),
        owned=owned if epoch else [],
        client_id=client_id,
        client_host=client_host,
        classic=crec.ClassicMemberMetadata(
            session_timeout_ms, [(name, bytes(meta)) for name, meta in protocols]
        ),
    )
    result = manager.heartbeat(request)
    if result.error != ErrorCode.NONE or result.member_id is None:
        return ClassicJoinAnswer(result.error, member_id, message=result.message)
    manager.scheduler.cancel(("cg-join", group_id, result.member_id))
    _fence_later(
        manager, "cg-sync", group_id, result.member_id, rebalance_timeout_ms, "it did not sync"
    )
    return ClassicJoinAnswer(ErrorCode.NONE, result.member_id, result.member_epoch, protocols[0][0])


def _fence_later(
    manager: ConsumerGroupManager,
    kind: str,
    group_id: str,
    member_id: str,
    delay_ms: int,
    why: str,
    if_absent: bool = False,
) -> None:
    """Kafka's classic-member timers: fence the member when `delay_ms` passes first."""
    key = (kind, group_id, member_id)
    if if_absent and manager.scheduler.pending(key):
        return

    def expire() -> None:
        group = manager.get(group_id)
        if group is not None and member_id in group.members:
            log.info(
                "[GroupId %s] Member %s fenced from the group because %s within its rebalance "
                "timeout of %d ms.",
                group_id,
                member_id,
                why,
                delay_ms,
            )
            manager.remove_member(group, member_id)

    manager.scheduler.schedule(key, delay_ms, expire)


def _must_rejoin(manager: ConsumerGroupManager, group_id: str, member: ConsumerMember) -> None:
    """Told REBALANCE_IN_PROGRESS: the member must JoinGroup within its rebalance timeout."""
    _fence_later(
        manager,
        "cg-join",
        group_id,
        member.member_id,
        member.rebalance_timeout_ms,
        "it did not rejoin",
        if_absent=True,
    )


def _static_holder(
    group: ConsumerGroup, member_id: str, instance_id: str | None, *, by_instance_alone: bool
) -> str | ErrorCode:
    """Kafka's static member check: the member id the request stands for (`member_id`, or the
    holder of `instance_id`, which must be that member), UNKNOWN_MEMBER_ID for an instance id no
    member holds, FENCED_INSTANCE_ID for another member's. `by_instance_alone`: an empty member
    id names the holder (an admin's removal)."""
    if instance_id is None:
        return member_id
    static_id = group.static_members.get(instance_id)
    if static_id is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if static_id != member_id and (member_id or not by_instance_alone):
        return ErrorCode.FENCED_INSTANCE_ID
    return static_id


def _find_classic(
    manager: ConsumerGroupManager, group_id: str, member_id: str, instance_id: str | None
) -> tuple[ConsumerGroup, ConsumerMember] | ErrorCode:
    """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
    group = manager.get(group_id)
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    checked = _static_holder(group, member_id, instance_id, by_instance_alone=False)
    if isinstance(checked, ErrorCode):
        return checked
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return group, member


def classic_sync(
    manager: ConsumerGroupManager,
    group_id: str,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
) -> tuple[ErrorCode, bytes]:
    """SyncGroup of a classic member (Kafka's classicGroupSyncToConsumerGroup): its assigned
    partitions as a ConsumerProtocolAssignment."""
    found = _find_classic(manager, group_id, member_id, instance_id)
    if isinstance(found, ErrorCode):
        return found, b""
    group, member = found
    assert member.classic is not None
    if generation_id != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION, b""
    names = [name for name, _ in member.classic.supported_protocols]
    if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        protocol_name is not None and protocol_name not in names
    ):
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""
    if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
        _must_rejoin(manager, group_id, member)
        return ErrorCode.REBALANCE_IN_PROGRESS, b""
    manager.scheduler.cancel(("cg-sync", group_id, member_id))
    manager.touch(group_id, member_id)
    by_id = {tid: name for name, (tid, _) in manager.topics().items()}
    assigned = {by_id[t]: sorted(p) for t, p in member.assigned.items() if t in by_id}
    first = decode_subscription(member.classic.supported_protocols[0][1])
    return ErrorCode.NONE, encode_assignment(assigned, 0 if first is None else first.version)


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
    if member.state != MemberState.UNRELEASED_PARTITIONS:
        return False
    for tid, parts in group.target.get(member.member_id, {}).items():
        held = member.assigned.get(tid, set())
        for p in parts:
            if p not in held and group.current_partition_epoch(tid, p) != -1:
                return True
    return False


def classic_heartbeat(
    manager: ConsumerGroupManager,
    group_id: str,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
) -> ErrorCode:
    """Heartbeat of a classic member (Kafka's classicGroupHeartbeatToConsumerGroup):
    REBALANCE_IN_PROGRESS when it must rejoin (the group epoch moved, it has partitions to
    revoke, or the partitions it waits for are free)."""
    found = _find_classic(manager, group_id, member_id, instance_id)
    if isinstance(found, ErrorCode):
        return found
    group, member = found
    if generation_id != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION
    manager.touch(group_id, member_id)
    if (
        member.member_epoch < group.group_epoch
        or member.state == MemberState.UNREVOKED_PARTITIONS
        or (
            member.state == MemberState.UNRELEASED_PARTITIONS
            and not _waiting_on_unreleased(group, member)
        )
    ):
        _must_rejoin(manager, group_id, member)
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def classic_leave(
    manager: ConsumerGroupManager, group_id: str, member_id: str, instance_id: str | None
) -> ErrorCode:
    """LeaveGroup into a consumer group (Kafka 4.4's classicGroupLeaveToConsumerGroup): the member
    leaves for good, the group epoch moves. An admin's removal may name a member of either
    protocol, a static one by its instance id alone (empty member id); removing the last
    consumer-protocol member downgrades the group (the manager's fencing)."""
    group = manager.get(group_id)
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    checked = _static_holder(group, member_id, instance_id, by_instance_alone=True)
    if isinstance(checked, ErrorCode):
        return checked
    member_id = checked
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    log.info(
        "[GroupId %s] Member %s has left group through explicit LeaveGroup.", group_id, member_id
    )
    manager.remove_member(group, member_id)
    return ErrorCode.NONE


def adopt(manager: ConsumerGroupManager, group: ConsumerGroup) -> None:
    """The converted group replaces the classic one in `manager` (after its records are
    written); every classic member's session starts with its own session timeout."""
    manager.groups[group.group_id] = group
    for member_id in group.members:
        manager.touch(group.group_id, member_id)


# -- the downgrade (Kafka's convertToClassicGroup) -------------------------------------------------


def downgrade_allowed(
    group: ConsumerGroup,
    config: ConsumerGroupConfig,
    classic_max_size: int,
    leaving: str | None = None,
    replaced: str | None = None,
) -> bool:
    """Whether the group becomes classic when `leaving` is fenced (left, session or rebalance
    timeout) or `replaced` by a classic static member: it was the last member using the
    consumer protocol, some classic member stays, the policy allows downgrades and the classic
    group would not be too big (Kafka's validateOnlineDowngradeWithFencedMembers and
    validateOnlineDowngradeWithReplacedMember)."""
    gone = leaving if leaving is not None else replaced
    member = group.members.get(gone) if gone is not None else None
    if member is None or member.classic is not None:
        return False
    if any(m.classic is None for m in group.members.values() if m.member_id != gone):
        return False
    staying = len(group.members) - (1 if leaving is not None else 0)
    if staying < 1:
        return False  # an empty group stays what it is
    if not config.downgrade_allowed:
        log.info(
            "Cannot downgrade consumer group %s to classic group because the online downgrade "
            "is disabled.",
            group.group_id,
        )
        return False
    if staying > classic_max_size:
        log.info(
            "Cannot downgrade consumer group %s to classic group because its group size is "
            "greater than classic group max size.",
            group.group_id,
        )
        return False
    return True


def classic_members(
    group: ConsumerGroup, leaving: str | None, topics: Mapping[str, tuple[uuid.UUID, int]]
) -> list[Member]:
    """The members of the classic group a consumer group becomes (Kafka's
    ClassicGroup.fromConsumerGroup): every classic member but `leaving`, each with its target
    assignment as its SyncGroup assignment, in the version of its first protocol's subscription."""
    names = {tid: name for name, (tid, _) in topics.items()}
    out: list[Member] = []
    for m in group.members.values():
        if m.member_id == leaving or m.classic is None:
            continue
        protocols = list(m.classic.supported_protocols)
        member = Member(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.classic.session_timeout_ms,
            CONSUMER_PROTOCOL_TYPE,
            protocols,
        )
        first = decode_subscription(protocols[0][1]) if protocols else None
        target = group.target.get(m.member_id, {})
        member.assignment = encode_assignment(
            {names[t]: sorted(p) for t, p in target.items() if t in names},
            0 if first is None else first.version,
        )
        out.append(member)
    return out
