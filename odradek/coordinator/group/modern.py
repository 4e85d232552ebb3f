"""What KIP-848 consumer groups and KIP-1071 streams groups share, as Kafka's `modern` group
package (ModernGroup, ModernGroupMember) and GroupMetadataManager's common paths do: the leave
epochs and the heartbeat error, the fields every heartbeat may update, the member-epoch checks of
the heartbeat and of OffsetCommit / OffsetFetch, and a manager's plumbing (records through the
appender, the group's own session timeout and heartbeat interval from its GROUP configs, session
expiry, the replay of a group metadata record).

Sans-IO: records go through `append`, timers through a `Scheduler`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from odradek.coordinator.group.timers import Scheduler
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

TopicsView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
Record = tuple[bytes, bytes | None]
Appender = Callable[[str, list[Record]], ErrorCode]


class HeartbeatError(Exception):
    """A heartbeat refused with an error code and Kafka's message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(slots=True, frozen=True)
class ModernGroupConfig:
    """The broker's defaults a group's own configs override (`<type>.session.timeout.ms`,
    `<type>.heartbeat.interval.ms`)."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000


@dataclass(slots=True)
class ModernHeartbeatRequest:
    """The fields ConsumerGroupHeartbeat and StreamsGroupHeartbeat have in common."""

    group_id: str
    member_id: str
    member_epoch: int  # 0 joins, LEAVE_EPOCH leaves, LEAVE_STATIC_EPOCH leaves for a while
    instance_id: str | None = None  # a static member's
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1  # -1: as before


class ModernMember(Protocol):
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int


M = TypeVar("M", bound=ModernMember)


class ModernGroup(Protocol):
    @property
    def members(self) -> Mapping[str, ModernMember]: ...


G = TypeVar("G", bound=ModernGroup)


class RecordKey(Protocol):
    @property
    def kind(self) -> int: ...
    @property
    def group_id(self) -> str: ...


K = TypeVar("K", bound=RecordKey)


def update_member(member: ModernMember, req: ModernHeartbeatRequest) -> None:
    """A heartbeat's instance id, rack and rebalance timeout, where it sets them."""
    if req.instance_id is not None:
        member.instance_id = req.instance_id
    if req.rack_id is not None:
        member.rack_id = req.rack_id
    if req.rebalance_timeout_ms != -1:
        member.rebalance_timeout_ms = req.rebalance_timeout_ms


def fenced_epoch(kind: str, units: str, received: int, known: int) -> HeartbeatError:
    """FENCED_MEMBER_EPOCH with Kafka's message (`kind`: consumer, streams; `units`: what the
    member must abandon: partitions, tasks)."""
    relation = "greater" if received > known else "smaller"
    return HeartbeatError(
        ErrorCode.FENCED_MEMBER_EPOCH,
        f"The {kind} group member has a {relation} member epoch ({received}) than the one "
        f"known by the group coordinator ({known}). The member must abandon all its {units} "
        "and rejoin.",
    )


def commit_member(
    members: Mapping[str, M] | None, member_id: str, member_epoch: int
) -> M | ErrorCode | None:
    """The first steps of Kafka's validateOffsetCommit: None when the commit may go ahead (no
    such group, or an empty group committing without a member), UNKNOWN_MEMBER_ID, or the
    member whose epoch the caller checks."""
    if members is None or (member_epoch < 0 and not members):
        return None
    member = members.get(member_id)
    return ErrorCode.UNKNOWN_MEMBER_ID if member is None else member


def validate_offset_fetch(
    members: Mapping[str, ModernMember] | None, member_id: str | None, member_epoch: int
) -> ErrorCode | None:
    """Kafka's validateOffsetFetch (OffsetFetch v9+ with a member epoch)."""
    if members is None or member_epoch < 0 or member_id is None:
        return None
    member = members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return None


class ModernGroupManager(Generic[G, K]):
    """The plumbing of a consumer or streams group manager: `kind` names the group type in its
    configs (`consumer`, `streams`), `label` in its log lines, `timer` its timers' keys
    (`<timer>-session`, `<timer>-rebalance`), `metadata_kind` its group metadata record."""

    kind = ""
    label = "group"
    timer = ""
    metadata_kind = -1

    def __init__(
        self,
        config: ModernGroupConfig,
        scheduler: Scheduler,
        topics: TopicsView,
        append: Appender | None,
        new_group: Callable[[str], G],
    ) -> None:
        self.scheduler, self.topics, self.append = scheduler, topics, append
        self._defaults, self._new_group = config, new_group
        # a group's own configs (GROUP config resources) override the broker's: set by the broker
        self.group_configs: Callable[[str], Mapping[str, str]] = lambda _group_id: {}
        self.groups: dict[str, G] = {}
        self.rebalances = 0
        # (group, member) -> the member epoch its revocation timer was armed at
        self._revoking: dict[tuple[str, str], int] = {}

    def _group_config(self, group_id: str, name: str, default: int) -> int:
        raw = self.group_configs(group_id).get(f"{self.kind}.{name}")
        return int(raw) if raw else default

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(
            group_id, "heartbeat.interval.ms", self._defaults.heartbeat_interval_ms
        )

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "session.timeout.ms", self._defaults.session_timeout_ms)

    def remove_member(self, group: G, member_id: str) -> None:
        raise NotImplementedError

    def _apply_record(self, group: G, key: K, value: bytes | None) -> None:
        raise NotImplementedError

    def replay_record(self, key: K, value: bytes | None) -> None:
        """Apply one record of the group type of a loading offsets partition, in log order."""
        tombstone = key.kind == self.metadata_kind and value is None
        group = self._replayed_group(key.group_id, tombstone, value)
        if group is not None:
            self._apply_record(group, key, value)

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        """Kafka's validateOffsetFetch of the group (OffsetFetch v9 with a member epoch)."""
        group = self.groups.get(group_id)
        return validate_offset_fetch(
            None if group is None else group.members, member_id, member_epoch
        )

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self._revoking.pop((group_id, member_id), None)
        self.scheduler.cancel((f"{self.timer}-session", group_id, member_id))
        self.scheduler.cancel((f"{self.timer}-rebalance", group_id, member_id))

    def _expire_session(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            log.info(
                "[GroupId %s] Member %s fenced from the %s because its session expired.",
                group_id,
                member_id,
                self.label,
            )
            self.remove_member(group, member_id)

    def _write(self, group_id: str, records: list[Record]) -> None:
        if self.append is not None and records:
            error = self.append(group_id, records)
            if error != ErrorCode.NONE:
                log.warning("[GroupId %s] records not written: %s", group_id, error.name)

    def _replayed_group(
        self, group_id: str, group_tombstone: bool, value: bytes | None
    ) -> G | None:
        """The group a loading record applies to: None after the group's tombstone (it is
        forgotten) or for a tombstone of a group not known; a group is created by its first
        record."""
        if group_tombstone:
            self.groups.pop(group_id, None)
            return None
        group = self.groups.get(group_id)
        if group is None and value is not None:
            group = self.groups[group_id] = self._new_group(group_id)
        return group
