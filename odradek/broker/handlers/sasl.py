"""SaslHandshake (key 17), v0-1, and SaslAuthenticate (key 36), v0-2, outside an exchange.

On a SASL listener the connection's SaslGate (odradek/broker/network/sasl.py) answers both while
the client authenticates. A request that reaches these handlers came on a listener without SASL,
or after authentication without a session to renew: Kafka's KafkaApis answers
ILLEGAL_SASL_STATE then, and so do these. Registered here so that ApiVersions advertises them:
clients look for SaslHandshake before they start SASL.
"""

from __future__ import annotations

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode


@handles(ApiKey.SASL_HANDSHAKE, versions=(0, 1))
async def sasl_handshake(
    ctx: RequestContext, req: protocol.SaslHandshakeRequest
) -> protocol.SaslHandshakeResponse:
    return protocol.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(ApiKey.SASL_AUTHENTICATE, versions=(0, 2))
async def sasl_authenticate(
    ctx: RequestContext, req: protocol.SaslAuthenticateRequest
) -> protocol.SaslAuthenticateResponse:
    return protocol.SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication"
        if ctx.connection is not None and ctx.connection.sasl_gate is not None
        else "SASL is not enabled on this listener",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
