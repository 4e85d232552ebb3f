"""ApiVersions (key 18), v0-4. v3 adds client software name/version and is flexible; the
response always uses response header v0. The key list comes from the handler registry.

v3+ also carries the features (tagged fields), as a Kafka 4.x broker: the supported ranges (a
feature whose range starts at 0 is left out below v4, as Kafka does for older clients, KAFKA-17492)
and the cluster-wide finalized levels with their epoch (level 0 is not listed), from
odradek/broker/features.py. `group.version` 1 tells clients that KIP-848 consumer groups
(ConsumerGroupHeartbeat) are served; `transaction.version` 2 that transactions v2 are."""

from __future__ import annotations

from odradek.broker.features import SUPPORTED, features_of
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
    Resp = protocol.ApiVersionsResponse
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
        api_keys=[(k, lo, hi) for k, lo, hi in advertised() if k not in _not_served(ctx)],
        throttle_time_ms=0,
        **features,
    )


def _not_served(ctx: RequestContext) -> tuple[int, ...]:
    """DescribeQuorum is a KRaft API: a ZooKeeper-mode broker does not list it (as Kafka's,
    whose zkBroker listener lacks it)."""
    return (ApiKey.DESCRIBE_QUORUM,) if ctx.broker.config.get("zookeeper.connect") else ()
