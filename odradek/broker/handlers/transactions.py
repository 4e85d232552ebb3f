"""Transactional producer APIs, answered by the transaction coordinator (KIP-98).

AddPartitionsToTxn (key 24), v0-5: v1 same as v0; v2 PRODUCER_FENCED (KIP-588, older versions
get INVALID_PRODUCER_EPOCH); v3 flexible; v4 batched transactions and verify_only with a
top-level error (KIP-890 part 1, broker to broker); v5 TRANSACTION_ABORTABLE.
AddOffsetsToTxn (key 25), v0-4: v1 throttle first; v2 PRODUCER_FENCED; v3 flexible; v4 KIP-890.
EndTxn (key 26), v0-5: v1 throttle first; v2 PRODUCER_FENCED; v3 flexible; v4 KIP-890; v5
transaction.version 2 (KIP-890 part 2): the epoch is bumped by every EndTxn and the response
carries the producer id and epoch to go on with.
TxnOffsetCommit (key 28), v0-5: v2 committed_leader_epoch; v3 flexible, member id, generation
and group instance id (KIP-447), PRODUCER_FENCED; v4 KIP-890; v5 (with transaction.version 2
finalized) adds the group's offsets partition to the transaction, AddOffsetsToTxn is not sent.
Offsets stay pending in the group coordinator until the COMMIT marker reaches the group's
offsets partition.
WriteTxnMarkers (key 27), v0-2 (v1 flexible; v0, gone in Kafka 4.0, is the same message; v2 the
marker's transaction version, KIP-1228, which changes nothing in how it is written here): markers
from a transaction coordinator for partitions this broker leads.
"""

from __future__ import annotations

from typing import TypeAlias

from odradek.broker.features import transactions_v2
from odradek.broker.handler_support import partition_errors, partition_exists
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import offsets_replicated
from odradek.broker.partitions.topics import INTERNAL_TOPICS
from odradek.broker.transactions.markers import OFFSETS_TOPIC, write_local_markers
from odradek.clock import now_ms
from odradek.coordinator.group.metadata import OffsetAndMetadata
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

# The per-topic result class differs between AddPartitionsToTxn v3- and v4+; same fields.
TopicResult: TypeAlias = protocol.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult


def _fenced(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """Versions before KIP-588 know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _txn_ok(ctx: RequestContext, txn_id: str | None) -> bool:
    """WRITE on the transactional id (a null id is denied)."""
    if ctx.broker.authorizer is None:
        return True
    return txn_id is not None and ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
    )


def _group_ok(ctx: RequestContext, group_id: str) -> bool:
    return ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id)


# -- AddPartitionsToTxn ------------------------------------------------------------------------


async def _add_one(
    ctx: RequestContext,
    txn_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: list[protocol.Message],
    verify_only: bool,
) -> dict[tuple[str, int], ErrorCode]:
    """Per-partition errors for one transaction (Kafka: unknown partitions fail the rest with
    OPERATION_NOT_ATTEMPTED; one coordinator error applies to all)."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    coord = ctx.txn_coordinator
    if ctx.broker.authorizer is not None and ctx.api_version < 4:  # a client's request
        if not _txn_ok(ctx, txn_id):
            return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = {
            t.name
            for t in topics
            if t.name not in INTERNAL_TOPICS
            and not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, t.name)
        }
        if denied:  # nothing is added; the allowed partitions are not attempted
            return {
                tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if tp[0] in denied
                else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
    unknown = {tp for tp in wanted if not partition_exists(ctx.broker, *tp)}
    if unknown:
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    if verify_only:
        found = coord.verify_partitions(txn_id, producer_id, producer_epoch, wanted)
        if ctx.api_version >= 5:  # KIP-890: the client may abort and go on
            found = {
                tp: ErrorCode.TRANSACTION_ABORTABLE if e == ErrorCode.INVALID_TXN_STATE else e
                for tp, e in found.items()
            }
        return found
    error = await coord.add_partitions(txn_id, producer_id, producer_epoch, wanted)
    return dict.fromkeys(wanted, error)


def _topic_results(
    cls: type[TopicResult],
    topics: list[protocol.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
    errors: dict[tuple[str, int], ErrorCode],
    version: int,
) -> list[TopicResult]:
    Part = cls.AddPartitionsToTxnPartitionResult
    return [
        cls(
            name=t.name,
            results_by_partition=[
                Part(
                    partition_index=p, partition_error_code=_fenced(errors[(t.name, p)], version, 2)
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 5))
async def add_partitions_to_txn(
    ctx: RequestContext, req: protocol.AddPartitionsToTxnRequest
) -> protocol.AddPartitionsToTxnResponse:
    version = ctx.api_version
    Resp = protocol.AddPartitionsToTxnResponse
    if version < 4:
        topics = list(req.v3_and_below_topics)
        errors = await _add_one(
            ctx,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            topics,
            False,
        )
        return Resp(
            throttle_time_ms=0,
            results_by_topic_v3_and_below=_topic_results(
                Resp.AddPartitionsToTxnTopicResult, topics, errors, version
            ),
        )
    Result = Resp.AddPartitionsToTxnResult
    if ctx.broker.authorizer is not None and not ctx.authorize_cluster(
        AclOperation.CLUSTER_ACTION
    ):  # v4+ comes from brokers
        return Resp(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )
    results = []
    for txn in req.transactions:
        topics = list(txn.topics)
        errors = await _add_one(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            topics,
            bool(txn.verify_only),
        )
        results.append(
            Result(
                transactional_id=txn.transactional_id,
                topic_results=_topic_results(
                    Result.AddPartitionsToTxnTopicResult, topics, errors, version
                ),
            )
        )
    return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)


# -- AddOffsetsToTxn / EndTxn ------------------------------------------------------------------


@handles(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 4))
async def add_offsets_to_txn(
    ctx: RequestContext, req: protocol.AddOffsetsToTxnRequest
) -> protocol.AddOffsetsToTxnResponse:
    if not _txn_ok(ctx, req.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not _group_ok(ctx, req.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        error = await ctx.txn_coordinator.add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
        )
    return protocol.AddOffsetsToTxnResponse(
        throttle_time_ms=0, error_code=_fenced(error, ctx.api_version, 2)
    )


@handles(ApiKey.END_TXN, versions=(0, 5))
async def end_txn(ctx: RequestContext, req: protocol.EndTxnRequest) -> protocol.EndTxnResponse:
    pid, epoch = -1, -1
    if not _txn_ok(ctx, req.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif ctx.api_version >= 5:
        error, pid, epoch = await ctx.txn_coordinator.end_txn_v2(
            req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed)
        )
    else:
        error = await ctx.txn_coordinator.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed)
        )
    extra = {"producer_id": pid, "producer_epoch": epoch} if ctx.api_version >= 5 else {}
    return protocol.EndTxnResponse(
        throttle_time_ms=0, error_code=_fenced(error, ctx.api_version, 2), **extra
    )


# -- TxnOffsetCommit ---------------------------------------------------------------------------


async def _txn_offset_errors(
    ctx: RequestContext, req: protocol.TxnOffsetCommitRequest
) -> dict[tuple[str, int], ErrorCode]:
    version = ctx.api_version
    broker = ctx.broker
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    now = now_ms()
    refused = None
    if not _txn_ok(ctx, req.transactional_id):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not _group_ok(ctx, req.group_id):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    for t in req.topics:
        topic_refused = refused
        if topic_refused is None and not ctx.authorize(
            AclOperation.READ, ResourceType.TOPIC, t.name
        ):
            topic_refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if topic_refused is not None:
                errors[tp] = topic_refused
                continue
            if not partition_exists(broker, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now,
            )
    if not offsets:
        return errors
    groups = broker.group_coordinator
    coord = ctx.txn_coordinator
    # the group's offsets partition must be in the producer's ongoing transaction (added by
    # AddOffsetsToTxn), under its current producer id and epoch
    index = groups.partition_for(req.group_id)
    error: ErrorCode | None = None
    if index is not None and version >= 5 and transactions_v2(broker):
        # transactions v2: no AddOffsetsToTxn, the commit adds the offsets partition itself
        added, remote = await coord.add_partitions_anywhere(
            req.transactional_id, req.producer_id, req.producer_epoch, [(OFFSETS_TOPIC, index)]
        )
        if added == ErrorCode.CONCURRENT_TRANSACTIONS or (remote and added != ErrorCode.NONE):
            # the transaction coordinator unreachable: the client looks up and retries
            error = (
                ErrorCode.COORDINATOR_NOT_AVAILABLE
                if added == ErrorCode.NETWORK_EXCEPTION
                else added
            )
    if index is not None and error is None:
        error = coord.check_append(
            req.transactional_id, req.producer_id, req.producer_epoch, (OFFSETS_TOPIC, index)
        )
        if error == ErrorCode.INVALID_PRODUCER_EPOCH:
            error = ErrorCode.PRODUCER_FENCED
    if error is not None:
        errors.update(dict.fromkeys(offsets, _fenced(error, version, 3)))
        return errors
    member_id = req.member_id if version >= 3 else ""
    instance_id = req.group_instance_id if version >= 3 else None
    generation = req.generation_id if version >= 3 else -1
    results = groups.txn_offset_commit(
        req.group_id,
        req.producer_id,
        req.producer_epoch,
        member_id,
        instance_id,
        generation,
        offsets,
    )
    errors.update({tp: _fenced(ErrorCode(e), version, 3) for tp, e in results.items()})
    return errors


async def _replicated(
    ctx: RequestContext,
    req: protocol.TxnOffsetCommitRequest,
    errors: dict[tuple[str, int], ErrorCode],
) -> None:
    """Answer the staged offsets only once the ISR has them (internal_topics.offsets_replicated)."""
    if any(e == ErrorCode.NONE for e in errors.values()):
        error = await offsets_replicated(ctx.broker, req.group_id)
        if error != ErrorCode.NONE:
            errors.update({tp: error for tp, e in errors.items() if e == ErrorCode.NONE})


@handles(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 5))
async def txn_offset_commit(
    ctx: RequestContext, req: protocol.TxnOffsetCommitRequest
) -> protocol.TxnOffsetCommitResponse:
    Resp = protocol.TxnOffsetCommitResponse
    Topic = Resp.TxnOffsetCommitResponseTopic
    Part = Topic.TxnOffsetCommitResponsePartition
    errors = await _txn_offset_errors(ctx, req)
    await _replicated(ctx, req, errors)
    return Resp(throttle_time_ms=0, topics=partition_errors(req.topics, errors, Topic, Part))


# -- WriteTxnMarkers ---------------------------------------------------------------------------


@handles(ApiKey.WRITE_TXN_MARKERS, versions=(0, 2))
async def write_txn_markers(
    ctx: RequestContext, req: protocol.WriteTxnMarkersRequest
) -> protocol.WriteTxnMarkersResponse:
    Resp = protocol.WriteTxnMarkersResponse
    Result = Resp.WritableTxnMarkerResult
    TopicResult = Result.WritableTxnMarkerTopicResult
    PartResult = TopicResult.WritableTxnMarkerPartitionResult
    markers = []
    allowed = ctx.broker.authorizer is None or (
        ctx.authorize_cluster(AclOperation.ALTER, log_if_denied=False)
        or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    )
    for m in req.markers:
        wanted = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        if not allowed:  # nothing is written
            errors = dict.fromkeys(wanted, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        else:
            errors = await write_local_markers(
                ctx.broker,
                m.producer_id,
                m.producer_epoch,
                m.coordinator_epoch,
                bool(m.transaction_result),
                wanted,
            )
        topics = [
            TopicResult(
                name=t.name,
                partitions=[
                    PartResult(partition_index=p, error_code=errors[(t.name, p)])
                    for p in t.partition_indexes
                ],
            )
            for t in m.topics
        ]
        markers.append(Result(producer_id=m.producer_id, topics=topics))
    return Resp(markers=markers)
