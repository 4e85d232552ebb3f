"""What the handlers of KIP-848 consumer groups (ConsumerGroupHeartbeat / ConsumerGroupDescribe,
keys 68/69) and KIP-1071 streams groups (StreamsGroupHeartbeat / StreamsGroupDescribe, keys
88/89) answer alike: the heartbeat's checks before the coordinator (group READ, a coordinator,
DESCRIBE on every topic the member reads, with Kafka's message), the fields of a heartbeat's
answer, and the describe loop with the fields of a described or missing group. Handlers never
import each other (DESIGN.md), so both use this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Protocol, TypeVar

from odradek.broker.handler_support import group_allowed
from odradek.broker.network.context import RequestContext
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire.errors import ErrorCode

NOT_REQUESTED = -2147483648  # AuthorizedOperations when the request did not ask for them

Fields = dict[str, object]


class DescribedGroup(Protocol):
    group_epoch: int
    assignment_epoch: int

    @property
    def state(self) -> Enum: ...  # its value is the group state's name


class HeartbeatOutcome(Protocol):
    member_epoch: int
    heartbeat_interval_ms: int

    @property
    def member_id(self) -> str | None: ...


G = TypeVar("G", bound=DescribedGroup)


def heartbeat_refusal(
    ctx: RequestContext, group_id: str, topics: Iterable[str] | None
) -> tuple[ErrorCode, str | None] | None:
    """Why a heartbeat is refused before the coordinator sees it, or None: the group's READ
    ACL, no coordinator here, or a topic the member reads that it may not DESCRIBE."""
    if not group_allowed(ctx, AclOperation.READ, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if ctx.group_coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    if topics and ctx.broker.authorizer is not None:
        denied = [
            t
            for t in topics
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t, log_if_denied=False)
        ]
        if denied:
            return (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                f"The client is not authorized to access topics: {sorted(denied)}",
            )
    return None


def heartbeat_fields(
    error: ErrorCode, message: str | None, result: HeartbeatOutcome | None, member_id: str | None
) -> Fields:
    """The fields both heartbeat answers share: a failure has epoch 0 and no interval."""
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message,
        "member_id": member_id if result is None else result.member_id,
        "member_epoch": 0 if result is None else result.member_epoch,
        "heartbeat_interval_ms": 0 if result is None else result.heartbeat_interval_ms,
    }


def describe_groups(
    ctx: RequestContext,
    group_ids: Sequence[str],
    include_authorized_operations: bool,
    describe: Callable[[str], tuple[ErrorCode, G | None]],
    missing: Callable[[Fields], object],
    found: Callable[[Fields, G], object],
) -> list[object]:
    """Each group's answer: `missing(fields)` when it cannot be described (no DESCRIBE ACL, no
    coordinator, not a group of this type), else `found(fields, group)`, with the fields both
    describe answers share."""
    out = []
    for group_id in group_ids:
        error: ErrorCode
        group = None
        if not group_allowed(ctx, AclOperation.DESCRIBE, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif ctx.group_coordinator is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error, group = describe(group_id)
        if group is None:
            message = (
                f"Group {group_id} not found." if error == ErrorCode.GROUP_ID_NOT_FOUND else None
            )
            out.append(
                missing(
                    {
                        "error_code": error,
                        "error_message": message,
                        "group_id": group_id,
                        "group_state": "",
                        "group_epoch": 0,
                        "assignment_epoch": 0,
                        "members": [],
                        "authorized_operations": NOT_REQUESTED,
                    }
                )
            )
            continue
        ops = (
            ctx.authorized_operations_bits(ResourceType.GROUP, group_id)
            if include_authorized_operations
            else NOT_REQUESTED
        )
        fields: Fields = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state.value,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "authorized_operations": ops,
        }
        out.append(found(fields, group))
    return out
