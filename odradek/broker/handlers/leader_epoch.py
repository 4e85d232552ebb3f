"""OffsetForLeaderEpoch (key 23), v0-4 (KIP-101, KIP-279, KIP-320). v1 answers the leader epoch
as well as the end offset (v0 only the offset); v2 current leader epoch (fencing) and throttle
time; v3 replica id (followers say who they are); v4 flexible.

For each partition the leader answers the largest epoch it knows that is <= the requested one,
and where that epoch ends in its log: the start offset of the next epoch, or the log end offset
for its latest epoch. Followers truncate to it after a leader change; consumers use it to
detect truncation (KIP-320). Only the leader answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.leader_discovery import leader_epoch_error
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

UNDEFINED = -1

Resp: TypeAlias = protocol.OffsetForLeaderEpochResponse
TopicResult: TypeAlias = protocol.OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset: TypeAlias = (
    protocol.OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset
)  # noqa: E501


def end_offset_for(
    entries: list[tuple[int, int]], requested: int, log_end_offset: int
) -> tuple[int, int]:
    """(epoch, end offset) for `requested` over leader-epoch cache entries (epoch, start
    offset), as Kafka's LeaderEpochFileCache.endOffsetFor."""
    if requested < 0 or not entries:
        return UNDEFINED, UNDEFINED
    if entries[-1][0] == requested:
        return requested, log_end_offset
    higher = next(((e, s) for e, s in entries if e > requested), None)
    if higher is None:  # newer than anything this log knows
        return UNDEFINED, UNDEFINED
    floor = None
    for e, s in entries:
        if e <= requested:
            floor = (e, s)
    if floor is None:  # older than anything this log knows: it ends where the log begins
        return requested, higher[1]
    return floor[0], higher[1]


def _answer(
    broker: Broker,
    topic: str,
    p: protocol.OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition,
) -> EpochEndOffset:
    def out(
        code: int = ErrorCode.NONE, epoch: int = UNDEFINED, end: int = UNDEFINED
    ) -> EpochEndOffset:
        return EpochEndOffset(
            error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end
        )

    part = broker.topics.get(topic, p.partition)
    if part is None:
        info = broker.topics.info(topic)
        if info is not None and 0 <= p.partition < len(info.partitions):
            return out(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return out(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not part.is_leader:
        return out(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    fenced = leader_epoch_error(p.current_leader_epoch, part.leader_epoch)
    if fenced is not None:
        return out(fenced)
    lg = part.log
    epoch, end = end_offset_for(lg.epochs.entries, p.leader_epoch, lg.log_end_offset)
    return out(epoch=epoch, end=end)


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(0, 4))
async def offset_for_leader_epoch(
    ctx: RequestContext, req: protocol.OffsetForLeaderEpochRequest
) -> protocol.OffsetForLeaderEpochResponse:
    broker = ctx.broker
    replica = broker.authorizer is None or ctx.authorize_cluster(
        AclOperation.CLUSTER_ACTION, log_if_denied=False
    )
    topics = [
        TopicResult(
            topic=t.topic,
            partitions=[_answer(broker, t.topic, p) for p in t.partitions]
            if replica or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
            else [
                EpochEndOffset(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    partition=p.partition,
                    leader_epoch=UNDEFINED,
                    end_offset=UNDEFINED,
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return Resp(throttle_time_ms=0, topics=topics)
