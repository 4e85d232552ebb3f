"""ApiVersions (key 18), v0-4. v3 adds client software name/version and is flexible; the
response always uses response header v0. The key list comes from the handler registry.

v3+ also carries the features (tagged fields), as a Kafka 4.x broker: the supported ranges (a
feature whose range starts at 0 is left out below v4, as Kafka does for older clients, KAFKA-17492)
and the cluster-wide finalized levels with their epoch (level 0 is not listed), from
odradek/broker/features.py. `group.version` 1 tells clients that KIP-848 consumer groups
(ConsumerGroupHeartbeat) are served; `transaction.version` 2 that transactions v2 are.

v3+ client software names and versions must match Kafka's pattern (KIP-511): otherwise the
answer is INVALID_REQUEST with no keys, as Kafka's ApiVersionsRequest.isValid."""

from __future__ import annotations

import re

from odradek.broker.features import SUPPORTED, features_of
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles, served
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

# KIP-511: letters, digits, '-' and '.', starting and ending with a letter or digit
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@handles(ApiKey.API_VERSIONS, versions=(0, 4))
async def api_versions(
    ctx: RequestContext, req: protocol.ApiVersionsRequest
) -> protocol.ApiVersionsResponse:
    Resp = protocol.ApiVersionsResponse
    if ctx.api_version >= 3 and not all(
        _SOFTWARE.fullmatch(v or "")
        for v in (req.client_software_name, req.client_software_version)
    ):
        return Resp(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    if ctx.api_version >= 3 and ctx.connection is not None:
        ctx.connection.client_software = (req.client_software_name, req.client_software_version)
    features: dict[str, object] = {}
    if ctx.api_version >= 3:
        finalized = features_of(ctx.broker)
        features = {
            "supported_features": [
                Resp.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
                for name, (lo, hi) in sorted(SUPPORTED.items())
                if lo > 0 or ctx.api_version >= 4
            ],
            "finalized_features_epoch": finalized.epoch,
            "finalized_features": [
                Resp.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level
                )
                for name, level in sorted(finalized.levels.items())
                if level != 0
            ],
        }
    return Resp(
        error_code=ErrorCode.NONE,
        api_keys=served(ctx.broker),
        throttle_time_ms=0,
        **features,
    )
