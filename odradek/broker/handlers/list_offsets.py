"""ListOffsets (key 2), v0-11 (Kafka 4.4's maximum). Timestamps: -2 earliest (log start
offset), -1 latest (high watermark, or last stable offset for read_committed, v2+), -3 max
timestamp (v7, KIP-734), -4 earliest local (v8, KIP-405), -5 latest tiered (v9, KIP-1005: no
tiered storage, so -1), -6 earliest pending upload (v11, KIP-1023: nothing waits for an upload,
so -1, as Kafka answers for a topic without remote storage); v4 current leader epoch; v6
flexible; v10 TimeoutMs (KIP-1075, for offsets looked up in remote storage: nothing is remote
here, so every answer is immediate). A timestamp past the last record answers -1; any other
negative timestamp (and -6 below v11) UNSUPPORTED_VERSION, as Kafka 4.4.

A new leader whose high watermark is still below the start offset of its leader epoch answers a
client's LATEST, and a timestamp lookup that finds nothing below the high watermark,
OFFSET_NOT_AVAILABLE (retriable), as Kafka's Partition.fetchOffsetForTimestamp: else the end of
the partition could be seen moving back after a leader change. Fetch has no such guard in Kafka
(it serves up to the high watermark, returning nothing beyond it), nor here.

v0 (Kafka 0.8's offset request, still served by Kafka 3.9) asks for up to `max_num_offsets`
offsets before a time and answers a list (`old_style_offsets`), newest first, as Kafka's
UnifiedLog.legacyFetchOffsetsBefore: the candidates are each segment's base offset (at least the
log start offset) stamped with the segment file's modification time, plus the log end offset
stamped now when the active segment is not empty. -1 (latest) starts from the newest candidate,
-2 (earliest) from the oldest, a time from the newest candidate not after it; the answer walks
back from there. A consumer's answer (replica id -1) never shows an offset past the high
watermark: those are replaced by the high watermark (Partition.legacyFetchOffsetsForTimestamp).
Other negative timestamps answer UNSUPPORTED_VERSION."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.leader_discovery import leader_epoch_error
from odradek.clock import now_ms
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker
    from odradek.log.log import Log

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1

Resp: TypeAlias = protocol.ListOffsetsResponse
TopicResp: TypeAlias = protocol.ListOffsetsResponse.ListOffsetsTopicResponse
PartResp: TypeAlias = (
    protocol.ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
)  # noqa: E501


def _not_here(broker: Broker, topic: str, index: int) -> ErrorCode:
    """A partition this broker does not host: NOT_LEADER_OR_FOLLOWER when the topic has it (below
    its partition count), else UNKNOWN_TOPIC_OR_PARTITION."""
    info = broker.topics.info(topic)
    if info is not None and index < len(info.partitions):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def list_offset(
    broker: Broker,
    topic: str,
    p: protocol.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition,
    isolation: int,
    replica_id: int,
    version: int = 11,
) -> PartResp:
    def answer(
        code: int = ErrorCode.NONE, ts: int = -1, offset: int = -1, epoch: int = -1
    ) -> PartResp:
        return PartResp(
            partition_index=p.partition_index,
            error_code=code,
            timestamp=ts,
            offset=offset,
            leader_epoch=epoch,
        )

    part = broker.topics.get(topic, p.partition_index)
    if part is None:
        return answer(_not_here(broker, topic, p.partition_index))
    if not part.is_leader:
        return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    fenced = leader_epoch_error(p.current_leader_epoch, part.leader_epoch)
    if fenced is not None:
        return answer(fenced)
    lg = part.log
    epoch = part.leader_epoch
    if replica_id >= 0:
        fetchable = lg.log_end_offset
    elif isolation == READ_COMMITTED:
        fetchable = part.last_stable_offset
    else:
        fetchable = part.high_watermark
    # a new leader that has not learned the high watermark yet (Partition.fetchOffsetForTimestamp)
    lagging = replica_id < 0 and part.high_watermark_lagging
    ts = p.timestamp
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return answer(offset=lg.log_start_offset, epoch=epoch)
    if ts == LATEST:
        if lagging:
            return answer(ErrorCode.OFFSET_NOT_AVAILABLE)
        return answer(offset=fetchable, epoch=epoch)
    if ts == LATEST_TIERED or (ts == EARLIEST_PENDING_UPLOAD and version >= 11):
        return answer()
    if ts == MAX_TIMESTAMP:
        found = lg.max_timestamp_offset()
    elif ts >= 0:
        found = lg.offset_for_timestamp(ts)
    else:
        return answer(ErrorCode.UNSUPPORTED_VERSION)
    if found is None or found[0] >= fetchable:
        # beyond what may be served: while lagging it may lie below the real high watermark
        return answer(ErrorCode.OFFSET_NOT_AVAILABLE) if lagging else answer()
    return answer(ts=found[1], offset=found[0], epoch=epoch)


CONSUMER, DEBUGGING = -1, -2  # replica ids of ListOffsets v0


def legacy_offsets_before(lg: Log, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """Kafka's UnifiedLog.legacyFetchOffsetsBefore: up to `max_num_offsets` offsets, descending."""
    candidates = []
    for seg in list(lg.segments):
        try:
            modified = os.stat(seg.path).st_mtime_ns // 1_000_000
        except OSError:  # deleted by retention meanwhile
            modified = seg.created_ms
        candidates.append((max(seg.base_offset, lg.log_start_offset), modified))
    if lg.segments and lg.segments[-1].size > 0:
        candidates.append((lg.log_end_offset, now_ms))
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    return sorted((candidates[start - j][0] for j in range(count)), reverse=True)


def list_offset_v0(
    broker: Broker,
    topic: str,
    p: protocol.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition,
    replica_id: int,
) -> PartResp:
    def answer(code: int = ErrorCode.NONE, offsets: list[int] | None = None) -> PartResp:
        return PartResp(
            partition_index=p.partition_index, error_code=code, old_style_offsets=offsets or []
        )

    if p.timestamp < EARLIEST:  # v0 knows only latest (-1) and earliest (-2)
        return answer(ErrorCode.UNSUPPORTED_VERSION)
    part = broker.topics.get(topic, p.partition_index)
    if part is None:
        return answer(_not_here(broker, topic, p.partition_index))
    if not part.is_leader and replica_id != DEBUGGING:
        return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    now = now_ms()
    offsets = legacy_offsets_before(part.log, p.timestamp, p.max_num_offsets, now)
    if replica_id == CONSUMER:
        hw = part.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
    return answer(offsets=offsets)


@handles(ApiKey.LIST_OFFSETS, versions=(0, 11))
async def list_offsets(
    ctx: RequestContext, req: protocol.ListOffsetsRequest
) -> protocol.ListOffsetsResponse:
    broker = ctx.broker
    if ctx.api_version == 0:
        return Resp(
            topics=[
                TopicResp(
                    name=t.name,
                    partitions=[
                        list_offset_v0(broker, t.name, p, req.replica_id) for p in t.partitions
                    ]
                    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
                    else [
                        PartResp(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            old_style_offsets=[],
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ]
        )
    isolation = req.isolation_level if ctx.api_version >= 2 else 0
    topics = [
        TopicResp(
            name=t.name,
            partitions=[
                list_offset(broker, t.name, p, isolation, req.replica_id, ctx.api_version)
                for p in t.partitions
            ]
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
            else [
                PartResp(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return Resp(throttle_time_ms=0, topics=topics)
