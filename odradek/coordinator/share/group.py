"""Share group membership (KIP-932's ShareGroupHeartbeat) and the simple assignor.

As Kafka's share groups: a member joins with epoch 0 (the client names itself with a member id,
or the coordinator gives one), heartbeats with the epoch it was last given and leaves with -1.
Any change of membership or subscription bumps the group epoch and the target assignment is
recomputed; a share group has no revocation step (several members may read one partition), so
a member gets its new assignment, and the group epoch as its member epoch, at once. A member
that misses `group.share.session.timeout.ms` is removed, and the records it holds go back.

The simple assignor (Kafka's SimpleAssignor, homogeneous case), per topic: with no more
subscribers than partitions the partitions go round-robin over the subscribers, each partition
to one member; with more subscribers than partitions each subscriber gets one partition, so
partitions are shared.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field

UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
FENCED_MEMBER_EPOCH = 110
GROUP_MAX_SIZE_REACHED = 81

Assignment = dict[uuid.UUID, list[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    epoch: int = 0
    topics: list[str] = field(default_factory=list)
    assignment: Assignment = field(default_factory=dict)
    deadline_ms: int = 0


@dataclass(slots=True)
class HeartbeatResult:
    error: int
    member_id: str | None = None
    epoch: int = 0
    assignment: Assignment | None = None
    message: str | None = None


def new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def simple_assign(
    members: dict[str, ShareMember], partitions: dict[str, tuple[uuid.UUID, int]]
) -> dict[str, Assignment]:
    """member id -> {topic id: partitions}; `partitions` maps topic name -> (id, count)."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for topic in sorted({t for m in members.values() for t in m.topics}):
        if topic not in partitions:
            continue
        topic_id, count = partitions[topic]
        subs = sorted(m.member_id for m in members.values() if topic in m.topics)
        if not subs or count <= 0:
            continue
        if len(subs) <= count:
            for p in range(count):
                out[subs[p % len(subs)]].setdefault(topic_id, []).append(p)
        else:
            for i, m in enumerate(subs):
                out[m].setdefault(topic_id, []).append(i % count)
    return out


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self._metadata: dict[str, tuple[uuid.UUID, int]] = {}

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
        metadata: dict[str, tuple[uuid.UUID, int]],
        now_ms: int,
        session_ms: int,
        max_size: int,
    ) -> HeartbeatResult:
        if member_epoch == 0:
            if len(self.members) >= max_size and member_id not in self.members:
                return HeartbeatResult(
                    GROUP_MAX_SIZE_REACHED,
                    message=f"The share group has reached its maximum capacity of {max_size} "
                    "members.",
                )
            if topics is None:
                return HeartbeatResult(
                    INVALID_REQUEST, message="SubscribedTopicNames must be set in first request."
                )
            member_id = member_id or new_member_id()
            m = self.members.get(member_id)
            if m is None:
                m = self.members[member_id] = ShareMember(member_id, client_id, client_host)
            m.rack_id = rack_id
            m.topics = sorted(set(topics))
            m.assignment = {}
            m.epoch = 0
            self.epoch += 1
        else:
            m = self.members.get(member_id)
            if m is None:
                return HeartbeatResult(
                    UNKNOWN_MEMBER_ID,
                    message=f"Member {member_id} is not a member of group {self.group_id}.",
                )
            if member_epoch != m.epoch:
                return HeartbeatResult(
                    FENCED_MEMBER_EPOCH,
                    message=f"The share group member has a smaller member epoch "
                    f"({member_epoch}) than the one known by the group coordinator "
                    f"({m.epoch}). The member must abandon all its partitions and rejoin.",
                )
            if topics is not None and sorted(set(topics)) != m.topics:
                m.topics = sorted(set(topics))
                self.epoch += 1
            if rack_id is not None:
                m.rack_id = rack_id
        m.deadline_ms = now_ms + session_ms
        wanted = {
            t: metadata[t]
            for t in {t for x in self.members.values() for t in x.topics}
            if t in metadata
        }
        if wanted != self._metadata:
            self._metadata = wanted
            if member_epoch != 0:
                self.epoch += 1
        changed = False
        if self.assignment_epoch != self.epoch:
            self._reassign()
        if m.epoch != self.epoch:
            m.epoch = self.epoch
            changed = True
        return HeartbeatResult(
            0,
            member_id,
            m.epoch,
            m.assignment if changed or member_epoch == 0 else None,
        )

    def _reassign(self) -> None:
        target = simple_assign(self.members, self._metadata)
        for mid, assignment in target.items():
            self.members[mid].assignment = assignment
        self.assignment_epoch = self.epoch

    def leave(self, member_id: str) -> bool:
        if self.members.pop(member_id, None) is None:
            return False
        self.epoch += 1
        self._reassign()
        return True

    def expired(self, now_ms: int) -> list[str]:
        return [m.member_id for m in self.members.values() if m.deadline_ms <= now_ms]
