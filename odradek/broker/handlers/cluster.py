"""DescribeCluster (key 60) v0-2 and DescribeTopicPartitions (key 75) v0.

DescribeCluster (KIP-700): flexible from v0; v1 adds endpoint_type (KIP-919: 1 broker,
2 controller; this is a broker endpoint); v2 adds include_fenced_brokers and is_fenced (KIP-1073;
no broker is ever fenced here). Authorized operations are Int.MinValue unless asked for; then,
with no authorizer, every operation the CLUSTER resource supports, as Kafka's AuthHelper answers.

DescribeTopicPartitions (KIP-966): topic metadata paged by partitions. An empty topic list means
every topic; topics are answered in name order starting at the cursor's topic and partition, up
to response_partition_limit partitions (at most 2000, Kafka's max.request.partition.size.limit),
with next_cursor where the next page starts. Eligible leader replicas are always empty: ELR is
not implemented.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.topics import INTERNAL_TOPICS, TopicError, check_topic_name
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import PartitionState

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
INT32_MIN = -2147483648
MAX_PARTITION_LIMIT = 2000

ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2
ENDPOINT_NAMES = {ENDPOINT_BROKER: "BROKER", ENDPOINT_CONTROLLER: "CONTROLLER"}

# -- DescribeCluster ----------------------------------------------------------------------------

CResp: TypeAlias = protocol.DescribeClusterResponse


@handles(ApiKey.DESCRIBE_CLUSTER, versions=(0, 2))
async def describe_cluster(
    ctx: RequestContext, req: protocol.DescribeClusterRequest
) -> protocol.DescribeClusterResponse:
    broker = ctx.broker
    version = ctx.api_version
    wanted = req.endpoint_type if version >= 1 else ENDPOINT_BROKER
    if wanted != ENDPOINT_BROKER:
        if wanted in ENDPOINT_NAMES:
            code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
            message = (
                f"The request was sent to an endpoint of type BROKER, but we wanted an "
                f"endpoint of type {ENDPOINT_NAMES[wanted]}"
            )
        else:
            code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {wanted}"
        return CResp(
            throttle_time_ms=0,
            error_code=code if version >= 1 else ErrorCode.INVALID_REQUEST,
            error_message=message,
            endpoint_type=ENDPOINT_BROKER,
            cluster_id="",
            controller_id=-1,
            brokers=[],
            authorized_operations=None,
        )
    # kafka-python names the field authorized_operations and takes the set of operation codes;
    # None encodes Int.MinValue ("not asked for").
    ops = ctx.cluster_operations() if req.include_cluster_authorized_operations else None
    brokers = [
        CResp.DescribeClusterBroker(broker_id=n, host=h, port=p, rack=r, is_fenced=False)
        for n, h, p, r in broker.broker_endpoints(ctx.listener)
    ]
    return CResp(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_BROKER,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        brokers=brokers,
        authorized_operations=ops,
    )


# -- DescribeTopicPartitions --------------------------------------------------------------------

TResp: TypeAlias = protocol.DescribeTopicPartitionsResponse
TTopic: TypeAlias = protocol.DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
TPart = TTopic.DescribeTopicPartitionsResponsePartition


def _partition(idx: int, st: PartitionState, live: set[int]) -> object:
    leader_live = st.leader in live
    return TPart(
        error_code=ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=idx,
        leader_id=st.leader if leader_live else -1,
        leader_epoch=st.leader_epoch,
        replica_nodes=list(st.replicas),
        isr_nodes=[r for r in (st.isr or st.replicas) if r in live],
        eligible_leader_replicas=[],
        last_known_elr=[],
        offline_replicas=[r for r in st.replicas if r not in live],
    )


def _error_topic(name: str | None, code: ErrorCode) -> protocol.Message:
    return TTopic(
        error_code=code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
        topic_authorized_operations=INT32_MIN,
    )


def _missing_topic_code(name: str) -> ErrorCode:
    try:
        check_topic_name(name)
    except TopicError as exc:
        return exc.code
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _page(
    ctx: RequestContext,
    names: list[str],
    cursor: protocol.DescribeTopicPartitionsRequest.Cursor | None,
    limit: int,
    fetch_all: bool,
) -> tuple[list[protocol.Message], protocol.Message | None]:
    """Topics from the cursor on, at most `limit` partitions; (topics, next cursor)."""
    broker = ctx.broker
    live = set(broker.live_brokers())
    remaining = limit
    out: list[TTopic] = []
    for name in names:
        if remaining <= 0:
            return out, TResp.Cursor(topic_name=name, partition_index=0)
        if broker.authorizer is not None and not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=not fetch_all
        ):
            if not fetch_all:  # named: denied before existence is revealed; all: left out
                out.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        info = broker.topics.info(name)
        if info is None:
            if not fetch_all:
                out.append(_error_topic(name, _missing_topic_code(name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = list(range(start, len(info.partitions)))
        page, rest = indexes[:remaining], indexes[remaining:]
        out.append(
            TTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=info.topic_id,
                is_internal=info.internal,
                partitions=[_partition(i, info.partitions[i], live) for i in page],
                topic_authorized_operations=ctx.authorized_operations_bits(
                    ResourceType.TOPIC, name
                ),
            )
        )
        if rest:
            return out, TResp.Cursor(topic_name=name, partition_index=rest[0])
        remaining -= len(page)
    return out, None


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS, versions=(0, 0))
async def describe_topic_partitions(
    ctx: RequestContext, req: protocol.DescribeTopicPartitionsRequest
) -> protocol.DescribeTopicPartitionsResponse:
    broker = ctx.broker
    cursor = req.cursor
    fetch_all = not req.topics
    start = cursor.topic_name if cursor is not None else ""
    if fetch_all:
        names = sorted(n for n in broker.store.topics if n >= start)
    else:
        names = sorted({t.name for t in req.topics if t.name >= start})
    problem = None
    if cursor is not None and not fetch_all and cursor.topic_name not in names:
        problem = (
            "DescribeTopicPartitionsRequest topic list should contain the cursor topic: "
            f"{cursor.topic_name}"
        )
    elif cursor is not None and cursor.partition_index < 0:
        problem = f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor}"
    if problem is not None:
        log.info("DescribeTopicPartitions from %s refused: %s", ctx.client_id, problem)
        return TResp(
            throttle_time_ms=0,
            next_cursor=None,
            topics=[_error_topic(t.name, ErrorCode.INVALID_REQUEST) for t in req.topics],
        )
    # A limit below 1 would page forever on the first topic; Kafka's default is 2000.
    limit = max(1, min(MAX_PARTITION_LIMIT, req.response_partition_limit))
    topics, next_cursor = _page(ctx, names, cursor, limit, fetch_all)
    return TResp(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
