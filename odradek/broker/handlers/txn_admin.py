"""Transaction administration (KIP-664): what `kafka-transactions.sh` and the Admin client ask.

DescribeProducers (key 61), v0: the active producers of partitions this broker leads, from their
producer state (id, epoch, last sequence and timestamp, coordinator epoch, open transaction).
DescribeTransactions (key 65), v0: the coordinator's state of transactional ids.
ListTransactions (key 66), v0-2 (Kafka 4.1's maximum): transactional ids filtered by state and
producer id; v1 adds a minimum duration (KIP-994); v2 a transactional id pattern (KIP-1152), a
regular expression the whole id must match (null or empty: no filter; one that does not compile
is INVALID_REGULAR_EXPRESSION).
"""

from __future__ import annotations

import re

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode


@handles(ApiKey.DESCRIBE_PRODUCERS, versions=(0, 0))
async def describe_producers(
    ctx: RequestContext, req: protocol.DescribeProducersRequest
) -> protocol.DescribeProducersResponse:
    Resp = protocol.DescribeProducersResponse
    TopicResp = Resp.TopicResponse
    PartResp = TopicResp.PartitionResponse
    State = PartResp.ProducerState
    broker = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        info = broker.topics.info(t.name)
        allowed = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
        for index in t.partition_indexes:
            part = broker.topics.get(t.name, index)
            if not allowed:
                parts.append(
                    PartResp(
                        partition_index=index,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            if part is None or not part.is_leader:
                known = info is not None and 0 <= index < len(info.partitions)
                error = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if known
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                parts.append(
                    PartResp(
                        partition_index=index,
                        error_code=error,
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            producers = [
                State(
                    producer_id=e.producer_id,
                    producer_epoch=e.epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.txn_first_offset,
                )
                for e in sorted(
                    part.log.producer_state.producers.values(), key=lambda e: e.producer_id
                )
            ]
            parts.append(
                PartResp(
                    partition_index=index,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(TopicResp(name=t.name, partitions=parts))
    return Resp(throttle_time_ms=0, topics=topics)


@handles(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0))
async def describe_transactions(
    ctx: RequestContext, req: protocol.DescribeTransactionsRequest
) -> protocol.DescribeTransactionsResponse:
    Resp = protocol.DescribeTransactionsResponse
    State = Resp.TransactionState
    Topic = State.TopicData
    coord = ctx.txn_coordinator
    states = []
    for tid in req.transactional_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            error, desc = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        else:
            error, desc = coord.describe(tid)
        if desc is None:
            # Kafka's TransactionCoordinator answers with the schema's zeros, not -1
            states.append(
                State(
                    error_code=error,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=0,
                    producer_id=0,
                    producer_epoch=0,
                    topics=[],
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in desc.partitions:
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_if_denied=False):
                by_topic.setdefault(topic, []).append(index)
        states.append(
            State(
                error_code=ErrorCode.NONE,
                transactional_id=tid,
                transaction_state=desc.state,
                transaction_timeout_ms=desc.timeout_ms,
                transaction_start_time_ms=desc.start_ms,
                producer_id=desc.producer_id,
                producer_epoch=desc.producer_epoch,
                topics=[Topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return Resp(throttle_time_ms=0, transaction_states=states)


@handles(ApiKey.LIST_TRANSACTIONS, versions=(0, 2))
async def list_transactions(
    ctx: RequestContext, req: protocol.ListTransactionsRequest
) -> protocol.ListTransactionsResponse:
    Resp = protocol.ListTransactionsResponse
    coord = ctx.txn_coordinator
    duration = req.duration_filter if ctx.api_version >= 1 else -1
    pattern = req.transactional_id_pattern if ctx.api_version >= 2 else None
    matcher = None
    if pattern:
        try:
            matcher = re.compile(pattern)
        except re.error:
            return Resp(
                throttle_time_ms=0,
                error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                unknown_state_filters=[],
                transaction_states=[],
            )
    error, unknown, found = coord.list_transactions(
        list(req.state_filters or []), list(req.producer_id_filters or []), duration
    )
    if matcher is not None:
        found = [t for t in found if matcher.fullmatch(t[0]) is not None]
    return Resp(
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            Resp.TransactionState(transactional_id=tid, producer_id=pid, transaction_state=state)
            for tid, pid, state in found
            if ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid, log_if_denied=False
            )
        ],
    )
