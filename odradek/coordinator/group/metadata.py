"""A classic consumer group and its members, as Kafka's GroupMetadata and MemberMetadata.

The group state machine (Kafka's GroupState):

    Empty ---------------> PreparingRebalance <--------------+
      ^  (member joins)        |      ^                      |
      |                        |      | (join, leave,        |
      | (all members gone)     v      |  session expiry)     |
      +------------------ CompletingRebalance ----------> Stable
                                  (leader's SyncGroup stored)

and any state -> Dead (group deleted, or its offsets partition unloaded). This module holds the
data; the transitions and their table are `state.GroupStateMachine`'s alone.
Static members (KIP-345) are kept in `static_members`: group.instance.id -> member id. Members
that were handed a member id with MEMBER_ID_REQUIRED (KIP-394) but have not joined yet are in
`pending_members`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from odradek.coordinator.group.assignment import subscribed_topics
from odradek.wire.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    """Kafka's names, as ListGroups and DescribeGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class IllegalTransition(RuntimeError):
    """A transition Kafka's GroupMetadata.assertValidTransition would refuse (a bug here)."""


@dataclass(slots=True)
class OffsetAndMetadata:
    """A committed offset, as Kafka's OffsetAndMetadata."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: expires by offsets.retention.minutes once the group empties


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)

    @classmethod
    def failed(cls, member_id: str, error: ErrorCode) -> JoinResult:
        return cls(error, member_id)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]
Protocols = list[tuple[str, bytes]]


class Member:
    """One member: its session, its supported protocols with metadata, its assignment."""

    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_callback",
        "sync_callback",
        "is_new",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = list(protocols)
        self.assignment = b""
        self.join_callback: JoinCallback | None = None
        self.sync_callback: SyncCallback | None = None
        self.is_new = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: Protocols) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise IllegalTransition(f"member {self.member_id} supports none of {candidates}")

    def __repr__(self) -> str:
        return (
            f"Member(id={self.member_id!r}, instance={self.group_instance_id!r}, "
            f"client={self.client_id!r}, host={self.client_host!r})"
        )


class ClassicGroup:
    """A group's membership, generation, chosen protocol and committed offsets."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}
        self.pending_sync_members: set[str] = set()
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # Kafka's pendingOffsetCommits: appended to the log, not yet replicated; materialised
        # into `offsets` once they are (OffsetManager.complete_commit), dropped if they fail
        self.pending_offset_commits: dict[tuple[str, int], OffsetAndMetadata] = {}
        # the append order of the runtime commit each entry of `offsets` came from (Kafka's
        # appendedBatchOffset): an older commit completing late never overwrites a newer one
        self.offset_append_seq: dict[tuple[str, int], int] = {}
        # producer id -> offsets written in a transaction that has not ended yet
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.subscribed: set[str] | None = None
        self.join_timer: str | None = None  # "initial" | "delayed" while a join is in purgatory

    # -- queries ------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def has_received_sync_from_all(self) -> bool:
        return not self.pending_sync_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        prefix = client_id if instance_id is None else instance_id
        return f"{prefix}-{uuid.uuid4()}"

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        candidates = self.candidate_protocols()
        return self.protocol_type == protocol_type and any(n in candidates for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its favourite common protocol; most votes wins."""
        if not self.members:
            raise IllegalTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise IllegalTransition(f"no member metadata for group in state {self.state.value}")
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def join_result(
        self,
        member: Member,
        with_members: bool,
        leader_id: str | None = None,
        skip: bool = False,
    ) -> JoinResult:
        """A successful JoinGroup answer for `member` in the current generation (the member
        list only for the leader, `with_members`)."""
        return JoinResult(
            error=ErrorCode.NONE,
            member_id=member.member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader_id=(self.leader_id if leader_id is None else leader_id) or "",
            skip_assignment=skip,
            members=self.current_member_metadata() if with_members else [],
        )

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        return True if self.subscribed is None else topic in self.subscribed

    # -- changes ------------------------------------------------------------------------------

    def add(self, member: Member, callback: JoinCallback | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_callback = callback
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_callback = callback

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> Member:
        """A static member rejoined with a new member id: the old id is fenced (KIP-345)."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join(
            member, JoinResult.failed(old_member_id, ErrorCode.FENCED_INSTANCE_ID)
        )
        self.maybe_invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def maybe_invoke_join(self, member: Member, result: JoinResult) -> bool:
        callback, member.join_callback = member.join_callback, None
        if callback is None:
            return False
        callback(result)
        return True

    def maybe_invoke_sync(self, member: Member, result: SyncResult) -> bool:
        callback, member.sync_callback = member.sync_callback, None
        if callback is None:
            return False
        callback(result)
        return True

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def init_next_generation(self) -> None:
        """The next generation's number, protocol and subscription (the state machine then
        moves the group to CompletingRebalance, or Empty when no member is left)."""
        self.generation_id += 1
        self.protocol_name = self.select_protocol() if self.members else None
        self.subscribed = self.compute_subscribed_topics()
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics every consumer-protocol member subscribes to; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def has_offsets(self) -> bool:
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offsets)

    def has_pending_offsets(self, tp: tuple[str, int]) -> bool:
        """Kafka's hasPendingOffsetCommitsForTopicPartition: a commit not yet replicated or a
        transaction not yet ended holds an offset for `tp`."""
        return tp in self.pending_offset_commits or any(
            tp in offsets for offsets in self.pending_txn_offsets.values()
        )

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
            f"members={list(self.members)})"
        )
