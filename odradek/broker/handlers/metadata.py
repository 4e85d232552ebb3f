"""Metadata (key 3), v0-13. v1 null topics = all, controller id; v2 cluster id; v4 auto-create
flag; v7 leader epochs; v9 flexible; v10 topic ids; v12 lookup by id (name null); v13 top-level
error code. A topic the request auto-creates is answered LEADER_NOT_AVAILABLE with no partitions,
as Kafka answers while the creation it asked its controller for completes.

A request that names a topic by neither name nor id (v10+: a null name with the zero id), or by
id before v12, is refused as Kafka's KafkaApis refuses it: every topic of the request answered
INVALID_REQUEST with no partitions (a null name echoed as ""), and no brokers
(MetadataRequest.getErrorResponse).

The topics of the answer are encoded here by hand (`encode_topic`), not built as kafka-python
objects and encoded by its generic encoder: with 10,000 partitions that took ~300 ms per full
Metadata request, this ~10x less (`python -m bench.scale`). `EncodedTopics` splices
them into the rest of the response, which kafka-python still encodes. A topic's bytes are kept
(`TopicBytesCache`) and reused while its partition states, the live brokers and the version
are the same: Kafka answers from its MetadataCache image, rebuilt on a metadata change; here a
change shows as a new TopicInfo or PartitionState object (the stores replace a state, never
edit the fields encoded here in place), so a full Metadata request with 10,000 partitions
encodes only what changed since the last one (`python -m bench.metadata_scale`). Per topic, as
Kafka's MetadataResponse.json:

    error_code int16 | name string (compact from v9, nullable from v12) | topic_id uuid (v10+)
    | is_internal bool (v1+) | partitions [] | topic_authorized_operations int32 (v8+)
    | tagged fields (v9+)
    partition: error_code int16 | partition_index int32 | leader_id int32
    | leader_epoch int32 (v7+) | replica_nodes []int32 | isr_nodes []int32
    | offline_replicas []int32 (v5+) | tagged fields (v9+)
"""

from __future__ import annotations

import asyncio
import logging
import operator
import struct
import uuid
import weakref
from dataclasses import dataclass
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
    from odradek.broker.cluster.metadata_store import PartitionState, TopicInfo
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

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


@dataclass(slots=True)
class _Encoded:
    info: TopicInfo
    states: list[PartitionState]  # the state objects encoded, compared by identity
    data: bytes
    codes: list[int]  # the partitions' error codes other than NONE


class TopicBytesCache:
    """Each topic's encoded answer per Metadata version, for the live brokers it was made with;
    valid while the store holds the same TopicInfo and PartitionState objects. Cleared when the
    live brokers change or it outgrows the topics (deleted topics' entries)."""

    def __init__(self) -> None:
        self.live: frozenset[int] = frozenset()
        self.entries: dict[tuple[str, int], _Encoded] = {}

    def prepare(self, live: set[int], topics: int) -> None:
        if live != self.live or len(self.entries) > 4 * topics + 64:
            self.live = frozenset(live)
            self.entries.clear()


_caches: weakref.WeakKeyDictionary[Broker, TopicBytesCache] = weakref.WeakKeyDictionary()


def _cache(broker: Broker, live: set[int]) -> TopicBytesCache:
    cache = _caches.get(broker)
    if cache is None:
        cache = _caches[broker] = TopicBytesCache()
    cache.prepare(live, len(broker.store.topics))
    return cache


def topic_metadata(
    broker: Broker,
    name: str,
    version: int,
    live: set[int],
    operations: int = NO_OPERATIONS,
    codes: list[int] | None = None,
    cache: TopicBytesCache | None = None,
) -> bytes:
    info = broker.topics.info(name)
    assert info is not None  # the caller found it
    key = (name, version)
    # (the live brokers may have changed while a long request yielded: then no caching)
    if cache is not None and operations == NO_OPERATIONS and cache.live == live:
        hit = cache.entries.get(key)
        states = info.partitions
        if (
            hit is not None
            and hit.info is info
            and len(hit.states) == len(states)
            and all(map(operator.is_, hit.states, states))
        ):
            if codes is not None:
                codes.extend(hit.codes)
            return hit.data
    else:
        cache = None
    snapshot = list(info.partitions)
    parts = []
    for idx, st in enumerate(snapshot):
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
    errors = [int(p[0]) for p in parts if p[0]]
    if codes is not None:
        codes.extend(errors)
    data = encode_topic(version, 0, name, info.topic_id, info.internal, parts, operations)
    if cache is not None:
        cache.entries[key] = _Encoded(info, snapshot, data, errors)
    return data


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
    cache = _cache(broker, live)
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
            # As Kafka's AutoTopicCreationManager: the request that causes the creation is
            # answered LEADER_NOT_AVAILABLE without partitions (a topic just deleted included);
            # the client asks again and then sees the new topic's partitions.
            created = broker.topics.info(name)
            internal = created.internal if created is not None else False
            auto = encode_topic(
                version, ErrorCode.LEADER_NOT_AVAILABLE, name, ZERO_UUID, internal, []
            )
            topics.append(auto)
            continue
        ops = _operations(ctx, name, version, req)
        topics.append(topic_metadata(broker, name, version, live, ops, codes, cache))
    codes.extend(code for t in topics if (code := _I16.unpack_from(t, 0)[0]))
    return topics


def _invalid_topic_reference(topics: list[protocol.Message] | None, version: int) -> bool:
    """True when a topic is named by neither name nor id, or by id before v12 (KIP-516); kafka-
    python decodes the zero id as None."""
    if topics is None or version < 10:
        return False
    for t in topics:
        if t.name is None and (t.topic_id is None or version < 12):
            return True
        if version < 12 and t.topic_id is not None:
            return True
    return False


def _invalid_request(ctx: RequestContext, req: protocol.Message, version: int) -> EncodedTopics:
    """Kafka's answer to a Metadata request it refuses (MetadataRequest.getErrorResponse)."""
    code = ErrorCode.INVALID_REQUEST
    topics = [error_topic(t.name or "", t.topic_id or ZERO_UUID, code, version) for t in req.topics]
    head = protocol.MetadataResponse(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=[],
        error_code=ErrorCode.NONE,
    )
    log.info(
        "Metadata v%d from %s names a topic by neither name nor id (or by id before v12)",
        version,
        ctx.client_id,
    )
    return EncodedTopics(head, topics, [code] * len(topics))


@handles(ApiKey.METADATA, versions=(0, 13))
async def metadata(ctx: RequestContext, req: protocol.MetadataRequest) -> protocol.MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    if _invalid_topic_reference(req.topics, version):
        return _invalid_request(ctx, req, version)
    auto_create = broker.config.get("auto.create.topics.enable") and (
        version < 4 or req.allow_auto_topic_creation
    )
    codes: list[int] = []
    if req.topics is None or (version == 0 and not req.topics):
        topics: list[bytes] = []
        checked = broker.authorizer is not None
        live = set(broker.live_brokers())
        cache = _cache(broker, live)
        for n, name in enumerate(sorted(broker.store.topics)):
            if n % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if checked and not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False
            ):
                continue  # all topics: the ones the principal may not describe are left out
            if broker.topics.info(name) is not None:  # not deleted while we yielded
                ops = _operations(ctx, name, version, req)
                topics.append(topic_metadata(broker, name, version, live, ops, codes, cache))
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
