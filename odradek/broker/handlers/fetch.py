"""Fetch (key 1), v0-18 (Kafka 4.1's maximum). v4 isolation level and aborted transactions; v5
log start offset; v7 incremental fetch sessions (KIP-227); v9 current leader epoch; v11 rack /
preferred replica; v12 flexible; v13 topic ids; v15 replica state; v16 CurrentLeader and
NodeEndpoints on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH (KIP-951,
partitions/leader_discovery.py); v18 a follower's high watermark (KIP-1166, tagged; the answer
is v17's). Records are file regions sent with sendfile; long polling waits on partition appends
until min_bytes or max_wait_ms.

Fetch v0-3 (clients that read only message format 0/1): each partition's records are
down-converted (wire/down_convert.py, as Kafka's LazyDownConversionRecords) while the response is
written, a chunk at a time: magic 0 for v0-1, magic 1 for v2-3, headers dropped, compression kept.
Beyond Kafka, which serves them read_uncommitted, old fetchers never see transactional data that
is aborted or not yet decided: they read up to the last stable offset, and aborted batches and
markers are left out. A partition whose next batch is zstd (no magic 0/1 form) answers
UNSUPPORTED_COMPRESSION_TYPE, as Kafka. v0-2 have no response max_bytes: every partition's first
message is sent whole even when larger than its partition_max_bytes (Kafka sent a partial one and
the client failed with RecordTooLarge); v3 follows KIP-74 as v4+ do. The zero-copy path for v4+
is untouched.

A fetch that finds less than min_bytes answers when max_wait_ms has passed plus one millisecond
(`long_poll_deadline`): clients derive max_wait_ms from their own deadline rounded down to whole
milliseconds, and an empty answer sent at exactly max_wait_ms reached kafka-go before its
deadline, which it then reads as an empty batch instead of a timeout.

A consumer's consumer_byte_rate quota (quotas.py), as Kafka's KafkaApis.handleFetchRequest: the
response is capped at what the quota allows in one window (quota x (num - 1) x window size);
its size is recorded, and a client over its quota gets an empty answer with throttle_time_ms
(the size recorded is taken back) and its connection muted for that long. Followers are never
throttled by client quotas."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.broker.network import authz
from odradek.broker.network import quotas as q
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions import leader_discovery
from odradek.broker.partitions.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    SessionPartition,
)
from odradek.log.log import OffsetOutOfRange
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.compression import max_decompressed_size
from odradek.wire.down_convert import LazyDownConversion
from odradek.wire.errors import ErrorCode
from odradek.wire.fetch_encoder import PartitionData, TopicData, encode_fetch_response
from odradek.wire.regions import FileRegion

if TYPE_CHECKING:
    from odradek.broker.partitions.partition import Partition
    from odradek.broker.server import Broker
    from odradek.wire.regions import Piece

READ_COMMITTED = 1
DOWN_CONVERTED_BELOW = 4  # Fetch versions that read magic 0/1 message sets


@dataclass(slots=True)
class FetchParams:
    replica_id: int
    isolation_level: int
    max_bytes: int
    version: int
    denied: frozenset[str] = frozenset()  # topics this client may not read (authz.py)


def _sessions(broker: Broker) -> FetchSessionCache:
    cache: FetchSessionCache = broker.fetch_sessions
    return cache


def read_partition(
    broker: Broker, sp: SessionPartition, params: FetchParams, budget: int, min_one: bool
) -> PartitionData:
    """One partition's answer: offsets, error, and the records as a file region."""
    out = PartitionData(sp.partition)
    if params.denied and sp.topic in params.denied:  # checked first: existence not revealed
        out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return out
    part = broker.topics.get(sp.topic, sp.partition)
    if part is None:
        info = broker.topics.info(sp.topic)
        if info is not None and sp.partition < len(info.partitions):
            out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif info is None and params.version >= 13:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_ID
        else:  # a known topic without this partition: Kafka names the partition
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.aborted_transactions = []
        return out
    if part.offline:  # its log dir failed (Kafka's HostedPartition.Offline)
        out.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return out
    follower = params.replica_id >= 0
    if not part.is_leader:
        out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if part.leader >= 0:
            out.current_leader = (part.leader, part.leader_epoch)
        return out
    if sp.current_leader_epoch >= 0 and sp.current_leader_epoch != part.leader_epoch:
        out.error_code = (
            ErrorCode.FENCED_LEADER_EPOCH
            if sp.current_leader_epoch < part.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
        return out
    lg = part.log
    out.high_watermark = part.high_watermark
    out.last_stable_offset = part.last_stable_offset
    out.log_start_offset = lg.log_start_offset
    if params.version < DOWN_CONVERTED_BELOW and not follower:
        return _down_converted(broker, part, sp, params, budget, min_one, out)
    if follower:
        bound = lg.log_end_offset
        broker.replicas.on_follower_fetch(part, params.replica_id, sp.fetch_offset)
        if sp.fetch_offset == bound:
            return out  # caught up: nothing to read
    elif params.isolation_level == READ_COMMITTED:
        bound = part.last_stable_offset
        out.aborted_transactions = []
    else:
        bound = part.high_watermark
    try:
        region = lg.read(sp.fetch_offset, min(sp.max_bytes, budget), bound, min_one)
    except OffsetOutOfRange:
        return _out_of_range(out)
    if region is not None:
        out.records = [region]
        if params.isolation_level == READ_COMMITTED and not follower:
            # upper bound: the LSO; entries past the returned data are harmless to clients
            out.aborted_transactions = [
                (a.producer_id, a.first_offset)
                for a in lg.aborted_transactions(sp.fetch_offset, bound)
            ]
    return out


def _down_converted(
    broker: Broker,
    part: Partition,
    sp: SessionPartition,
    params: FetchParams,
    budget: int,
    min_one: bool,
    out: PartitionData,
) -> PartitionData:
    """A v0-3 partition answer: the region the normal read gives, converted lazily. When
    nothing in it converts (markers, aborted data) the read goes on past it."""
    lg = part.log
    bound = part.last_stable_offset
    magic = 0 if params.version < 2 else 1
    max_size = max_decompressed_size(lg.config.max_message_bytes)
    metrics = broker.metrics
    topic = sp.topic

    def aborted(start: int) -> list[tuple[int, int, int]]:
        return [
            (a.producer_id, a.first_offset, a.last_offset)
            for a in lg.aborted_transactions(start, bound)
        ]

    def converted(records: int, nbytes: int) -> None:
        if metrics is not None:
            metrics.down_converted(topic, records, nbytes)

    offset = sp.fetch_offset
    min_one = min_one or params.version < 3  # v0-2: no response limit
    while offset < bound:
        try:
            region = lg.read(offset, min(sp.max_bytes, budget), bound, min_one)
        except OffsetOutOfRange:
            return _out_of_range(out) if offset == sp.fetch_offset else out
        if region is None:
            return out
        lazy = LazyDownConversion(region, magic, sp.fetch_offset, max_size, aborted, converted)
        lazy.prepare()
        if lazy.unsupported:
            out.error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            return out
        if lazy.length:
            out.records = [lazy]
            return out
        if lazy.skipped_to is None or lazy.skipped_to <= offset:
            return out
        offset = lazy.skipped_to
    if sp.fetch_offset > lg.log_end_offset or sp.fetch_offset < lg.log_start_offset:
        return _out_of_range(out)
    return out


def _out_of_range(out: PartitionData) -> PartitionData:
    """OFFSET_OUT_OF_RANGE with the offsets unknown (-1), as Kafka's LogReadResult of a failed
    read: a client resets its position with ListOffsets, not from these."""
    out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
    out.high_watermark = out.last_stable_offset = out.log_start_offset = -1
    return out


def read_all(
    broker: Broker, wanted: list[SessionPartition], params: FetchParams
) -> tuple[list[tuple[SessionPartition, PartitionData]], int, bool]:
    budget = params.max_bytes
    results = []
    total = 0
    errors = False
    for sp in wanted:
        pd = read_partition(broker, sp, params, max(budget, 0), min_one=total == 0)
        size = pd.records_size
        total += size
        budget -= size
        errors = errors or pd.error_code != ErrorCode.NONE
        results.append((sp, pd))
    return results, total, errors


def _news(broker: Broker, sp: SessionPartition) -> bool:
    """Whether a follower's waiting fetch may now answer differently for `sp` than it read last
    time: records past its fetch offset, or its leadership or log moved (an error or
    out-of-range answer). A cheap look, not a read."""
    part = broker.topics.get(sp.topic, sp.partition)
    return (
        part is None
        or not part.is_leader
        or part.offline
        or part.log.log_end_offset != sp.fetch_offset
        or (0 <= sp.current_leader_epoch != part.leader_epoch)
    )


def _follower_news(broker: Broker, wanted: list[SessionPartition]) -> bool:
    return any(_news(broker, sp) for sp in wanted)


def reread_follower(
    broker: Broker, results: list[tuple[SessionPartition, PartitionData]], params: FetchParams
) -> tuple[list[tuple[SessionPartition, PartitionData]], int, bool]:
    """A follower's fetch woken with news: only the partitions with news are read again; the
    others keep what was read (and recorded of the follower's progress) when it arrived."""
    budget = params.max_bytes
    out = []
    total = 0
    errors = False
    for sp, pd in results:
        if _news(broker, sp):
            pd = read_partition(broker, sp, params, max(budget, 0), min_one=total == 0)
        size = pd.records_size
        total += size
        budget -= size
        errors = errors or pd.error_code != ErrorCode.NONE
        out.append((sp, pd))
    return out, total, errors


async def wait_for_data(
    broker: Broker, wanted: list[SessionPartition], timeout: float, follower: bool = False
) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    parts = [p for sp in wanted if (p := broker.topics.get(sp.topic, sp.partition))]
    for p in parts:
        p.add_waiter(fut, follower)
    try:
        await asyncio.wait_for(fut, timeout)
    except TimeoutError:
        pass
    finally:
        for p in parts:
            p.remove_waiter(fut)


def _resolve(broker: Broker, req: protocol.FetchRequest, version: int) -> list[SessionPartition]:
    out = []
    for t in req.topics:
        name = t.topic if version < 13 else (broker.topics.name_for_id(t.topic_id) or "")
        tid = t.topic_id if version >= 13 else None
        for p in t.partitions:
            out.append(
                SessionPartition(
                    name,
                    tid,
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                )
            )
    return out


def _changed(sp: SessionPartition, pd: PartitionData) -> bool:
    return bool(
        pd.records_size
        or pd.error_code
        or pd.high_watermark != sp.last_hw
        or pd.last_stable_offset != sp.last_lso
        or pd.log_start_offset != sp.last_log_start
    )


def long_poll_deadline(now: float, max_wait_ms: int) -> float:
    """When a fetch still short of min_bytes answers anyway: max_wait_ms after `now`, plus one
    millisecond when it waits at all. max_wait_ms is whole milliseconds a client rounded down
    from its own deadline (kafka-go truncates it), so an answer at exactly max_wait_ms can come
    up to a millisecond before the time the client waits for; Kafka's purgatory answers 1-3 ms
    after max_wait_ms (thread hand-offs), odradek answered 0.6-0.9 ms after it."""
    return now + (max_wait_ms + 1) / 1000 if max_wait_ms > 0 else now


def error_pieces(ctx: RequestContext, req: protocol.FetchRequest, code: int) -> list[Piece]:
    """A Fetch answer with `code` for every requested partition (fault injection)."""
    version = ctx.api_version
    topics: list[TopicData] = []
    for sp in _resolve(ctx.broker, req, version):
        tid = sp.topic_id.bytes if sp.topic_id is not None else bytes(16)
        if not topics or topics[-1].name != sp.topic:
            topics.append(TopicData(sp.topic, tid, []))
        topics[-1].partitions.append(PartitionData(sp.partition, code))
    return encode_fetch_response(version, ctx.header.correlation_id, topics)


@handles(ApiKey.FETCH, versions=(0, 18), raw=True, error_encoder=error_pieces)
async def fetch(ctx: RequestContext, req: protocol.FetchRequest) -> list[Piece]:
    broker = ctx.broker
    version = ctx.api_version
    if version < 15:
        replica_id = req.replica_id
    else:
        replica_id = req.replica_state.replica_id if req.replica_state is not None else -1
    # Kafka caps every Fetch (followers' too) by the broker's fetch.max.bytes
    cap = int(broker.config.get("fetch.max.bytes"))
    params = FetchParams(replica_id, req.isolation_level, min(req.max_bytes, cap), version)
    quota = broker.quotas.fetch if replica_id < 0 and broker.quotas.fetch.enabled else None
    if quota is not None:
        user, client_id = q.tags_of(ctx)
        window_max = quota.max_value_in_window(user, client_id)
        if window_max is not None:
            params.max_bytes = max(1, min(params.max_bytes, int(window_max)))
    requested = _resolve(broker, req, version)
    cache = _sessions(broker)
    session = None
    session_id = 0
    incremental = False
    if version >= 7 and req.session_epoch == INITIAL_EPOCH:
        # epoch 0 is a full fetch opening a session; with an id, that old session goes
        # (Kafka's FetchManager: a client resetting after INVALID_FETCH_SESSION_EPOCH)
        if req.session_id != 0:
            cache.remove(req.session_id)
        session = cache.new_session()
        session.partitions = {(sp.topic, sp.partition): sp for sp in requested}
        session_id = session.session_id
        wanted = requested
    elif version >= 7 and req.session_id != 0:
        if req.session_epoch == FINAL_EPOCH:
            cache.remove(req.session_id)
            wanted = requested
        else:
            err, session = cache.lookup(req.session_id, req.session_epoch)
            if session is None:
                return encode_fetch_response(version, ctx.header.correlation_id, [], error_code=err)
            incremental = True
            session_id = session.session_id
            session.epoch = session.epoch + 1 if session.epoch < 0x7FFFFFFF else 1
            for ft in req.forgotten_topics_data or []:
                name = ft.topic if version < 13 else broker.topics.name_for_id(ft.topic_id)
                if name is None:
                    continue  # an unknown topic id: nothing of it is in the session
                for p in ft.partitions:
                    session.partitions.pop((name, p), None)
            for sp in requested:
                old = session.partitions.get((sp.topic, sp.partition))
                if old is not None:
                    sp.last_hw, sp.last_lso, sp.last_log_start = (
                        old.last_hw,
                        old.last_lso,
                        old.last_log_start,
                    )
                session.partitions[(sp.topic, sp.partition)] = sp
            wanted = list(session.partitions.values())
    else:
        wanted = requested
    if broker.authorizer is not None:
        params.denied = authz.fetch_denied(ctx, replica_id, wanted)
    deadline = long_poll_deadline(time.monotonic(), req.max_wait_ms)
    woken = False
    results: list[tuple[SessionPartition, PartitionData]] = []
    while True:
        if woken and replica_id >= 0 and deadline > time.monotonic():
            results, total, errors = reread_follower(broker, results, params)
        else:
            results, total, errors = read_all(broker, wanted, params)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or errors or remaining <= 0 or not wanted:
            break
        await wait_for_data(broker, wanted, remaining, replica_id >= 0)
        while replica_id >= 0 and not _follower_news(broker, wanted):
            # a follower waits for records (or an error): the high watermark moves its own
            # fetch and the other follower's cause are no reason to read every partition again
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await wait_for_data(broker, wanted, remaining, True)
        woken = True
    if quota is not None:
        throttle_ms = quota.record(user, client_id, total)
        if throttle_ms > 0:  # over quota: an empty answer, the bytes taken back (KIP-219)
            quota.unrecord(user, client_id, total)
            q.throttle(ctx, throttle_ms)
            if session is not None and not incremental:
                cache.remove(session.session_id)  # Kafka's full context answers without one
                session_id = 0
            return encode_fetch_response(
                version,
                ctx.header.correlation_id,
                [],
                throttle_time_ms=throttle_ms,
                session_id=session_id,
            )
    metrics = broker.metrics
    topics: dict[str, TopicData] = {}
    for sp, pd in results:
        if metrics is not None:
            if pd.error_code:
                metrics.error(ApiKey.FETCH, pd.error_code)
            for region in pd.records:
                if params.replica_id < 0 and isinstance(region, FileRegion):
                    metrics.fetched(sp.topic, region)  # down-converted: counted when made
        if incremental and not _changed(sp, pd):
            continue
        if session is not None:
            sp.last_hw, sp.last_lso, sp.last_log_start = (
                pd.high_watermark,
                pd.last_stable_offset,
                pd.log_start_offset,
            )
        td = topics.get(sp.topic)
        if td is None:
            tid = sp.topic_id.bytes if sp.topic_id is not None else bytes(16)
            td = topics[sp.topic] = TopicData(sp.topic, tid, [])
        td.partitions.append(pd)
    return encode_fetch_response(
        version,
        ctx.header.correlation_id,
        list(topics.values()),
        session_id=session_id,
        node_endpoints=leader_discovery.fetch_leaders(ctx, results),
    )
