"""ApiVersions (key 18), v0-4. v3 adds client software name/version and is flexible; the
response always uses response header v0. The key list comes from the handler registry."""

from __future__ import annotations

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import advertised, handles
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode


@handles(ApiKey.API_VERSIONS, versions=(0, 4))
async def api_versions(
    ctx: RequestContext, req: protocol.ApiVersionsRequest
) -> protocol.ApiVersionsResponse:
    if ctx.api_version >= 3 and ctx.connection is not None:
        ctx.connection.client_software = (req.client_software_name, req.client_software_version)
    return protocol.ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[(k, lo, hi) for k, lo, hi in advertised()],
        throttle_time_ms=0,
    )
