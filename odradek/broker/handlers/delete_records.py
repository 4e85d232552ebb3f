"""DeleteRecords (key 21) v0-2 (KIP-107): move a partition's log start offset forward.

v1 may throttle (never here); v2 is flexible. Offset -1 means the high watermark; any other
negative offset, or one above the high watermark, is OFFSET_OUT_OF_RANGE. The answer's
low_watermark is the new log start offset. As in Kafka's ReplicaManager, internal topics are
INVALID_TOPIC_EXCEPTION and a topic whose cleanup.policy lacks `delete` is POLICY_VIOLATION.
Segments wholly below the new start are deleted; waiting fetches are woken so a consumer below
the new start learns OFFSET_OUT_OF_RANGE at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.topics import INTERNAL_TOPICS
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1

Resp: TypeAlias = protocol.DeleteRecordsResponse
TopicResult: TypeAlias = protocol.DeleteRecordsResponse.DeleteRecordsTopicResult
PartResult = TopicResult.DeleteRecordsPartitionResult


def delete_one(broker: Broker, topic: str, index: int, offset: int) -> tuple[ErrorCode, int]:
    """(error, low watermark) for one partition, as Kafka's Partition.deleteRecordsOnLeader."""
    info = broker.topics.info(topic)
    if info is None or not 0 <= index < len(info.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if info.internal or topic in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
    part = broker.topics.get(topic, index)
    if part is None or not part.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    lg = part.log
    if not lg.config.delete:
        return ErrorCode.POLICY_VIOLATION, -1
    target = part.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > part.high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    if target > lg.log_start_offset:
        lg.advance_log_start(target)
        log.info(
            "log start offset of %s-%d moved to %d by DeleteRecords",
            topic,
            index,
            lg.log_start_offset,
        )
        part.wake()
    return ErrorCode.NONE, lg.log_start_offset


@handles(ApiKey.DELETE_RECORDS, versions=(0, 2))
async def delete_records(
    ctx: RequestContext, req: protocol.DeleteRecordsRequest
) -> protocol.DeleteRecordsResponse:
    topics = []
    for t in req.topics:
        parts = []
        allowed = ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            if allowed:
                code, low = delete_one(ctx.broker, t.name, p.partition_index, p.offset)
            else:
                code, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            parts.append(
                PartResult(partition_index=p.partition_index, low_watermark=low, error_code=code)
            )
        topics.append(TopicResult(name=t.name, partitions=parts))
    return Resp(throttle_time_ms=0, topics=topics)
