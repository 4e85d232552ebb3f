"""UpdateFeatures (key 57), v0-2: `kafka-features upgrade / downgrade` and Admin.updateFeatures
(KIP-584, KIP-778). Needs ALTER on the cluster. Each update names a feature and its new finalized
level; v0 allows a downgrade with allow_downgrade, v1+ with upgrade_type 2 (safe) or 3 (unsafe);
a level below 1 removes the feature (level 0). As Kafka's controller, the request is applied
whole or not at all: one refused update refuses them all (INVALID_UPDATE_VERSION), and
validate_only (v1+) checks without applying. v0-1 answer per feature as well; v2 only at the top.
The levels themselves are odradek/broker/features.py's, reported by ApiVersions."""

from __future__ import annotations

from odradek.broker.features import features_of
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

UPGRADE = 1


@handles(ApiKey.UPDATE_FEATURES, versions=(0, 2))
async def update_features(
    ctx: RequestContext, req: protocol.UpdateFeaturesRequest
) -> protocol.UpdateFeaturesResponse:
    version = ctx.api_version
    features = features_of(ctx.broker)
    error, message = ErrorCode.NONE, None
    wanted: dict[str, int] = {}
    if not ctx.authorize_cluster(AclOperation.ALTER):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        message = "the principal may not alter the cluster"
    for update in req.feature_updates if error == ErrorCode.NONE else []:
        name, level = update.feature, max(0, update.max_version_level)
        if version == 0:
            downgrade = bool(update.allow_downgrade)
        else:
            downgrade = update.upgrade_type != UPGRADE
        current = features.level(name)
        reason = features.check(name, level)
        if reason is None and level < current and not downgrade:
            reason = f"cannot downgrade {name} from {current} to {level} without a downgrade type"
        if reason is None and name in wanted:
            reason = f"feature {name} is updated twice"
        if reason is not None:
            error, message = ErrorCode.INVALID_UPDATE_VERSION, reason
            break
        wanted[name] = level
    validate_only = version >= 1 and bool(req.validate_only)
    if error == ErrorCode.NONE and not validate_only:
        for name, level in wanted.items():
            if features.level(name) != level:
                features.update(name, level)
    Resp = protocol.UpdateFeaturesResponse
    extra: dict[str, object] = {}
    if version <= 1:
        extra["results"] = [
            Resp.UpdatableFeatureResult(feature=u.feature, error_code=error, error_message=message)
            for u in req.feature_updates
        ]
    return Resp(throttle_time_ms=0, error_code=error, error_message=message, **extra)
