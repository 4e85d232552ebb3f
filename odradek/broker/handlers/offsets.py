"""Committed offsets of consumer groups, answered by the group coordinator.

OffsetCommit (key 8), v2-9: v2-4 retention_time_ms (KIP-211: a commit with a retention expires
on its own); v3 throttle time; v5 drops retention; v6 committed_leader_epoch (KIP-320);
v7 group_instance_id (KIP-345); v8 flexible; v9 GROUP_ID_NOT_FOUND for an unknown group with a
generation (KIP-848); a consumer-protocol group checks the member id and epoch
(STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; UNSUPPORTED_VERSION below v9). Commits to unknown
topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.
OffsetFetch (key 9), v1-9: v2 null topics = every committed offset, top-level error; v3 throttle
time; v5 leader epoch; v6 flexible; v7 require_stable (KIP-447); v8 several groups (KIP-709);
v9 member id and epoch (KIP-848: checked for consumer-protocol groups, ignored by classic ones).
OffsetDelete (key 47), v0 (KIP-496).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import offsets_replicated
from odradek.coordinator.group.metadata import OffsetAndMetadata
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker


def _topic_ok(ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    return ctx.authorize(operation, ResourceType.TOPIC, topic)


def _partition_exists(broker: Broker, topic: str, index: int) -> bool:
    info = broker.topics.info(topic)
    return info is not None and 0 <= index < len(info.partitions)


# -- OffsetCommit ------------------------------------------------------------------------------


@handles(ApiKey.OFFSET_COMMIT, versions=(2, 9))
async def offset_commit(
    ctx: RequestContext, req: protocol.OffsetCommitRequest
) -> protocol.OffsetCommitResponse:
    version = ctx.api_version
    broker = ctx.broker
    Resp = protocol.OffsetCommitResponse
    TopicResp = Resp.OffsetCommitResponseTopic
    PartResp = TopicResp.OffsetCommitResponsePartition
    now = int(time.time() * 1000)
    retention = req.retention_time_ms if 2 <= version <= 4 else -1
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: dict[tuple[str, int], OffsetAndMetadata] = {}
    group_ok = ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id)
    for t in req.topics:
        topic_ok = group_ok and _topic_ok(ctx, AclOperation.READ, t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if not topic_ok:  # the group denied: every partition 30; a topic denied: 29
                errors[tp] = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if group_ok
                    else ErrorCode.GROUP_AUTHORIZATION_FAILED
                )
                continue
            if not _partition_exists(broker, t.name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            valid[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now,
                expire_timestamp=now + retention if retention >= 0 else -1,
            )
    if valid:
        coord = ctx.group_coordinator
        if coord is None:
            errors.update(dict.fromkeys(valid, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        else:
            written, pending = coord.prepare_offset_commit(
                req.group_id,
                req.member_id,
                req.group_instance_id if version >= 7 else None,
                req.generation_id_or_member_epoch,
                valid,
                version,
            )
            errors.update(written)
            if pending is not None:
                # visible to OffsetFetch only once the ISR has it (Kafka's storeOffsets callback)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
                try:
                    error = await offsets_replicated(ctx.broker, req.group_id)
                finally:
                    coord.complete_offset_commit(pending, error)
                if error != ErrorCode.NONE:
                    errors.update(dict.fromkeys(pending.offsets, error))
    return Resp(
        throttle_time_ms=0,
        topics=[
            TopicResp(
                name=t.name,
                partitions=[
                    PartResp(
                        partition_index=p.partition_index,
                        error_code=errors[(t.name, p.partition_index)],
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


# -- OffsetFetch -------------------------------------------------------------------------------


def _fetch_group(
    ctx: RequestContext,
    group_id: str,
    topics: list[protocol.OffsetFetchRequest.OffsetFetchRequestTopic] | None,
    require_stable: bool,
) -> tuple[ErrorCode, dict[str, list[tuple[int, int, int, str | None, ErrorCode]]]]:
    """(error, {topic: [(partition, offset, epoch, metadata, error)]}) for one group."""
    coord = ctx.group_coordinator
    partitions = (
        None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    )
    checked = ctx.broker.authorizer is not None
    if checked and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    if coord is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
    denied: set[str] = set()
    if checked and partitions is not None:
        denied = {t for t, _ in partitions if not _topic_ok(ctx, AclOperation.DESCRIBE, t)}
        partitions = [tp for tp in partitions if tp[0] not in denied]
    error, fetched = coord.fetch_offsets(group_id, partitions, require_stable)
    by_topic: dict[str, list] = {}
    for f in fetched:
        if checked and topics is None and f.topic not in by_topic:
            # every committed offset: topics the principal may not describe are left out
            if not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, f.topic, log_if_denied=False
            ):
                continue
        by_topic.setdefault(f.topic, []).append(
            (f.partition, f.offset, f.leader_epoch, f.metadata, f.error)
        )
    if denied and topics is not None:
        for t in topics:
            if t.name in denied:
                by_topic[t.name] = [
                    (p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in t.partition_indexes
                ]
    return error, by_topic


@handles(ApiKey.OFFSET_FETCH, versions=(1, 9))
async def offset_fetch(
    ctx: RequestContext, req: protocol.OffsetFetchRequest
) -> protocol.OffsetFetchResponse:
    version = ctx.api_version
    Resp = protocol.OffsetFetchResponse
    require_stable = bool(req.require_stable) if version >= 7 else False
    if version >= 8:
        G = Resp.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in req.groups:
            error, by_topic = _fetch_group(ctx, g.group_id, g.topics, require_stable)
            if version >= 9 and error == ErrorCode.NONE and ctx.group_coordinator is not None:
                # a KIP-848 member fetches with its member id and epoch (STALE_MEMBER_EPOCH)
                stale = ctx.group_coordinator.consumer.validate_offset_fetch(
                    g.group_id, g.member_id, g.member_epoch
                )
                if stale is not None:
                    error, by_topic = stale, {}
            groups.append(
                G(
                    group_id=g.group_id,
                    error_code=error,
                    topics=[]
                    if error
                    else [
                        T(
                            name=name,
                            partitions=[
                                P(
                                    partition_index=p,
                                    committed_offset=o,
                                    committed_leader_epoch=e,
                                    metadata=m,
                                    error_code=pe,
                                )
                                for p, o, e, m, pe in parts
                            ],
                        )
                        for name, parts in by_topic.items()
                    ],
                )
            )
        return Resp(throttle_time_ms=0, groups=groups)
    T = Resp.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    topics = req.topics if version >= 2 else list(req.topics or [])
    error, by_topic = _fetch_group(ctx, req.group_id, topics, require_stable)
    if error != ErrorCode.NONE:
        if version >= 2:
            return Resp(throttle_time_ms=0, error_code=error, topics=[])
        # v1 has no top-level error: every requested partition carries it
        by_topic = {t.name: [(p, -1, -1, "", error) for p in t.partition_indexes] for t in topics}
        error = ErrorCode.NONE
    return Resp(
        throttle_time_ms=0,
        error_code=error,
        topics=[
            T(
                name=name,
                partitions=[
                    P(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=e,
                        metadata=m,
                        error_code=pe,
                    )
                    for p, o, e, m, pe in parts
                ],
            )
            for name, parts in by_topic.items()
        ],
    )


# -- OffsetDelete ------------------------------------------------------------------------------


@handles(ApiKey.OFFSET_DELETE, versions=(0, 0))
async def offset_delete(
    ctx: RequestContext, req: protocol.OffsetDeleteRequest
) -> protocol.OffsetDeleteResponse:
    broker = ctx.broker
    Resp = protocol.OffsetDeleteResponse
    TopicResp = Resp.OffsetDeleteResponseTopic
    PartResp = TopicResp.OffsetDeleteResponsePartition
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted = []
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return Resp(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    for t in req.topics:
        topic_ok = _topic_ok(ctx, AclOperation.READ, t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if not topic_ok:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif _partition_exists(broker, t.name, p.partition_index):
                wanted.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    coord = ctx.group_coordinator
    if coord is None:
        top, deleted = ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
    else:
        top, deleted = coord.delete_offsets(req.group_id, wanted)
    if top != ErrorCode.NONE:
        return Resp(error_code=top, throttle_time_ms=0, topics=[])
    errors.update(deleted)
    return Resp(
        error_code=ErrorCode.NONE,
        throttle_time_ms=0,
        topics=[
            TopicResp(
                name=t.name,
                partitions=[
                    PartResp(
                        partition_index=p.partition_index,
                        error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )
