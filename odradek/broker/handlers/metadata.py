"""Metadata (key 3), v0-13. v1 null topics = all, controller id; v2 cluster id; v4 auto-create
flag; v7 leader epochs; v9 flexible; v10 topic ids; v12 lookup by id (name null); v13 top-level
error code."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.topics import TopicError, check_topic_name
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

ZERO_UUID = uuid.UUID(int=0)
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
YIELD_EVERY = 512  # topics answered between yields to the event loop


def topic_metadata(
    broker: Broker, name: str, version: int
) -> protocol.MetadataResponse.MetadataResponseTopic:
    info = broker.topics.info(name)
    assert info is not None  # the caller found it
    R = protocol.MetadataResponse.MetadataResponseTopic
    P = R.MetadataResponsePartition
    live = set(broker.live_brokers())
    parts = []
    for idx, st in enumerate(info.partitions):
        leader_live = st.leader in live
        parts.append(
            P(
                error_code=ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=idx,
                leader_id=st.leader if leader_live else -1,
                leader_epoch=st.leader_epoch,
                replica_nodes=list(st.replicas),
                isr_nodes=[r for r in (st.isr or st.replicas) if r in live],
                offline_replicas=[r for r in st.replicas if r not in live],
            )
        )
    return R(
        error_code=ErrorCode.NONE,
        name=name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=parts,
    )


def _with_operations(
    ctx: RequestContext,
    topic: protocol.MetadataResponse.MetadataResponseTopic,
    version: int,
    req: protocol.MetadataRequest,
) -> protocol.MetadataResponse.MetadataResponseTopic:
    # v8+: what the principal may do on the topic; with no authorizer every operation, as Kafka
    # answers (librdkafka's describe_cluster / describe_topics read these from Metadata v8-10)
    if version >= 8 and req.include_topic_authorized_operations and not topic.error_code:
        topic.authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, topic.name)
    return topic


def error_topic(
    name: str | None, topic_id: uuid.UUID, code: ErrorCode
) -> protocol.MetadataResponse.MetadataResponseTopic:
    return protocol.MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[]
    )


async def _requested(ctx: RequestContext, wanted: list, version: int, auto_create: bool) -> list:
    """The topics asked for by name or id. Each is answered once (Kafka collects them in a set),
    and the loop yields every YIELD_EVERY topics so a request with 100,000 ids does not stop
    other clients from being served (issue 11)."""
    broker = ctx.broker
    checked = broker.authorizer is not None
    topics = []
    seen: set[object] = set()
    for n, t in enumerate(wanted):
        if n % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
        name = t.name
        key = name if name is not None else t.topic_id
        if key in seen:
            continue
        seen.add(key)
        if name is None:
            name = broker.topics.name_for_id(t.topic_id)
            if name is None:
                topics.append(error_topic(None, t.topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
        if checked and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            # before any existence check: a forbidden topic looks the same whether it exists
            denied_name = name if t.name is not None else None
            topics.append(error_topic(denied_name, ZERO_UUID, TOPIC_DENIED))
            continue
        try:
            check_topic_name(name)
        except TopicError:
            topics.append(error_topic(name, ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION))
            continue
        if broker.topics.info(name) is None:
            if not auto_create:
                topics.append(error_topic(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if checked and not (
                ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False)
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)
            ):
                topics.append(error_topic(name, ZERO_UUID, TOPIC_DENIED))
                continue
            try:
                broker.topics.create_topic(name, -1, -1)
            except TopicError as exc:
                topics.append(error_topic(name, ZERO_UUID, exc.code))
                continue
        topics.append(topic_metadata(broker, name, version))
    return topics


@handles(ApiKey.METADATA, versions=(0, 13))
async def metadata(ctx: RequestContext, req: protocol.MetadataRequest) -> protocol.MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    auto_create = broker.config.get("auto.create.topics.enable") and (
        version < 4 or req.allow_auto_topic_creation
    )
    if req.topics is None or (version == 0 and not req.topics):
        topics = []
        checked = broker.authorizer is not None
        for n, name in enumerate(sorted(broker.store.topics)):
            if n % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if checked and not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False
            ):
                continue  # all topics: the ones the principal may not describe are left out
            if broker.topics.info(name) is not None:  # not deleted while we yielded
                topics.append(topic_metadata(broker, name, version))
    else:
        topics = await _requested(ctx, req.topics, version, auto_create)
    brokers = [
        protocol.MetadataResponse.MetadataResponseBroker(node_id=n, host=h, port=p, rack=r)
        for n, h, p, r in broker.broker_endpoints(ctx.listener)
    ]
    topics = [_with_operations(ctx, t, version, req) for t in topics]
    resp = protocol.MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        topics=topics,
        error_code=ErrorCode.NONE,
    )
    if 8 <= version <= 10 and req.include_cluster_authorized_operations:
        resp.authorized_operations = ctx.cluster_operations()
    return resp
