"""KIP-848 consumer groups, answered by the group coordinator's ConsumerGroupManager.

ConsumerGroupHeartbeat (key 68), v0-1: joins (epoch 0), heartbeats, leaves (-1, static -2);
the response carries the member epoch, the heartbeat interval and, when it changed or the request
was a full one, the assignment. v1 adds SubscribedTopicRegex.
ConsumerGroupDescribe (key 69), v0-1 (v1 adds MemberType, KIP-1099): the group epoch,
assignment epoch, assignor and every member's current and target assignment (topic ids and
names).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from odradek.broker.handler_support import client_host, group_allowed
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import offsets_replicated
from odradek.coordinator.group.consumer_group import HeartbeatRequest
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

CONSUMER_MEMBER = 1  # MemberType (v1): 0 classic, 1 consumer
CLASSIC_MEMBER = 0
NOT_REQUESTED = -2147483648  # AuthorizedOperations when the request did not ask for them


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, versions=(0, 1))
async def consumer_group_heartbeat(
    ctx: RequestContext, req: protocol.ConsumerGroupHeartbeatRequest
) -> protocol.ConsumerGroupHeartbeatResponse:
    Resp = protocol.ConsumerGroupHeartbeatResponse
    coord = ctx.group_coordinator

    def failed(error: ErrorCode, message: str | None = None) -> object:
        return Resp(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            member_id=None,
            member_epoch=0,
            heartbeat_interval_ms=0,
            assignment=None,
        )

    if not group_allowed(ctx, AclOperation.READ, req.group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if coord is None:
        return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    topics = req.subscribed_topic_names
    if topics and ctx.broker.authorizer is not None:
        denied = [
            t
            for t in topics
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t, log_if_denied=False)
        ]
        if denied:
            return failed(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                f"The client is not authorized to access topics: {sorted(denied)}",
            )
    result = coord.consumer_heartbeat(
        HeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=None if topics is None else list(topics),
            subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
            server_assignor=req.server_assignor,
            owned=None
            if req.topic_partitions is None
            else [(tp.topic_id, list(tp.partitions)) for tp in req.topic_partitions],
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
        )
    )
    if result.error != ErrorCode.NONE:
        return failed(result.error, result.message)
    error = await offsets_replicated(ctx.broker, req.group_id)
    if error != ErrorCode.NONE:
        return failed(error)
    assignment = None
    if result.assignment is not None:
        A = Resp.Assignment
        assignment = A(
            topic_partitions=[
                A.TopicPartitions(topic_id=tid, partitions=sorted(parts))
                for tid, parts in sorted(result.assignment.items(), key=lambda x: str(x[0]))
            ]
        )
    return Resp(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def _assignment(
    cls: type, a: Mapping[uuid.UUID, set[int]], names: Mapping[uuid.UUID, str]
) -> object:
    T = cls.TopicPartitions  # type: ignore[attr-defined]
    return cls(
        topic_partitions=[
            T(topic_id=tid, topic_name=names.get(tid, ""), partitions=sorted(parts))
            for tid, parts in sorted(a.items(), key=lambda x: str(x[0]))
            if parts
        ]
    )


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, versions=(0, 1))
async def consumer_group_describe(
    ctx: RequestContext, req: protocol.ConsumerGroupDescribeRequest
) -> protocol.ConsumerGroupDescribeResponse:
    Resp = protocol.ConsumerGroupDescribeResponse
    G = Resp.DescribedGroup
    M = G.Member
    coord = ctx.group_coordinator
    names = {info.topic_id: name for name, info in ctx.broker.topics.store.topics.items()}
    out = []
    for group_id in req.group_ids:
        error: ErrorCode
        group = None
        if not group_allowed(ctx, AclOperation.DESCRIBE, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif coord is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error, group = coord.consumer_describe(group_id)
        if group is None:
            message = (
                f"Group {group_id} not found." if error == ErrorCode.GROUP_ID_NOT_FOUND else None
            )
            out.append(
                G(
                    error_code=error,
                    error_message=message,
                    group_id=group_id,
                    group_state="",
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=[],
                    authorized_operations=NOT_REQUESTED,
                )
            )
            continue
        members = [
            M(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(M.Assignment, m.assigned, names),
                target_assignment=_assignment(
                    M.Assignment, group.target.get(m.member_id, {}), names
                ),
                member_type=CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER,
            )
            for m in group.members.values()
        ]
        out.append(
            G(
                error_code=ErrorCode.NONE,
                error_message=None,
                group_id=group_id,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor,
                members=members,
                authorized_operations=ctx.authorized_operations_bits(ResourceType.GROUP, group_id)
                if req.include_authorized_operations
                else NOT_REQUESTED,
            )
        )
    return Resp(throttle_time_ms=0, groups=out)
