"""KIP-714 client telemetry: GetTelemetrySubscriptions (key 71) v0, PushTelemetry (key 72) v0,
and ListConfigResources (key 74; ListClientMetricsResources before Kafka 4.1) v0-1.

The subscriptions, client instances and pushed metrics are the broker's ClientMetricsManager
(`odradek/broker/telemetry/manager.py`); pushed metrics appear on the Prometheus endpoint as
`odradek_client_*` series labelled by client id and client instance id (ops/metrics.py).
Errors answer with the code alone, as Kafka's getErrorResponse (no message field); an
unexpected failure is INVALID_REQUEST, as KafkaApis answers it, never a closed connection.

ListConfigResources v0 lists the ClientMetrics resources (names only, type 16 implied). v1
takes resource types: TOPIC (2), BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS (16) and GROUP
(32, the groups with per-group configs) are listed; an empty list means all of them; another
type is INVALID_REQUEST. With an authorizer it needs DESCRIBE_CONFIGS on the
cluster, as Kafka's KafkaApis (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.telemetry import manager as tm
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

GetResp: TypeAlias = protocol.GetTelemetrySubscriptionsResponse
PushResp: TypeAlias = protocol.PushTelemetryResponse
ListResp: TypeAlias = protocol.ListConfigResourcesResponse

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
LISTED_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def client_attributes(ctx: RequestContext) -> dict[str, str | None]:
    """ClientMetricsInstanceMetadata's selectors for this request's connection."""
    software = ctx.connection.client_software if ctx.connection is not None else None
    port = ctx.peer.rsplit(":", 1)[1] if ":" in ctx.peer else None
    return {
        tm.CLIENT_ID: ctx.client_id,
        tm.CLIENT_SOFTWARE_NAME: software[0] if software else None,
        tm.CLIENT_SOFTWARE_VERSION: software[1] if software else None,
        tm.CLIENT_SOURCE_ADDRESS: ctx.client_host,
        tm.CLIENT_SOURCE_PORT: port,
    }


def _get_error(code: ErrorCode) -> GetResp:
    return GetResp(
        throttle_time_ms=0,
        error_code=code,
        client_instance_id=tm.ZERO_UUID,
        subscription_id=0,
        accepted_compression_types=[],
        push_interval_ms=0,
        telemetry_max_bytes=0,
        delta_temporality=False,
        requested_metrics=[],
    )


@handles(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, versions=(0, 0))
async def get_telemetry_subscriptions(
    ctx: RequestContext, req: protocol.GetTelemetrySubscriptionsRequest
) -> protocol.GetTelemetrySubscriptionsResponse:
    manager = ctx.broker.telemetry
    try:
        sub = manager.get_subscriptions(req.client_instance_id, client_attributes(ctx))
    except tm.TelemetryError as exc:
        log.debug("GetTelemetrySubscriptions from %s: %s", ctx.client_id, exc.message)
        return _get_error(exc.code)
    except Exception:  # as KafkaApis: INVALID_REQUEST, the connection stays
        log.exception("GetTelemetrySubscriptions from %s failed", ctx.client_id)
        return _get_error(ErrorCode.INVALID_REQUEST)
    return GetResp(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        client_instance_id=sub.instance_id,
        subscription_id=sub.subscription_id,
        accepted_compression_types=list(tm.ACCEPTED_COMPRESSION),
        push_interval_ms=sub.push_interval_ms,
        telemetry_max_bytes=manager.telemetry_max_bytes,
        delta_temporality=True,
        requested_metrics=sub.metrics,
    )


@handles(ApiKey.PUSH_TELEMETRY, versions=(0, 0))
async def push_telemetry(
    ctx: RequestContext, req: protocol.PushTelemetryRequest
) -> protocol.PushTelemetryResponse:
    manager = ctx.broker.telemetry
    try:
        manager.push(
            req.client_instance_id,
            client_attributes(ctx),
            req.subscription_id,
            bool(req.terminating),
            req.compression_type,
            req.metrics,
        )
    except tm.TelemetryError as exc:
        log.debug("PushTelemetry from %s: %s", ctx.client_id, exc.message)
        return PushResp(throttle_time_ms=0, error_code=exc.code)
    except Exception:  # as KafkaApis: INVALID_REQUEST, the connection stays
        log.exception("PushTelemetry from %s failed", ctx.client_id)
        return PushResp(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    return PushResp(throttle_time_ms=0, error_code=ErrorCode.NONE)


def _names(broker: Broker, rtype: int) -> list[str]:
    if rtype == TOPIC:
        return sorted(broker.store.topics)
    if rtype in (BROKER, BROKER_LOGGER):
        ids = broker.store.live_brokers() if broker.store.clustered else [broker.node_id]
        return [str(i) for i in sorted(ids)]
    if rtype == GROUP:
        return sorted(broker.store.group_configs)
    return sorted(getattr(broker.store, "client_metrics", {}))


@handles(ApiKey.LIST_CONFIG_RESOURCES, versions=(0, 1))
async def list_config_resources(
    ctx: RequestContext, req: protocol.ListConfigResourcesRequest
) -> protocol.ListConfigResourcesResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return ListResp(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            config_resources=[],
        )
    types: list[int] = [CLIENT_METRICS]
    if ctx.api_version >= 1:
        types = list(dict.fromkeys(req.resource_types or ())) or list(LISTED_TYPES)
        if any(t not in LISTED_TYPES for t in types):
            return ListResp(
                throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, config_resources=[]
            )
    resources = [
        ListResp.ConfigResource(resource_name=name, resource_type=t)
        for t in types
        for name in _names(ctx.broker, t)
    ]
    return ListResp(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=resources)
