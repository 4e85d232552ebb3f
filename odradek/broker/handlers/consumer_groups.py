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

from odradek.broker.handler_support import client_host
from odradek.broker.modern_group_support import (
    Fields,
    describe_groups,
    heartbeat_fields,
    heartbeat_refusal,
)
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import offsets_replicated
from odradek.coordinator.group.consumer_group import ConsumerGroup, HeartbeatRequest
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

CONSUMER_MEMBER = 1  # MemberType (v1): 0 classic, 1 consumer
CLASSIC_MEMBER = 0


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, versions=(0, 1))
async def consumer_group_heartbeat(
    ctx: RequestContext, req: protocol.ConsumerGroupHeartbeatRequest
) -> protocol.ConsumerGroupHeartbeatResponse:
    Resp = protocol.ConsumerGroupHeartbeatResponse
    coord = ctx.group_coordinator

    def failed(error: ErrorCode, message: str | None = None) -> object:
        return Resp(**heartbeat_fields(error, message, None, None), assignment=None)

    topics = req.subscribed_topic_names
    refused = heartbeat_refusal(ctx, req.group_id, topics)
    if refused is not None or coord is None:
        return failed(*(refused or (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)))
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
    return Resp(**heartbeat_fields(ErrorCode.NONE, None, result, None), assignment=assignment)


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

    def found(fields: Fields, group: ConsumerGroup) -> object:
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
        return G(**fields, assignor_name=group.assignor, members=members)

    out = describe_groups(
        ctx,
        req.group_ids,
        req.include_authorized_operations,
        lambda group_id: coord.consumer_describe(group_id) if coord else (ErrorCode.NONE, None),
        lambda fields: G(**fields, assignor_name=""),
        found,
    )
    return Resp(throttle_time_ms=0, groups=out)
