"""InitProducerId (key 22), v0-5. Without a transactional id it hands out a fresh producer id with
epoch 0 (idempotent producers, KIP-98); v2 flexible; v3 producer id/epoch for KIP-360 bumps.
With a transactional id the transaction coordinator answers."""

from __future__ import annotations

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode


@handles(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
async def init_producer_id(
    ctx: RequestContext, req: protocol.InitProducerIdRequest
) -> protocol.InitProducerIdResponse:
    broker = ctx.broker
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
