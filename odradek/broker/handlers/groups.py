"""Consumer group membership and administration, answered by the group coordinator.

FindCoordinator (key 10), v0-6: v1 key_type (0 group, 1 transaction) and error_message; v3
flexible; v4 batched coordinator_keys (KIP-699); v5-6 no wire change (KIP-890, KIP-932). The
first lookup creates `__consumer_offsets`. Transactional ids are answered with this broker too.
JoinGroup (key 11), v0-9: v1 rebalance_timeout_ms; v2 throttle time; v4 MEMBER_ID_REQUIRED for a
first join (KIP-394); v5 group_instance_id (KIP-345); v6 flexible; v7 protocol_type in the
response (nullable protocol_name); v8 reason (KIP-800); v9 skip_assignment (KIP-814).
SyncGroup (key 14), v0-5: v1 throttle time; v3 group_instance_id; v4 flexible; v5 protocol type
and name in request and response (mandatory).
Heartbeat (key 12), v0-4: v1 throttle time; v3 group_instance_id; v4 flexible.
LeaveGroup (key 13), v0-5: v3 batch of members (KIP-345); v4 flexible; v5 reason (KIP-800).
ListGroups (key 16), v0-5: v3 flexible; v4 states filter (KIP-518); v5 types filter (KIP-848).
DescribeGroups (key 15), v0-6: v3 authorized operations; v4 group_instance_id; v5 flexible; v6
an unknown group (or one that is not classic) answers GROUP_ID_NOT_FOUND with a message, still
described as Dead (KIP-1043; before v6 it is Dead without an error).
DeleteGroups (key 42), v0-2: v2 flexible. A name that is no classic or consumer group may be a share
group: an empty one is deleted with its share state (KIP-932).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.broker.handler_support import client_host, group_allowed
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import (
    creator,
    ensure_offsets_topic,
    offsets_replicated,
)
from odradek.broker.share_host import listed, share_coordinator
from odradek.coordinator.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from odradek.coordinator.group.join import JoinParams
from odradek.coordinator.group.state import LeaveMember
from odradek.coordinator.group.sync import SyncParams
from odradek.coordinator.share import admin as share_admin
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

YIELD_EVERY = 1024  # DescribeGroups names handled between yields to the event loop

GROUP_KEY, TRANSACTION_KEY = 0, 1
# A lookup that finds its internal topic being created (the first group or transaction on the
# broker) waits up to this long for it before answering COORDINATOR_NOT_AVAILABLE. Deviation:
# Kafka answers at once and the client asks again after its backoff (a second with
# librdkafka), though a broker opens a small topic in milliseconds.
FIRST_USE_WAIT_S = 1.0
# READ (3), DELETE (6), DESCRIBE (8): what a group allows when no authorizer is configured. The
# protocol layer takes the int32 bit field as a set of bit numbers; None is "not requested"
# (Integer.MIN_VALUE on the wire).
NO_OPERATIONS = None
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def _message(error: ErrorCode) -> str:
    return error.name if error == ErrorCode.NONE else error.name.replace("_", " ").lower()


# -- FindCoordinator ---------------------------------------------------------------------------


def _endpoint(broker: Broker, node_id: int, listener: str | None) -> tuple[int, str, int] | None:
    for nid, host, port, _rack in broker.broker_endpoints(listener):
        if nid == node_id:
            return nid, host, port
    return None


def find_one(
    broker: Broker, key_type: int, key: str, listener: str | None = None
) -> tuple[ErrorCode, tuple[int, str, int]]:
    """The coordinator of `key` as clients of `listener` reach it."""
    no_node = (-1, "", -1)
    if key_type == TRANSACTION_KEY:
        # the leader of the id's __transaction_state partition (created on first use)
        leader = broker.txn_coordinator.coordinator_node(key)
        me = _endpoint(broker, leader, listener) if leader in broker.live_brokers() else None
        return (ErrorCode.NONE, me) if me else (ErrorCode.COORDINATOR_NOT_AVAILABLE, no_node)
    if key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST, no_node
    coord = broker.group_coordinator
    if not ensure_offsets_topic(broker, coord):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, no_node
    info = broker.topics.info(OFFSETS_TOPIC)
    index = coord.partition_for(key)
    if info is None or index is None or index >= len(info.partitions):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, no_node
    leader = info.partitions[index].leader
    node = _endpoint(broker, leader, listener) if leader in broker.live_brokers() else None
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, no_node
    return ErrorCode.NONE, node


def _find(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, tuple[int, str, int]]:
    """find_one after DESCRIBE on the group or transactional id (denied: 30 or 53)."""
    if ctx.broker.authorizer is not None:
        if key_type == GROUP_KEY and not group_allowed(ctx, AclOperation.DESCRIBE, key):
            return GROUP_DENIED, (-1, "", -1)
        if key_type == TRANSACTION_KEY and not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (-1, "", -1)
    return find_one(ctx.broker, key_type, key, ctx.listener)


async def _find_soon(
    ctx: RequestContext, key_type: int, key: str
) -> tuple[ErrorCode, tuple[int, str, int]]:
    """_find, once more after the creation of an internal topic under way, if any, is done."""
    found = _find(ctx, key_type, key)
    if found[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        pending = list(creator(ctx.broker).pending.values())
        if pending:
            await asyncio.wait(pending, timeout=FIRST_USE_WAIT_S)  # never cancels them
            found = _find(ctx, key_type, key)
    return found


@handles(ApiKey.FIND_COORDINATOR, versions=(0, 6))
async def find_coordinator(
    ctx: RequestContext, req: protocol.FindCoordinatorRequest
) -> protocol.FindCoordinatorResponse:
    version = ctx.api_version
    key_type = req.key_type if version >= 1 else GROUP_KEY
    Resp = protocol.FindCoordinatorResponse
    if version < 4:
        error, (node_id, host, port) = await _find_soon(ctx, key_type, req.key)
        return Resp(
            throttle_time_ms=0,
            error_code=error,
            error_message=_message(error),
            node_id=node_id,
            host=host,
            port=port,
        )
    coordinators = []
    for key in req.coordinator_keys:
        error, (node_id, host, port) = await _find_soon(ctx, key_type, key)
        coordinators.append(
            Resp.Coordinator(
                key=key,
                node_id=node_id,
                host=host,
                port=port,
                error_code=error,
                error_message=_message(error),
            )
        )
    return Resp(throttle_time_ms=0, coordinators=coordinators)


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup --------------------------------------------


@handles(ApiKey.JOIN_GROUP, versions=(0, 9))
async def join_group(
    ctx: RequestContext, req: protocol.JoinGroupRequest
) -> protocol.JoinGroupResponse:
    version = ctx.api_version
    Resp = protocol.JoinGroupResponse
    instance_id = req.group_instance_id if version >= 5 else None
    if not group_allowed(ctx, AclOperation.READ, req.group_id):
        return Resp(
            throttle_time_ms=0,
            error_code=GROUP_DENIED,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id="",
            members=[],
        )
    result = await ctx.group_coordinator.join(
        JoinParams(
            group_id=req.group_id,
            member_id=req.member_id,
            instance_id=instance_id,
            require_known=version >= 4 and instance_id is None,
            support_skip=version >= 9,
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
            ),
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            reason=req.reason if version >= 8 else None,
        )
    )
    members = [
        Resp.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
        for m, i, meta in result.members
    ]
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return Resp(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


@handles(ApiKey.SYNC_GROUP, versions=(0, 5))
async def sync_group(
    ctx: RequestContext, req: protocol.SyncGroupRequest
) -> protocol.SyncGroupResponse:
    version = ctx.api_version
    Resp = protocol.SyncGroupResponse
    protocol_type = req.protocol_type if version >= 5 else None
    protocol_name = req.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        return Resp(
            throttle_time_ms=0,
            error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    if not group_allowed(ctx, AclOperation.READ, req.group_id):
        return Resp(
            throttle_time_ms=0,
            error_code=GROUP_DENIED,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    result = await ctx.group_coordinator.sync(
        SyncParams(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            instance_id=req.group_instance_id if version >= 3 else None,
            assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
        )
    )
    error = result.error
    if error == ErrorCode.NONE:
        error = await offsets_replicated(ctx.broker, req.group_id)
    return Resp(
        throttle_time_ms=0,
        error_code=error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment if error == ErrorCode.NONE else b"",
    )


@handles(ApiKey.HEARTBEAT, versions=(0, 4))
async def heartbeat(
    ctx: RequestContext, req: protocol.HeartbeatRequest
) -> protocol.HeartbeatResponse:
    coord = ctx.group_coordinator
    if not group_allowed(ctx, AclOperation.READ, req.group_id):
        error = GROUP_DENIED
    elif coord is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error = coord.heartbeat(
            req.group_id,
            req.member_id,
            req.group_instance_id if ctx.api_version >= 3 else None,
            req.generation_id,
        )
    return protocol.HeartbeatResponse(throttle_time_ms=0, error_code=error)


@handles(ApiKey.LEAVE_GROUP, versions=(0, 5))
async def leave_group(
    ctx: RequestContext, req: protocol.LeaveGroupRequest
) -> protocol.LeaveGroupResponse:
    version = ctx.api_version
    Resp = protocol.LeaveGroupResponse
    if version >= 3:
        leaving = [
            LeaveMember(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
            for m in req.members
        ]
    else:
        leaving = [LeaveMember(req.member_id)]
    coord = ctx.group_coordinator
    results: list[tuple[LeaveMember, ErrorCode]] = []
    if not group_allowed(ctx, AclOperation.READ, req.group_id):
        top = GROUP_DENIED
    elif coord is None:
        top = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        top, results = coord.leave_group(req.group_id, leaving)
    if version < 3 and top == ErrorCode.NONE:
        # one member per request: its error is the response's error
        top = next((e for _m, e in results if e != ErrorCode.NONE), ErrorCode.NONE)
    return Resp(
        throttle_time_ms=0,
        error_code=top,
        members=[
            Resp.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=e
            )
            for m, e in results
        ],
    )


# -- ListGroups / DescribeGroups / DeleteGroups ------------------------------------------------


@handles(ApiKey.LIST_GROUPS, versions=(0, 5))
async def list_groups(
    ctx: RequestContext, req: protocol.ListGroupsRequest
) -> protocol.ListGroupsResponse:
    version = ctx.api_version
    Resp = protocol.ListGroupsResponse
    coord = ctx.group_coordinator
    if coord is None:
        return Resp(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[])
    states = list(req.states_filter or []) if version >= 4 else []
    types = list(req.types_filter or []) if version >= 5 else []
    error, groups = coord.list_groups(states, types)
    groups = groups + listed(ctx.broker, states, types)  # KIP-932
    if ctx.broker.authorizer is not None and not ctx.authorize_cluster(
        AclOperation.DESCRIBE, log_if_denied=False
    ):  # only the groups the principal may describe; never an error
        groups = [
            g
            for g in groups
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g[0], log_if_denied=False)
        ]
    return Resp(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            Resp.ListedGroup(group_id=g, protocol_type=ptype, group_state=state, group_type=gtype)
            for g, ptype, state, gtype in groups
        ],
    )


def _described(
    ctx: RequestContext, coord: GroupCoordinator | None, group_id: str, with_ops: bool
) -> object:
    G = protocol.DescribeGroupsResponse.DescribedGroup
    M = G.DescribedGroupMember
    denied = not group_allowed(ctx, AclOperation.DESCRIBE, group_id)
    if coord is None or denied:
        return G(
            error_code=GROUP_DENIED if denied else ErrorCode.COORDINATOR_NOT_AVAILABLE,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
            authorized_operations=NO_OPERATIONS,
        )
    s = coord.describe_group(group_id)
    error = s.error
    message = None
    if error == ErrorCode.GROUP_ID_NOT_FOUND:
        if ctx.api_version >= 6:
            message = s.message or f"Group {group_id} not found."
        else:
            error = ErrorCode.NONE  # before v6 an unknown group is described as Dead
    return G(
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state=s.state,
        protocol_type=s.protocol_type,
        protocol_data=s.protocol,
        members=[
            M(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in s.members
        ],
        authorized_operations=ctx.authorized_operations(ResourceType.GROUP, group_id)
        if with_ops and error == ErrorCode.NONE
        else NO_OPERATIONS,
    )


@handles(ApiKey.DESCRIBE_GROUPS, versions=(0, 6))
async def describe_groups(
    ctx: RequestContext, req: protocol.DescribeGroupsRequest
) -> protocol.DescribeGroupsResponse:
    """Every name is answered, in order; a name asked twice is described once (the answer is
    shared), and the loop yields to the event loop every YIELD_EVERY names so that a request
    with 400,000 names does not stop other clients from being served."""
    coord = ctx.group_coordinator
    with_ops = ctx.api_version >= 3 and bool(req.include_authorized_operations)
    described: dict[str, object] = {}
    out = []
    for n, group_id in enumerate(req.groups):
        if n % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
            coord = ctx.group_coordinator  # the coordinator may have moved meanwhile
        group = described.get(group_id)
        if group is None:
            group = described[group_id] = _described(ctx, coord, group_id, with_ops)
        out.append(group)
    return protocol.DescribeGroupsResponse(throttle_time_ms=0, groups=out)


@handles(ApiKey.DELETE_GROUPS, versions=(0, 2))
async def delete_groups(
    ctx: RequestContext, req: protocol.DeleteGroupsRequest
) -> protocol.DeleteGroupsResponse:
    Resp = protocol.DeleteGroupsResponse
    coord = ctx.group_coordinator
    names = list(req.groups_names)
    allowed = [g for g in names if group_allowed(ctx, AclOperation.DELETE, g)]
    if coord is None:
        results = dict.fromkeys(allowed, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        results = coord.delete_groups(allowed) if allowed else {}
        for g, code in results.items():
            if code == ErrorCode.GROUP_ID_NOT_FOUND:  # perhaps a share group (KIP-932)
                results[g] = ErrorCode(
                    await share_admin.delete_group(share_coordinator(ctx.broker), g)
                )
    for g in names:
        results.setdefault(g, GROUP_DENIED)
    return Resp(
        throttle_time_ms=0,
        results=[Resp.DeletableGroupResult(group_id=g, error_code=results[g]) for g in names],
    )
