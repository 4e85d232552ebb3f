"""Turns one request frame into response pieces: header parse, version check, decode, handler.

Protocol violations (bad header, unknown API, unsupported version, undecodable body, a null
where the schema forbids one) raise `ProtocolError`, which closes that one connection with one
warning line; business errors are in the response.
An ApiVersions request of an unsupported version is answered with v0, UNSUPPORTED_VERSION and,
as Kafka since 2.4 (KIP-511), one key: ApiVersions with the versions served, so the client asks
again at one of them and gets the whole answer (finalized features included). With the full key
list instead, franz-go took the v0 answer as final and never learned the cluster's features.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from odradek.broker.network.context import RequestContext
from odradek.broker.network.quotas import REQUEST_QUOTA_EXEMPT, request_quota
from odradek.broker.network.registry import REGISTRY, served
from odradek.broker.ops.faults import FaultInjector, error_response
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode
from odradek.wire.header import HeaderError, finish_flexible, parse_fixed
from odradek.wire.regions import Piece

if TYPE_CHECKING:
    from odradek.broker.network.connection import Connection
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

# Decoding a large request, and encoding the answer to one of the list requests below, runs in a
# worker thread, so that a 1 MB DescribeGroups or Metadata (400,000 names, seconds of Python)
# does not stop the event loop from serving every other client. Produce stays on the
# loop: its records stay bytes and it is the hot path.
THREAD_BYTES = 64 * 1024
THREAD_ENCODE = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_GROUPS})


class ProtocolError(Exception):
    """The client broke the protocol; its connection is closed."""


def unsupported_api_versions(broker: Broker, correlation_id: int) -> list[Piece]:
    own = [key for key in served(broker) if key[0] == ApiKey.API_VERSIONS]
    resp = protocol.ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=own)
    return [protocol.encode_response(ApiKey.API_VERSIONS, 0, correlation_id, resp)]


async def _inject(
    faults: FaultInjector,
    ctx: RequestContext,
    request: protocol.Message,  # the decoded request, of kafka-python's class for this key
) -> list[Piece] | None:
    """Apply a pause, delay or injected error; a list (maybe empty) replaces the answer."""
    await faults.running.wait()
    rule = faults.take(ctx.header.api_key)
    if rule is None:
        return None
    if rule.delay_ms:
        await asyncio.sleep(rule.delay_ms / 1000)
    if rule.error_code is None:
        return None
    key, version, corr = ctx.header.api_key, ctx.api_version, ctx.header.correlation_id
    log.info(
        "injecting %s into %s v%d from %s",
        ErrorCode(rule.error_code).name,
        ApiKey(key).name,
        version,
        ctx.client_id,
    )
    if key == ApiKey.PRODUCE and request.acks == 0:
        return []
    reg = REGISTRY.get(key)
    if reg is not None and reg.error_encoder is not None:
        return reg.error_encoder(ctx, request, rule.error_code)
    resp = error_response(key, version, request, rule.error_code)
    return [protocol.encode_response(key, version, corr, resp)]


async def dispatch(
    broker: Broker, payload: bytes | bytearray, peer: str, connection: Connection | None = None
) -> list[Piece] | None:
    try:
        header = parse_fixed(payload)
    except HeaderError as exc:
        raise ProtocolError(f"bad request header: {exc}") from None
    reg = REGISTRY.get(header.api_key)
    version = header.api_version
    if reg is None or not reg.min_version <= version <= reg.max_version:
        if header.api_key == ApiKey.API_VERSIONS:
            return unsupported_api_versions(broker, header.correlation_id)
        raise ProtocolError(
            f"unsupported API key {header.api_key} version {version} "
            f"from client {header.client_id!r}"
        )
    try:
        if protocol.is_flexible_request(header.api_key, version):
            finish_flexible(payload, header)
        big = len(payload) > THREAD_BYTES and header.api_key != ApiKey.PRODUCE
        if big:
            request = await asyncio.to_thread(
                protocol.decode_request, header.api_key, version, payload, header.body_offset
            )
        else:
            request = protocol.decode_request(header.api_key, version, payload, header.body_offset)
    except (HeaderError, protocol.DecodeError) as exc:
        raise ProtocolError(
            f"cannot decode {ApiKey(header.api_key).name} v{version} "
            f"from client {header.client_id!r}: {exc}"
        ) from None
    ctx = RequestContext(broker, header, peer, connection, size=len(payload))
    if connection is not None:
        ctx.listener = connection.listener_name
        ctx.principal = connection.principal
    faults = broker.faults
    if faults.active:
        injected = await _inject(faults, ctx, request)
        if injected is not None:
            return injected or None
    handling = reg.handler(ctx, request)
    if broker.quotas.request.enabled and header.api_key not in REQUEST_QUOTA_EXEMPT:
        handling = request_quota(ctx, request, handling, reg.raw)  # request_percentage (quotas.py)
    metrics = broker.metrics
    if metrics is None:
        response = await handling
    else:
        started = time.perf_counter()
        queued = time.monotonic() - connection.cut_at if connection is not None else 0.0
        response = await handling
        metrics.request(header.api_key, time.perf_counter() - started, response, queued)
    if response is None:
        return None
    if reg.raw:
        pieces: list[Piece] = response  # a raw handler returns its framed pieces
        return pieces
    if big and header.api_key in THREAD_ENCODE:
        encoded = await asyncio.to_thread(
            protocol.encode_response, header.api_key, version, header.correlation_id, response
        )
        return [encoded]
    return [protocol.encode_response(header.api_key, version, header.correlation_id, response)]
