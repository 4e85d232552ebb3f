"""Produce (key 0), v0-13 served (Kafka 3.9's floor, Kafka 4.1's maximum). v0-2 carry message
sets of magic 0/1, up-converted to one v2 batch per partition before the append (the legacy path
of odradek/log/validator.py; counted in odradek_topic_produce_message_conversions); v0 answers
without throttle time, v2 adds log_append_time; v3 one magic-2 batch per partition and the
transactional id; v5 log start offset; v8 record errors and error message; v9 flexible; v10
CurrentLeader and NodeEndpoints on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH (KIP-951,
partitions/leader_discovery.py); v12 (KIP-890 part 2): with transaction.version 2 finalized, a
transactional produce adds its partitions to the producer's transaction itself (the 4.x producer
sends no AddPartitionsToTxn then), before the usual verification; v13 names topics by id (an
unknown id is UNKNOWN_TOPIC_ID). Transactions v1 (KIP-890 part 1): a transactional batch goes
only to a partition of its producer's ongoing transaction, asked of the coordinator's broker
with AddPartitionsToTxn verify_only when that is another broker. Batches are validated as bytes
and appended whole; acks=0 gets no response.

Clients may not write to the internal topics (`__consumer_offsets`, `__transaction_state`):
INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager.appendToLocalLog ("Cannot append to internal
topic"). The coordinators append their records directly to their partitions and followers
replicate through Fetch, so neither passes through here. Kafka lets a client whose id is
`__admin_client` through; we do not, since any client can claim that id and one forged record
there could stop a coordinator from loading.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import TypeAlias

from odradek.broker.features import transactions_v2
from odradek.broker.network import authz
from odradek.broker.network import quotas as q
from odradek.broker.network.context import RequestContext
from odradek.broker.network.dispatch import ProtocolError
from odradek.broker.network.registry import handles
from odradek.broker.partitions import leader_discovery
from odradek.broker.partitions.partition import AppendResult, Partition
from odradek.broker.partitions.topics import INTERNAL_TOPICS, TopicError, check_topic_name
from odradek.clock import now_ms
from odradek.log.validator import (
    PendingValidation,
    ValidatedBatches,
    ValidationError,
    begin,
    validate,
)
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.batch import ATTRIBUTES_OFFSET, COMPRESSION_MASK, Buffer
from odradek.wire.errors import ErrorCode
from odradek.wire.legacy_records import CODEC_MASK, MAGIC_OFFSET

log = logging.getLogger(__name__)

Resp: TypeAlias = protocol.ProduceResponse
TopicResp: TypeAlias = protocol.ProduceResponse.TopicProduceResponse
PartResp: TypeAlias = protocol.ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def _is_internal(ctx: RequestContext, topic: str) -> bool:
    if topic in INTERNAL_TOPICS:
        return True
    info = ctx.broker.topics.info(topic)
    return info is not None and bool(info.internal)


def _produce_one(
    ctx: RequestContext,
    topic: str,
    index: int,
    records: Buffer | None,
    acks: int,
    transactional_id: str | None,
    validated: ValidatedBatches | ValidationError | None = None,
) -> AppendResult:
    """Append one partition's records; `validated`: their validation already done (off the
    loop, `_validate_legacy_off_loop`), answered only after the checks that come first."""
    broker = ctx.broker
    if acks not in (0, 1, -1):
        return AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
    try:
        check_topic_name(topic)
    except TopicError as exc:
        return AppendResult(exc.code)
    if _is_internal(ctx, topic):
        log.info("produce to internal topic %s-%d from %s rejected", topic, index, ctx.client_id)
        if broker.metrics is not None:
            broker.metrics.error(ApiKey.PRODUCE, ErrorCode.INVALID_TOPIC_EXCEPTION)
        return AppendResult(
            ErrorCode.INVALID_TOPIC_EXCEPTION, message=f"Cannot append to internal topic {topic}"
        )
    part = broker.topics.get(topic, index)
    if part is None:
        info = broker.topics.info(topic)
        if info is not None and 0 <= index < len(info.partitions):
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        if validated is None:
            validated = validate(records, part.log.config, now_ms(), ctx.api_version)
        elif isinstance(validated, ValidationError):
            raise validated
    except ValidationError as exc:
        log.info(
            "produce to %s-%d from %s rejected: %s (%s)",
            topic,
            index,
            ctx.client_id,
            exc.code.name,
            exc,
        )
        if broker.metrics is not None:
            broker.metrics.error(ApiKey.PRODUCE, exc.code)
        return AppendResult(exc.code, message=str(exc))
    if acks == -1 and part.is_leader and len(part.isr) < part.log.config.min_insync_replicas:
        # acks=all cannot be honoured: refuse before appending, as Kafka does
        return AppendResult(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            message=f"The size of the current ISR {part.isr} is insufficient to satisfy the "
            f"min.isr requirement of {part.log.config.min_insync_replicas} for partition "
            f"{topic}-{index}",
        )
    result = part.append_records(validated, transactional_id, defer_flush=True)
    metrics = broker.metrics
    if metrics is not None:
        if result.error:
            metrics.error(ApiKey.PRODUCE, result.error)
        else:
            metrics.produced(topic, len(validated.buf), result.record_count)
            if validated.converted:
                metrics.up_converted(topic, validated.converted)
    return result


# A Produce v0-2 message set is up-converted record by record in Python (about 5-10 us each): a
# compressed wrapper (a few KB can inflate to max_decompressed_size, hundreds of thousands of
# records) or a large set is converted in a worker thread so the event loop keeps serving.
LEGACY_THREAD_BYTES = 64 * 1024


async def _validate_legacy_off_loop(
    ctx: RequestContext, topic: str, index: int, records: Buffer | None
) -> ValidatedBatches | ValidationError | None:
    """Produce v0-2: validate a compressed or large magic 0/1 set in a thread (None: not such a
    set, or no such partition here; `_produce_one` validates or answers as usual)."""
    if not records or len(records) <= MAGIC_OFFSET + 1 or records[MAGIC_OFFSET] not in (0, 1):
        return None
    if len(records) < LEGACY_THREAD_BYTES and not records[MAGIC_OFFSET + 1] & CODEC_MASK:
        return None
    part = ctx.broker.topics.get(topic, index)
    if part is None:
        return None
    try:
        return await asyncio.to_thread(
            validate, records, part.log.config, now_ms(), ctx.api_version
        )
    except ValidationError as exc:
        return exc


# Record walks of compressed batches that inflate past the inline budget
# (validator.INLINE_BUDGET) run here, one at a time: a batch inflating to gigabytes then costs
# one core's time and a window of memory, and the event loop goes on serving everyone else.
_LONG_WALKS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="odradek-record-walk")


def _compressed_v2(records: Buffer | None) -> bool:
    """A magic-2 batch whose attributes name a codec (the record batch header of wire/batch)."""
    return (
        records is not None
        and len(records) > ATTRIBUTES_OFFSET + 1
        and records[MAGIC_OFFSET] == 2
        and bool(records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK)
    )


async def _validate_compressed(
    ctx: RequestContext, topic: str, index: int, records: Buffer | None
) -> ValidatedBatches | ValidationError | None:
    """Produce v3+: a compressed batch's head is walked here, the rest (a batch inflating past
    the inline budget) in the record-walk thread, as Kafka's LogValidator streams it (None: not
    such a batch, or no such partition here; `_produce_one` validates or answers as usual)."""
    if not _compressed_v2(records):
        return None
    part = ctx.broker.topics.get(topic, index)
    if part is None or _is_internal(ctx, topic):
        return None
    config, now = part.log.config, now_ms()
    try:
        started = begin(records, config, now, ctx.api_version)
        if isinstance(started, PendingValidation):
            # walked again from the start in the thread: a batch waiting its turn keeps no
            # decompressor state or window, only its request's bytes
            started.close()
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                _LONG_WALKS, validate, records, config, now, ctx.api_version
            )
        return started
    except ValidationError as exc:
        return exc


async def _wait_for_flush(pending: list[tuple[Partition | None, AppendResult]]) -> None:
    """Answer once the group fsync rounds (log/flusher.py) synced what these appends made due
    for a flush, as Kafka answers after its flush inside the append; a failed fsync took the
    dir offline, and its partitions answer KAFKA_STORAGE_ERROR."""
    rounds = {id(res.flush): res.flush for _part, res in pending if res.flush is not None}
    # asyncio.wait, not await: a cancelled request must not cancel a round others share
    await asyncio.wait([rnd.future for rnd in rounds.values()])
    for part, res in pending:
        rnd, res.flush = res.flush, None
        if part is None or rnd is None:
            continue
        if rnd.future.cancelled() or rnd.error_for(part.log) is not None:
            res.error = ErrorCode.KAFKA_STORAGE_ERROR
            res.message = f"fsync of {part.topic}-{part.index} failed (the log dir is offline)"


_PRODUCER = struct.Struct(">qh")  # producer id and epoch of a v2 batch
_PRODUCER_OFFSET = 43


# what a failed add answers on produce (Kafka's ReplicaManager): retriable coordinator errors
# become NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset(
    (
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    )
)


def _in_open_transaction(part: Partition | None, producer_id: int, epoch: int) -> bool:
    entry = None if part is None else part.log.producer_state.producers.get(producer_id)
    return entry is not None and entry.epoch == epoch and entry.txn_first_offset >= 0


def _as_produce_error(error: ErrorCode) -> ErrorCode:
    """A coordinator's refusal of a partition as the produce answers it, as Kafka's
    AddPartitionsToTxnManager and ReplicaManager: retriable ones as NOT_ENOUGH_REPLICAS; an older
    epoch (a delayed produce of an earlier transaction) as INVALID_PRODUCER_EPOCH, which
    producers expect on a produce (KIP-588); a verification it could not do as
    INVALID_TXN_STATE."""
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return ErrorCode.INVALID_TXN_STATE
    return error


def _for_version(error: ErrorCode, version: int) -> ErrorCode:
    """A partition outside the producer's ongoing transaction is TRANSACTION_ABORTABLE from
    Produce v11 on (KIP-890 part 1), INVALID_TXN_STATE before, as Kafka 4.4 answers."""
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        return ErrorCode.INVALID_TXN_STATE
    return error


def _unverified(
    ctx: RequestContext, req: protocol.ProduceRequest
) -> tuple[tuple[int, int] | None, list[tuple[str, int]]]:
    """The request's producer (id, epoch) and its existing partitions that do not hold that
    producer epoch's open transaction yet. A partition that does needs no coordinator (Kafka
    skips verification then): one round trip per partition and transaction, not per request."""
    topics = ctx.broker.topics
    wanted: list[tuple[str, int]] = []
    producer: tuple[int, int] | None = None
    for td in req.topic_data:
        name = topics.name_for_id(td.topic_id) if ctx.api_version >= 13 else td.name
        for pd in td.partition_data:
            records = pd.records
            if not name or records is None or topics.get(name, pd.index) is None:
                continue
            if producer is None and len(records) >= _PRODUCER_OFFSET + _PRODUCER.size:
                producer = _PRODUCER.unpack_from(records, _PRODUCER_OFFSET)
            wanted.append((name, pd.index))
    if producer is None:
        return None, []
    return producer, [tp for tp in wanted if not _in_open_transaction(topics.get(*tp), *producer)]


def _refused(
    req: protocol.ProduceRequest, errors: dict[tuple[str, int], ErrorCode]
) -> dict[tuple[str, int], ErrorCode]:
    out = {tp: _as_produce_error(e) for tp, e in errors.items() if e != ErrorCode.NONE}
    if out:
        log.info(
            "transactional produce by %s to %d partitions refused: %s",
            req.transactional_id,
            len(out),
            ", ".join(sorted({e.name for e in out.values()})),
        )
    return out


async def _add_to_transaction(
    ctx: RequestContext, req: protocol.ProduceRequest
) -> dict[tuple[str, int], ErrorCode]:
    """Transactions v2: the request's existing partitions join its producer's transaction
    (Kafka's leader sends AddPartitionsToTxn to the coordinator for them); the partitions
    refused and their errors. When this broker coordinates the transaction, the append's own
    verification then decides each partition's error, except a retriable refusal (the last
    transaction's markers still going out: CONCURRENT_TRANSACTIONS), which every partition
    answers as NOT_ENOUGH_REPLICAS, as from a remote coordinator; when another broker
    coordinates, its answer is the error of every partition added."""
    producer, wanted = _unverified(ctx, req)
    if producer is None or not wanted:
        return {}
    error, remote = await ctx.txn_coordinator.add_partitions_anywhere(
        req.transactional_id, producer[0], producer[1], wanted
    )
    if not remote and error not in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return {}
    return _refused(req, dict.fromkeys(wanted, error))


async def _verify_elsewhere(
    ctx: RequestContext, req: protocol.ProduceRequest
) -> dict[tuple[str, int], ErrorCode]:
    """Transactions v1 (KIP-890 part 1) when another broker coordinates the transaction: is
    each partition in the producer's ongoing transaction? Asked with AddPartitionsToTxn v5
    verify_only, as Kafka's leader does; the partitions refused and their errors. (When this
    broker coordinates it, the append's own check decides.) Unverified, a delayed produce of an
    ended transaction would open one that no coordinator knows, holding the partition's last
    stable offset back for good."""
    producer, wanted = _unverified(ctx, req)
    if producer is None or not wanted or not req.transactional_id:
        return {}
    found = await ctx.txn_coordinator.verify_elsewhere(
        req.transactional_id, producer[0], producer[1], wanted
    )
    return {} if found is None else _refused(req, found)


@handles(ApiKey.PRODUCE, versions=(0, 13))
async def produce(
    ctx: RequestContext, req: protocol.ProduceRequest
) -> protocol.ProduceResponse | None:
    broker = ctx.broker
    version = ctx.api_version
    responses = []
    waits = []
    flushes = []  # (partition, result) whose append made a group fsync due (flush.messages)
    denied = None if broker.authorizer is None else authz.produce_denied(ctx, req)
    not_in_txn: dict[tuple[str, int], ErrorCode] = {}  # refused by the txn coordinator
    if req.transactional_id and not denied:
        if version >= 12 and transactions_v2(broker):
            not_in_txn = await _add_to_transaction(ctx, req)
        else:
            not_in_txn = await _verify_elsewhere(ctx, req)
    for td in req.topic_data:
        name = td.name
        if version >= 13:
            name = broker.topics.name_for_id(td.topic_id) or ""
            if not name:
                unknown = AppendResult(ErrorCode.UNKNOWN_TOPIC_ID)
                responses.append((name, td, [(pd.index, unknown) for pd in td.partition_data]))
                continue
        parts = []
        if denied is not None:
            refused = denied or authz.topic_denied(ctx, AclOperation.WRITE, name)
        for pd in td.partition_data:
            if denied is not None and refused:
                parts.append((pd.index, AppendResult(refused)))
                continue
            if not_in_txn and (name, pd.index) in not_in_txn:
                error = _for_version(not_in_txn[(name, pd.index)], version)
                parts.append((pd.index, AppendResult(error)))
                continue
            pre = None
            if version < 3:
                pre = await _validate_legacy_off_loop(ctx, name, pd.index, pd.records)
            else:
                pre = await _validate_compressed(ctx, name, pd.index, pd.records)
            res = _produce_one(ctx, name, pd.index, pd.records, req.acks, req.transactional_id, pre)
            res.error = _for_version(res.error, version)
            if res.flush is not None:
                flushes.append((broker.topics.get(name, pd.index), res))
            if res.error == ErrorCode.NONE and req.acks == -1:
                part = broker.topics.get(name, pd.index)
                if part is not None:  # appended, so it exists
                    waits.append((part, res))
            parts.append((pd.index, res))
        responses.append((name, td, parts))
    if flushes:
        await _wait_for_flush(flushes)
        waits = [(part, res) for part, res in waits if res.error == ErrorCode.NONE]
    if waits:
        await broker.replicas.wait_for_acks(waits, req.timeout_ms)
    throttle_ms = 0
    if broker.quotas.produce.enabled:  # producer_byte_rate: throttle after answering (KIP-219)
        user, client_id = q.tags_of(ctx)
        throttle_ms = q.throttle(ctx, broker.quotas.produce.record(user, client_id, ctx.size))
    if req.acks == 0:
        # no answer is expected, so an error closes the connection: the producer notices and
        # refreshes its metadata (KafkaApis.handleProduceRequest)
        failed = [
            f"{name}-{idx}: {ErrorCode(res.error).name}"
            for name, _td, parts in responses
            for idx, res in parts
            if res.error
        ]
        if failed:
            raise ProtocolError(
                f"error during produce request with acks=0 from client {ctx.client_id!r}: "
                + ", ".join(failed[:10])
            )
        return None
    out = []
    for name, td, parts in responses:
        out.append(
            TopicResp(
                name=name,
                topic_id=getattr(td, "topic_id", None),
                partition_responses=[
                    PartResp(
                        index=idx,
                        error_code=res.error,
                        base_offset=res.base_offset,
                        log_append_time_ms=res.log_append_time,
                        log_start_offset=res.log_start_offset,
                        record_errors=[],
                        error_message=res.message if res.error else None,
                    )
                    for idx, res in parts
                ],
            )
        )
    return leader_discovery.annotate_produce(ctx, Resp(responses=out, throttle_time_ms=throttle_ms))
