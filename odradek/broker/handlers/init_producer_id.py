"""InitProducerId (key 22), v0-5. Without a transactional id it hands out a fresh producer id with
epoch 0 (idempotent producers, KIP-98); v2 flexible; v3 producer id/epoch for KIP-360 bumps.
With a transactional id the transaction coordinator answers."""

from __future__ import annotations

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode


def _denied(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster or WRITE on
    some topic (KafkaApis.handleInitProducerIdRequest)."""
    broker = ctx.broker
    if transactional_id is not None:
        if ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False):
        return None
    assert broker.authorizer is not None
    if broker.authorizer.authorize_by_resource_type(
        ctx.principal, ctx.acl_host, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@handles(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
async def init_producer_id(
    ctx: RequestContext, req: protocol.InitProducerIdRequest
) -> protocol.InitProducerIdResponse:
    broker = ctx.broker
    denied = None if broker.authorizer is None else _denied(ctx, req.transactional_id)
    if denied is not None:
        return protocol.InitProducerIdResponse(
            throttle_time_ms=0, error_code=denied, producer_id=-1, producer_epoch=-1
        )
    if req.transactional_id is not None:
        code, pid, epoch = await broker.txn_coordinator.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, req.producer_id, req.producer_epoch
        )
        if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH  # KIP-588: older clients know this one
        return protocol.InitProducerIdResponse(
            throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
        )
    return protocol.InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        producer_id=broker.next_producer_id(),
        producer_epoch=0,
    )
