"""Metadata (key 3), v0-13. v1 null topics = all, controller id; v2 cluster id; v4 auto-create
flag; v7 leader epochs; v9 flexible; v10 topic ids; v12 lookup by id (name null); v13 top-level
error code.

The topics of the answer are encoded here by hand (`encode_topic`), not built as kafka-python
objects and encoded by its generic encoder: with 10,000 partitions that took ~300 ms per full
Metadata request, this ~10x less (`python -m bench.scale`). `EncodedTopics` splices
them into the rest of the response, which kafka-python still encodes. Per topic, as Kafka's
MetadataResponse.json:

    error_code int16 | name string (compact from v9, nullable from v12) | topic_id uuid (v10+)
    | is_internal bool (v1+) | partitions [] | topic_authorized_operations int32 (v8+)
    | tagged fields (v9+)
    partition: error_code int16 | partition_index int32 | leader_id int32
    | leader_epoch int32 (v7+) | replica_nodes []int32 | isr_nodes []int32
    | offline_replicas []int32 (v5+) | tagged fields (v9+)
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import TYPE_CHECKING

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.topics import TopicError, check_topic_name
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode
from odradek.wire.varint import encode_uvarint

if TYPE_CHECKING:
    from odradek.broker.server import Broker

ZERO_UUID = uuid.UUID(int=0)
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
YIELD_EVERY = 512  # topics answered between yields to the event loop


NO_OPERATIONS = -(2**31)  # topic_authorized_operations when not asked for
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id
_PARTITION_HEAD_EPOCH = struct.Struct(">hiii")  # ... leader_epoch (v7+)


def _count(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _I32.pack(n)


def _int32s(values: list[int], flexible: bool) -> bytes:
    head = _count(len(values), flexible)
    if not values:
        return head
    return head + struct.pack(f">{len(values)}i", *values)


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def encode_topic(
    version: int,
    error_code: int,
    name: str | None,
    topic_id: uuid.UUID,
    internal: bool,
    partitions: list[tuple[ErrorCode, int, int, int, list[int], list[int], list[int]]],
    operations: int = NO_OPERATIONS,
) -> bytes:
    """One MetadataResponseTopic; partitions are (error_code, index, leader, leader_epoch,
    replicas, isr, offline)."""
    flexible = version >= 9
    out = [_I16.pack(error_code), _string(name, flexible)]
    if version >= 10:
        out.append(topic_id.bytes)
    if version >= 1:
        out.append(b"\x01" if internal else b"\x00")
    out.append(_count(len(partitions), flexible))
    for code, idx, leader, epoch, replicas, isr, offline in partitions:
        if version >= 7:
            out.append(_PARTITION_HEAD_EPOCH.pack(code, idx, leader, epoch))
        else:
            out.append(_PARTITION_HEAD.pack(code, idx, leader))
        out.append(_int32s(replicas, flexible))
        out.append(_int32s(isr, flexible))
        if version >= 5:
            out.append(_int32s(offline, flexible))
        if flexible:
            out.append(b"\x00")
    if version >= 8:
        out.append(_I32.pack(operations))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


class EncodedTopics:
    """A Metadata response whose topics are already encoded: `head` is the rest (kafka-python's
    MetadataResponse with no topics), into whose encoding they are spliced. Quotas set
    `throttle_time_ms` on it as on any response."""

    def __init__(
        self, head: protocol.MetadataResponse, topics: list[bytes], codes: list[int]
    ) -> None:
        self.head = head
        self.topics = topics
        self.codes = codes  # the topics' and partitions' error codes other than NONE

    def error_codes(self) -> list[int]:
        """For the request metrics (odradek_errors_total), which cannot see into the bytes."""
        return [int(self.head.error_code or 0), *self.codes]

    @property
    def throttle_time_ms(self) -> int:
        return int(self.head.throttle_time_ms or 0)

    @throttle_time_ms.setter
    def throttle_time_ms(self, value: int) -> None:
        self.head.throttle_time_ms = value

    @property
    def error_code(self) -> int:
        return int(self.head.error_code or 0)

    def encode(self, version: int) -> bytes:
        body = bytes(self.head.encode(version=version))
        # after the topics array: cluster_authorized_operations (v8-10), error_code (v13+),
        # tagged fields (v9+); the empty array itself is 1 byte (compact) or 4
        flexible = version >= 9
        tail = (4 if 8 <= version <= 10 else 0) + (2 if version >= 13 else 0) + flexible
        cut = len(body) - tail
        start = cut - (1 if flexible else 4)
        count = _count(len(self.topics), flexible)
        return b"".join([body[:start], count, *self.topics, body[cut:]])


def topic_metadata(
    broker: Broker,
    name: str,
    version: int,
    live: set[int],
    operations: int = NO_OPERATIONS,
    codes: list[int] | None = None,
) -> bytes:
    info = broker.topics.info(name)
    assert info is not None  # the caller found it
    parts = []
    for idx, st in enumerate(info.partitions):
        replicas = list(st.replicas)
        leader_live = st.leader in live
        parts.append(
            (
                ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
                idx,
                st.leader if leader_live else -1,
                st.leader_epoch,
                replicas,
                [r for r in (st.isr or replicas) if r in live],
                [r for r in replicas if r not in live],
            )
        )
    if codes is not None:
        codes.extend(p[0] for p in parts if p[0])
    return encode_topic(version, 0, name, info.topic_id, info.internal, parts, operations)


def _operations(ctx: RequestContext, name: str, version: int, req: protocol.Message) -> int:
    # v8+: what the principal may do on the topic; with no authorizer every operation, as Kafka
    # answers (librdkafka's describe_cluster / describe_topics read these from Metadata v8-10)
    if version >= 8 and req.include_topic_authorized_operations:
        return ctx.authorized_operations_bits(ResourceType.TOPIC, name)
    return NO_OPERATIONS


def error_topic(name: str | None, topic_id: uuid.UUID, code: ErrorCode, version: int) -> bytes:
    return encode_topic(version, code, name, topic_id, False, [])


async def _requested(
    ctx: RequestContext,
    wanted: list[protocol.Message],
    version: int,
    auto_create: bool,
    req: protocol.Message,
    codes: list[int],
) -> list[bytes]:
    """The topics asked for by name or id. Each is answered once (Kafka collects them in a set),
    and the loop yields every YIELD_EVERY topics so a request with 100,000 ids does not stop
    other clients from being served."""
    broker = ctx.broker
    checked = broker.authorizer is not None
    live = set(broker.live_brokers())
    topics: list[bytes] = []
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
                topics.append(error_topic(None, t.topic_id, ErrorCode.UNKNOWN_TOPIC_ID, version))
                continue
        if checked and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            # before any existence check: a forbidden topic looks the same whether it exists
            denied_name = name if t.name is not None else None
            topics.append(error_topic(denied_name, ZERO_UUID, TOPIC_DENIED, version))
            continue
        try:
            check_topic_name(name)
        except TopicError:
            topics.append(error_topic(name, ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION, version))
            continue
        if broker.topics.info(name) is None:
            if not auto_create:
                topics.append(
                    error_topic(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, version)
                )
                continue
            if checked and not (
                ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False)
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)
            ):
                topics.append(error_topic(name, ZERO_UUID, TOPIC_DENIED, version))
                continue
            try:
                broker.topics.create_topic(name, -1, -1)
            except TopicError as exc:
                topics.append(error_topic(name, ZERO_UUID, exc.code, version))
                continue
        ops = _operations(ctx, name, version, req)
        topics.append(topic_metadata(broker, name, version, live, ops, codes))
    codes.extend(code for t in topics if (code := _I16.unpack_from(t, 0)[0]))
    return topics


@handles(ApiKey.METADATA, versions=(0, 13))
async def metadata(ctx: RequestContext, req: protocol.MetadataRequest) -> protocol.MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    auto_create = broker.config.get("auto.create.topics.enable") and (
        version < 4 or req.allow_auto_topic_creation
    )
    codes: list[int] = []
    if req.topics is None or (version == 0 and not req.topics):
        topics: list[bytes] = []
        checked = broker.authorizer is not None
        live = set(broker.live_brokers())
        for n, name in enumerate(sorted(broker.store.topics)):
            if n % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if checked and not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False
            ):
                continue  # all topics: the ones the principal may not describe are left out
            if broker.topics.info(name) is not None:  # not deleted while we yielded
                ops = _operations(ctx, name, version, req)
                topics.append(topic_metadata(broker, name, version, live, ops, codes))
    else:
        topics = await _requested(ctx, req.topics, version, auto_create, req, codes)
    brokers = [
        protocol.MetadataResponse.MetadataResponseBroker(node_id=n, host=h, port=p, rack=r)
        for n, h, p, r in broker.broker_endpoints(ctx.listener)
    ]
    head = protocol.MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        topics=[],
        error_code=ErrorCode.NONE,
    )
    if 8 <= version <= 10 and req.include_cluster_authorized_operations:
        head.authorized_operations = ctx.cluster_operations()
    return EncodedTopics(head, topics, codes)  # encodes as a MetadataResponse
