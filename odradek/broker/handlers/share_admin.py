"""KIP-932 share group offset admin APIs, answered by the group's coordinator (the
`__consumer_offsets` leader of the group id, as FindCoordinator names it):

DescribeShareGroupOffsets (key 90), v0-1: per topic-partition the share-partition start offset
and its leader epoch (-1 when the group has no state there); v1 adds Lag (KIP-1226: the high
watermark less the start offset less the records past it already acknowledged or archived).
Null topics: every share-partition the group has state for. DESCRIBE on the group; topics not
authorized for DESCRIBE are left out (null topics) or answered TOPIC_AUTHORIZATION_FAILED.
AlterShareGroupOffsets (91), v0: sets start offsets of an empty group (NON_EMPTY_GROUP
otherwise; a group not known yet is created, as Kafka's), with nothing in flight. READ on the
group and on each topic.
DeleteShareGroupOffsets (92), v0: drops an empty group's state for whole topics (a topic the
group has no state for: UNKNOWN_TOPIC_OR_PARTITION). DELETE on the group, READ on each topic.
DeleteShareGroupState (86), v0: the broker-to-share-coordinator request behind the delete
(CLUSTER_ACTION on the cluster).
The state itself is in `odradek.coordinator.share.admin`.
"""

from __future__ import annotations

import uuid

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.share_host import share_coordinator
from odradek.coordinator.share import admin
from odradek.coordinator.share.coordinator import SpKey
from odradek.security.acl_types import CLUSTER_NAME, AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_COORDINATOR = 16
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
ZERO_UUID = uuid.UUID(int=0)
NO_STATE = "There is no offset information to delete."


def _group_error(ctx: RequestContext, group_id: str) -> tuple[int, str | None]:
    """Kafka's coordinator checks (valid id, ours, loaded) and the group's kind: a classic or
    consumer group of that name is not a share group."""
    if not group_id:
        return 24, None  # INVALID_GROUP_ID
    coord = ctx.group_coordinator
    if coord is None:
        return 15, None  # COORDINATOR_NOT_AVAILABLE
    status = coord.status(group_id, "share")
    if status is not None:
        return int(status), None
    if group_id in coord.machine.groups or group_id in coord.consumer.groups:
        return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    return NONE, None


def _offsets_change_error(
    ctx: RequestContext, group_id: str, operation: AclOperation
) -> tuple[int, str | None]:
    """Why a share group's offsets may not be altered or deleted (`operation` on the group, the
    coordinator checks, members), as (error, message); (NONE, None) when they may."""
    if not ctx.authorize(operation, ResourceType.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, None
    error, message = _group_error(ctx, group_id)
    if error:
        return error, message
    group = share_coordinator(ctx.broker).group(group_id)
    if group is not None and group.members:
        return NON_EMPTY_GROUP, f"Share group {group_id} is not empty."
    return NONE, None


def _topic_id(ctx: RequestContext, name: str) -> tuple[uuid.UUID, int] | None:
    info = ctx.topics.info(name)
    return None if info is None else (info.topic_id, len(info.partitions))


# -- DescribeShareGroupOffsets -------------------------------------------------------------------


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, versions=(0, 1))
async def describe_share_group_offsets(
    ctx: RequestContext, req: protocol.Message
) -> protocol.Message:
    Resp = protocol.response_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    G = Resp.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    coord = share_coordinator(ctx.broker)
    groups = []
    for g in req.groups:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            groups.append(G(group_id=g.group_id, topics=[], error_code=GROUP_AUTHORIZATION_FAILED))
            continue
        error, message = _group_error(ctx, g.group_id)
        if error:
            groups.append(
                G(group_id=g.group_id, topics=[], error_code=error, error_message=message)
            )
            continue
        topics = []
        if g.topics is None:
            states = await admin.read_states(coord, g.group_id, admin.all_keys(coord, g.group_id))
            ends = await admin.high_watermarks(coord, states)
            by_topic: dict[uuid.UUID, list[int]] = {}
            for _g, tid, p in states:
                by_topic.setdefault(tid, []).append(p)
            for tid, parts in by_topic.items():
                name = ctx.topics.name_for_id(tid)
                if name is None or not ctx.authorize(
                    AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False
                ):
                    continue
                rows = []
                for p in sorted(parts):
                    info = admin.offset_info(
                        (g.group_id, tid, p), states[(g.group_id, tid, p)], ends
                    )
                    rows.append(
                        P(
                            partition_index=p,
                            start_offset=info.start_offset,
                            leader_epoch=info.leader_epoch,
                            lag=info.lag,
                            error_code=NONE,
                        )
                    )
                topics.append(T(topic_name=name, topic_id=tid, partitions=rows))
            topics.sort(key=lambda t: t.topic_name)
        else:
            keys: list[SpKey] = []
            for t in g.topics:
                meta = _topic_id(ctx, t.topic_name)
                if meta is not None:
                    keys.extend((g.group_id, meta[0], p) for p in t.partitions)
            states = await admin.read_states(coord, g.group_id, keys)
            ends = await admin.high_watermarks(coord, states)
            for t in g.topics:
                meta = _topic_id(ctx, t.topic_name)
                allowed = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic_name)
                rows = []
                for p in t.partitions:
                    if not allowed:
                        rows.append(
                            P(
                                partition_index=p,
                                start_offset=-1,
                                leader_epoch=-1,
                                lag=-1,
                                error_code=TOPIC_AUTHORIZATION_FAILED,
                            )
                        )
                        continue
                    got = admin.OffsetInfo(-1, -1, -1)
                    if meta is not None:
                        key = (g.group_id, meta[0], p)
                        got = admin.offset_info(key, states.get(key), ends)
                    rows.append(
                        P(
                            partition_index=p,
                            start_offset=got.start_offset,
                            leader_epoch=got.leader_epoch,
                            lag=got.lag,
                            error_code=NONE,
                        )
                    )
                tid = meta[0] if meta is not None and allowed else ZERO_UUID
                topics.append(T(topic_name=t.topic_name, topic_id=tid, partitions=rows))
        groups.append(G(group_id=g.group_id, topics=topics, error_code=NONE))
    return Resp(throttle_time_ms=0, groups=groups)


# -- AlterShareGroupOffsets ----------------------------------------------------------------------


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS, versions=(0, 0))
async def alter_share_group_offsets(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    Resp = protocol.response_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
    T = Resp.AlterShareGroupOffsetsResponseTopic
    P = T.AlterShareGroupOffsetsResponsePartition

    def failed(code: int, message: str | None = None) -> protocol.Message:
        return Resp(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    group_id = req.group_id
    error, message = _offsets_change_error(ctx, group_id, AclOperation.READ)
    if error:
        return failed(error, message)
    coord = share_coordinator(ctx.broker)
    results: dict[str, tuple[uuid.UUID, list[tuple[int, int, str | None]]]] = {}
    wanted: dict[SpKey, int] = {}
    for t in req.topics:
        meta = _topic_id(ctx, t.topic_name)
        code, text = NONE, None
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            code = TOPIC_AUTHORIZATION_FAILED
        elif meta is None:
            code = UNKNOWN_TOPIC_OR_PARTITION
        tid = meta[0] if meta is not None and code != TOPIC_AUTHORIZATION_FAILED else ZERO_UUID
        rows = results.setdefault(t.topic_name, (tid, []))[1]
        for p in t.partitions:
            if code:
                rows.append((p.partition_index, code, text))
            elif meta is None or not 0 <= p.partition_index < meta[1]:
                rows.append((p.partition_index, UNKNOWN_TOPIC_OR_PARTITION, None))
            elif p.start_offset < 0:
                rows.append((p.partition_index, INVALID_REQUEST, "The start offset is negative."))
            else:
                wanted[(group_id, meta[0], p.partition_index)] = p.start_offset
                rows.append((p.partition_index, NONE, None))
    if wanted:
        coord.group(group_id, create=True)  # as Kafka, altering offsets makes the group
        outcome = await admin.alter(coord, group_id, wanted)
        for tid, rows in results.values():
            for i, (p, code, _text) in enumerate(rows):
                got = outcome.get((group_id, tid, p))
                if code == NONE and got:
                    rows[i] = (p, got, None)
    return Resp(
        throttle_time_ms=0,
        error_code=NONE,
        error_message=None,
        responses=[
            T(
                topic_name=name,
                topic_id=tid,
                partitions=[
                    P(partition_index=p, error_code=code, error_message=text)
                    for p, code, text in rows
                ],
            )
            for name, (tid, rows) in results.items()
        ],
    )


# -- DeleteShareGroupOffsets ---------------------------------------------------------------------


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, versions=(0, 0))
async def delete_share_group_offsets(
    ctx: RequestContext, req: protocol.Message
) -> protocol.Message:
    Resp = protocol.response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
    T = Resp.DeleteShareGroupOffsetsResponseTopic

    def failed(code: int, message: str | None = None) -> protocol.Message:
        return Resp(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    group_id = req.group_id
    error, message = _offsets_change_error(ctx, group_id, AclOperation.DELETE)
    if error:
        return failed(error, message)
    coord = share_coordinator(ctx.broker)
    group = coord.group(group_id)
    topics: list[tuple[str, uuid.UUID, int, str | None]] = []
    todo: dict[str, list[SpKey]] = {}
    for t in req.topics:
        meta = _topic_id(ctx, t.topic_name)
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            topics.append((t.topic_name, ZERO_UUID, TOPIC_AUTHORIZATION_FAILED, None))
        elif meta is None:
            topics.append((t.topic_name, ZERO_UUID, UNKNOWN_TOPIC_OR_PARTITION, None))
        else:
            todo[t.topic_name] = [(group_id, meta[0], p) for p in range(meta[1])]
    states = await admin.read_states(coord, group_id, [k for ks in todo.values() for k in ks])
    if group is None and not states and not topics:
        return failed(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    for name, keys in todo.items():
        have = [k for k in keys if k in states]
        if not have:
            topics.append(
                (name, keys[0][1] if keys else ZERO_UUID, UNKNOWN_TOPIC_OR_PARTITION, NO_STATE)
            )
            continue
        outcome = await admin.delete_topics(coord, group_id, have)
        code = next((c for c in outcome.values() if c), NONE)
        topics.append((name, have[0][1], code, None))
    return Resp(
        throttle_time_ms=0,
        error_code=NONE,
        error_message=None,
        responses=[
            T(topic_name=name, topic_id=tid, error_code=code, error_message=text)
            for name, tid, code, text in topics
        ],
    )


# -- DeleteShareGroupState (broker to share coordinator) ----------------------------------------


@handles(ApiKey.DELETE_SHARE_GROUP_STATE, versions=(0, 0))
async def delete_share_group_state(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    Resp = protocol.response_class(ApiKey.DELETE_SHARE_GROUP_STATE)
    R = Resp.DeleteStateResult
    coord = share_coordinator(ctx.broker)
    denied = not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            key: SpKey = (req.group_id, topic.topic_id, p.partition)
            code = CLUSTER_AUTHORIZATION_FAILED if denied else coord.delete_stored(key)
            if not denied:
                coord.partitions.pop(key, None)
            parts.append(
                R.PartitionResult(partition=p.partition, error_code=code, error_message=None)
            )
        results.append(R(topic_id=topic.topic_id, partitions=parts))
    return Resp(results=results)
