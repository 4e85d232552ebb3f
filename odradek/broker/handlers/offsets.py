"""Committed offsets of consumer groups, answered by the group coordinator.

OffsetCommit (key 8), v0-9: v0 has no generation or member and, as in Kafka 3.9, stores the
offsets in ZooKeeper (/consumers/<group>/offsets/<topic>/<partition>, the pre-0.8.2 layout) on a
ZooKeeper-mode broker and answers UNSUPPORTED_VERSION otherwise (as a KRaft broker); v1 adds the
generation, member id and a commit timestamp per partition (-1: now); v2-4 retention_time_ms
(KIP-211: a commit with a retention expires on its own); v3 throttle time; v5 drops retention;
v6 committed_leader_epoch (KIP-320); v7 group_instance_id (KIP-345); v8 flexible; v9
GROUP_ID_NOT_FOUND for an unknown group with a generation (KIP-848); a consumer-protocol group
checks the member id and epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; UNSUPPORTED_VERSION below
v9); v10 names topics by id (KIP-848; an unknown id: UNKNOWN_TOPIC_ID). Commits to unknown
topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.
OffsetFetch (key 9), v0-9: v0 reads the ZooKeeper offsets OffsetCommit v0 writes (an offset
not there answers -1 with no error; UNSUPPORTED_VERSION on a broker without ZooKeeper); v0 and v1
have no top-level error: a group error is repeated on every requested partition; v2 null topics
= every committed offset, top-level error; v3 throttle time; v5 leader epoch; v6 flexible; v7
require_stable (KIP-447); v8 several groups (KIP-709); v9 member id and epoch (KIP-848: checked
for consumer-protocol groups, ignored by classic ones); v10 topic ids instead of names (KIP-848:
an unknown id answers UNKNOWN_TOPIC_ID; with null topics, the offsets of topics that no longer
exist are left out, as they have no id).
OffsetDelete (key 47), v0 (KIP-496).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.broker.handler_support import partition_errors, partition_exists
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import offsets_replicated
from odradek.clock import now_ms
from odradek.coordinator.group.metadata import OffsetAndMetadata
from odradek.coordinator.group.offsets import DEFAULT_MAX_METADATA_SIZE as MAX_METADATA
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from odradek.broker.server import Broker

log = logging.getLogger(__name__)


def _topic_ok(ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    return ctx.authorize(operation, ResourceType.TOPIC, topic)


# -- Version 0: offsets in ZooKeeper ----------------------------------------------------------


def _zookeeper(broker: Broker) -> KazooClient | None:
    """The kazoo client of a ZooKeeper-mode broker, else None."""
    return getattr(broker.store, "zk", None)


def _zk_offset_path(group_id: str, topic: str, partition: int) -> str:
    # Kafka's ConsumerOffset znode (ZkData.scala): the data is the offset in decimal
    return f"/consumers/{group_id}/offsets/{topic}/{partition}"


def _zk_write(
    zk: KazooClient, nodes: dict[tuple[str, int], tuple[str, bytes]]
) -> dict[tuple[str, int], Exception]:
    """Set or create each node; the failures. Runs in a worker thread (kazoo is thread-safe):
    a request naming many partitions makes as many ZooKeeper round trips."""
    from kazoo.exceptions import NoNodeError

    failed: dict[tuple[str, int], Exception] = {}
    for tp, (path, data) in nodes.items():
        try:
            try:
                zk.set(path, data)
            except NoNodeError:
                zk.create(path, data, makepath=True)
        except Exception as exc:  # an invalid path, a lost session: Errors.forException
            failed[tp] = exc
    return failed


def _zk_read(
    zk: KazooClient, paths: dict[tuple[str, int], str]
) -> dict[tuple[str, int], int | Exception]:
    """The offset in each node that exists, or the failure. Runs in a worker thread."""
    from kazoo.exceptions import NoNodeError

    found: dict[tuple[str, int], int | Exception] = {}
    for tp, path in paths.items():
        try:
            data, _stat = zk.get(path)
            found[tp] = int(data.decode())
        except NoNodeError:
            pass
        except Exception as exc:  # also a node that does not hold a number
            found[tp] = exc
    return found


async def _commit_to_zookeeper(
    ctx: RequestContext, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]
) -> dict[tuple[str, int], ErrorCode]:
    """OffsetCommit v0, Kafka's commitOffsetsToZookeeper (the metadata is not stored)."""
    zk = _zookeeper(ctx.broker)
    if zk is None:  # a KRaft broker: "Version 0 offset commit requests" are unsupported
        return dict.fromkeys(offsets, ErrorCode.UNSUPPORTED_VERSION)
    coord = ctx.group_coordinator
    limit = coord.offsets.config.max_metadata_size if coord is not None else MAX_METADATA
    errors: dict[tuple[str, int], ErrorCode] = {}
    nodes = {}
    for (topic, partition), om in offsets.items():
        if len(om.metadata) > limit:
            errors[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            path = _zk_offset_path(group_id, topic, partition)
            nodes[(topic, partition)] = (path, str(om.offset).encode())
    failed = await asyncio.to_thread(_zk_write, zk, nodes) if nodes else {}
    for tp in nodes:
        errors[tp] = ErrorCode.UNKNOWN_SERVER_ERROR if tp in failed else ErrorCode.NONE
    if failed:
        tp, exc = next(iter(failed.items()))
        log.warning(
            "OffsetCommit v0 of group %r: %d of %d ZooKeeper writes failed, first %s: %r",
            group_id,
            len(failed),
            len(nodes),
            nodes[tp][0],
            exc,
        )
    return errors


async def _fetch_from_zookeeper(
    ctx: RequestContext, req: protocol.OffsetFetchRequest
) -> protocol.OffsetFetchResponse:
    """OffsetFetch v0, Kafka's handleOffsetFetchRequestFromZookeeper."""
    Resp = protocol.OffsetFetchResponse
    T = Resp.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    topics = list(req.topics or [])
    zk = _zookeeper(ctx.broker)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id):
        group_error: ErrorCode | None = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif zk is None:
        group_error = ErrorCode.UNSUPPORTED_VERSION
    else:
        group_error = None
    denied = {
        t.name
        for t in topics
        if group_error is None and not _topic_ok(ctx, AclOperation.DESCRIBE, t.name)
    }
    paths = {
        (t.name, index): _zk_offset_path(req.group_id, t.name, index)
        for t in topics
        if group_error is None and t.name not in denied
        for index in t.partition_indexes
        if partition_exists(ctx.broker, t.name, index)
    }
    found = await asyncio.to_thread(_zk_read, zk, paths) if paths else {}
    failures = [v for v in found.values() if isinstance(v, Exception)]
    if failures:
        log.warning(
            "OffsetFetch v0 of group %r: %d reads failed, first: %r",
            req.group_id,
            len(failures),
            failures[0],
        )

    def part(topic: str, index: int) -> protocol.Message:
        offset, error = -1, group_error or ErrorCode.NONE
        if topic in denied:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        value = found.get((topic, index))
        if isinstance(value, Exception):
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        elif value is not None:
            offset = value
        return P(partition_index=index, committed_offset=offset, metadata="", error_code=error)

    return Resp(
        topics=[
            T(name=t.name, partitions=[part(t.name, i) for i in t.partition_indexes])
            for t in topics
        ]
    )


# -- OffsetCommit ------------------------------------------------------------------------------


def _by_id(ctx: RequestContext, topic_id: uuid.UUID | None) -> str:
    """v10 names topics by id: the name, or a key no topic has (an id not known here)."""
    name = ctx.topics.name_for_id(topic_id) if topic_id is not None else None
    return name if name is not None else f"\0{topic_id}"


def _expire_at(now: int, retention: int) -> int:
    """When an offset committed with a retention (v2-4, KIP-211) expires: the sum as Kafka's
    Java long, so a retention near Long.MAX wraps to a time already past (OffsetMetadataManager
    expireTimestampMs) rather than overflowing the offset record's int64."""
    return (now + retention + (1 << 63)) % (1 << 64) - (1 << 63)


@handles(ApiKey.OFFSET_COMMIT, versions=(0, 10))
async def offset_commit(
    ctx: RequestContext, req: protocol.OffsetCommitRequest
) -> protocol.OffsetCommitResponse:
    version = ctx.api_version
    broker = ctx.broker
    Resp = protocol.OffsetCommitResponse
    TopicResp = Resp.OffsetCommitResponseTopic
    PartResp = TopicResp.OffsetCommitResponsePartition
    now = now_ms()
    retention = req.retention_time_ms if 2 <= version <= 4 else -1
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: dict[tuple[str, int], OffsetAndMetadata] = {}
    group_ok = ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id)
    names = [_by_id(ctx, t.topic_id) if version >= 10 else t.name for t in req.topics]
    for t, name in zip(req.topics, names, strict=True):
        unknown_id = name.startswith("\0")
        topic_ok = group_ok and (unknown_id or _topic_ok(ctx, AclOperation.READ, name))
        for p in t.partitions:
            tp = (name, p.partition_index)
            if unknown_id and group_ok:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not topic_ok:  # the group denied: every partition 30; a topic denied: 29
                errors[tp] = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if group_ok
                    else ErrorCode.GROUP_AUTHORIZATION_FAILED
                )
                continue
            if not partition_exists(broker, name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            # v1 carries a commit timestamp per partition (-1: the broker's time)
            stamp = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
            valid[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=stamp,
                expire_timestamp=_expire_at(now, retention) if retention >= 0 else -1,
            )
    if valid and version == 0:
        errors.update(await _commit_to_zookeeper(ctx, req.group_id, valid))
    elif valid:
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
                topic_id=t.topic_id,
                partitions=[
                    PartResp(
                        partition_index=p.partition_index,
                        error_code=errors[(name, p.partition_index)],
                    )
                    for p in t.partitions
                ],
            )
            for t, name in zip(req.topics, names, strict=True)
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
    by_topic: dict[str, list[tuple[int, int, int, str | None, ErrorCode]]] = {}
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


def _partitions(
    P: type[protocol.Message], parts: list[tuple[int, int, int, str | None, ErrorCode]]
) -> list[protocol.Message]:
    """OffsetFetch answer partitions (class `P` of the version) of `_fetch_group`'s (partition,
    offset, leader epoch, metadata, error) tuples."""
    return [
        P(
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=e,
            metadata=m,
            error_code=pe,
        )
        for p, o, e, m, pe in parts
    ]


def _fetch_group_by_id(
    ctx: RequestContext, g: protocol.Message, require_stable: bool
) -> protocol.Message:
    """One group of OffsetFetch v10: topics named by id in the request and the answer."""
    G = protocol.OffsetFetchResponse.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    unknown: list[protocol.Message] = []
    wanted = None
    if g.topics is not None:
        wanted = []
        for t in g.topics:
            name = _by_id(ctx, t.topic_id)
            if name.startswith("\0"):
                unknown.append(t)
            else:
                wanted.append(_NamedTopic(name, list(t.partition_indexes)))
    error, by_topic = _fetch_group(ctx, g.group_id, wanted, require_stable)
    if error == ErrorCode.NONE and ctx.group_coordinator is not None:
        stale = ctx.group_coordinator.consumer.validate_offset_fetch(
            g.group_id, g.member_id, g.member_epoch
        )
        if stale is not None:
            error = stale
    if error:
        return G(group_id=g.group_id, error_code=error, topics=[])
    topics = []
    for name, parts in by_topic.items():
        info = ctx.topics.info(name)
        if info is None:
            continue  # committed for a topic that is gone: it has no id to name it by
        topics.append(
            T(
                topic_id=info.topic_id,
                partitions=_partitions(P, parts),
            )
        )
    for t in unknown:
        topics.append(
            T(
                topic_id=t.topic_id,
                partitions=[
                    P(
                        partition_index=p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    )
                    for p in t.partition_indexes
                ],
            )
        )
    return G(group_id=g.group_id, error_code=ErrorCode.NONE, topics=topics)


@dataclass(slots=True)
class _NamedTopic:
    """A v10 request topic resolved to its name (what `_fetch_group` reads)."""

    name: str
    partition_indexes: list[int]


@handles(ApiKey.OFFSET_FETCH, versions=(0, 10))
async def offset_fetch(
    ctx: RequestContext, req: protocol.OffsetFetchRequest
) -> protocol.OffsetFetchResponse:
    version = ctx.api_version
    if version == 0:
        return await _fetch_from_zookeeper(ctx, req)
    Resp = protocol.OffsetFetchResponse
    require_stable = bool(req.require_stable) if version >= 7 else False
    if version >= 8:
        G = Resp.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in req.groups:
            if version >= 10:
                groups.append(_fetch_group_by_id(ctx, g, require_stable))
                continue
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
                            partitions=_partitions(P, parts),
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
                partitions=_partitions(P, parts),
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
            elif partition_exists(broker, t.name, p.partition_index):
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
        topics=partition_errors(req.topics, errors, TopicResp, PartResp),
    )
