"""DescribeConfigs (key 32) v0-4, AlterConfigs (key 33) v0-2, IncrementalAlterConfigs (key 44)
v0-1: topic-level configs (KIP-133, KIP-226 synonyms, KIP-339 incremental, KIP-569 types/docs).

DescribeConfigs v0 answers is_default (the source is DEFAULT_CONFIG) where v1 adds config_source
and synonyms; v3 adds config_type and documentation; v4 is
flexible. AlterConfigs replaces a topic's whole override set (v2 flexible); IncrementalAlterConfigs
applies SET / DELETE / APPEND / SUBTRACT per key (v1 flexible). Both honour validate_only.

Resources: TOPIC (2) is served in full. BROKER (4) is described (every key of `BROKER_KEYS`, with
STATIC_BROKER_CONFIG or DEFAULT_CONFIG as source, all read-only) but cannot be altered: odradek
reads broker configs at start-up only, so any change is INVALID_REQUEST, as Kafka answers for a
config that is not dynamically updatable. The empty broker name is the cluster-wide dynamic
default, which is always empty here, as on a Kafka cluster with no dynamic defaults set.
CLIENT_METRICS (16): KIP-714 subscriptions, described and altered (odradek/broker/telemetry/
configs.py), authorized on the cluster as BROKER.
GROUP (32): per-group configs of KIP-848 and share groups (odradek/coordinator/group_configs.py),
authorized on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.config_entries import (
    DEFAULT_CONFIG,
    ConfigEntry,
    broker_entries,
    render_optional,
    topic_entries,
)
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.topics import TopicError, check_topic_name
from odradek.broker.telemetry import configs as client_metrics_configs
from odradek.coordinator import group_configs
from odradek.log.config import TOPIC_CONFIGS
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import TopicInfo
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

# ConfigResource.Type
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}

# AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class ResourceError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_broker_name(broker: Broker, name: str) -> None:
    try:
        node = int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != broker.node_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )


def config_denied(
    ctx: RequestContext, operation: AclOperation, rtype: int, name: str
) -> str | None:
    """The denial of DESCRIBE_CONFIGS / ALTER_CONFIGS on a resource (a topic; the cluster for
    BROKER, BROKER_LOGGER and CLIENT_METRICS), as an error message; None when allowed or not
    checked."""
    if ctx.broker.authorizer is None:
        return None
    if rtype == TOPIC:
        if not ctx.authorize(operation, ResourceType.TOPIC, name):
            return "Topic authorization failed."
    elif rtype in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        if not ctx.authorize_cluster(operation):
            return "Cluster authorization failed."
    elif rtype == GROUP:
        if not ctx.authorize(operation, ResourceType.GROUP, name):
            return "Group authorization failed."
    return None


def _denied_code(rtype: int) -> ErrorCode:
    if rtype == TOPIC:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rtype == GROUP:
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _unsupported(rtype: int) -> ResourceError:
    label = RESOURCE_NAMES.get(rtype, str(rtype))
    return ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {label}")


# The resources of AlterConfigs and IncrementalAlterConfigs share their field names.
AlterResource: TypeAlias = (
    protocol.AlterConfigsRequest.AlterConfigsResource
    | protocol.IncrementalAlterConfigsRequest.AlterConfigsResource
)
AlterableConfig: TypeAlias = (
    protocol.AlterConfigsRequest.AlterConfigsResource.AlterableConfig
    | protocol.IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
)

# -- DescribeConfigs ----------------------------------------------------------------------------

DResp: TypeAlias = protocol.DescribeConfigsResponse
DResult: TypeAlias = protocol.DescribeConfigsResponse.DescribeConfigsResult
DEntry = DResult.DescribeConfigsResourceResult
DSynonym = DEntry.DescribeConfigsSynonym


def _entries_for(broker: Broker, rtype: int, name: str) -> list[ConfigEntry]:
    if rtype == TOPIC:
        return topic_entries(broker.config, _topic_info(broker, name).configs)
    if rtype == BROKER:
        if not name:
            return []  # cluster-wide dynamic defaults: none
        check_broker_name(broker, name)
        return broker_entries(broker.config)
    if rtype == CLIENT_METRICS:  # KIP-714 subscriptions (odradek/broker/telemetry/configs.py)
        try:
            return client_metrics_configs.entries(broker, name)
        except client_metrics_configs.ClientMetricsConfigError as exc:
            raise ResourceError(exc.code, exc.message) from None
    if rtype == GROUP:
        try:
            return group_configs.entries(broker, name)
        except group_configs.GroupConfigError as exc:
            raise ResourceError(exc.code, exc.message) from None
    raise _unsupported(rtype)


def _describe_one(
    broker: Broker,
    res: protocol.DescribeConfigsRequest.DescribeConfigsResource,
    synonyms: bool,
    docs: bool,
) -> DResult:
    try:
        entries = _entries_for(broker, res.resource_type, res.resource_name)
    except ResourceError as exc:
        return DResult(
            error_code=exc.code,
            error_message=exc.message,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=[],
        )
    if res.configuration_keys:
        wanted = set(res.configuration_keys)
        entries = [e for e in entries if e.name in wanted]
    return DResult(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=[
            DEntry(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_default=e.source == DEFAULT_CONFIG,
                is_sensitive=False,
                synonyms=[DSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms]
                if synonyms
                else [],
                config_type=e.config_type,
                documentation=e.doc if docs else None,
            )
            for e in entries
        ],
    )


@handles(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4))
async def describe_configs(
    ctx: RequestContext, req: protocol.DescribeConfigsRequest
) -> protocol.DescribeConfigsResponse:
    docs = ctx.api_version >= 3 and bool(req.include_documentation)
    results = []
    for res in req.resources:
        denied = config_denied(
            ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name
        )
        if denied is not None:
            code = _denied_code(res.resource_type)
            results.append(
                DResult(
                    error_code=code,
                    error_message=denied,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=[],
                )
            )
            continue
        results.append(_describe_one(ctx.broker, res, bool(req.include_synonyms), docs))
    return DResp(throttle_time_ms=0, results=results)


# -- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------------


def _check_shape(res: AlterResource, incremental: bool) -> None:
    """Kafka's ConfigAdminManager.preprocess checks, in its order and with its messages."""
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [
        c.name
        for c in res.configs
        if c.value is None and not (incremental and c.config_operation == DELETE)
    ]
    if nulls:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        )
    if incremental:
        for c in res.configs:
            if c.config_operation not in OP_NAMES:
                raise ResourceError(
                    ErrorCode.INVALID_REQUEST, f"Unknown operations type {c.config_operation}"
                )


def _refuse_broker_change(broker: Broker, res: AlterResource) -> None:
    if res.resource_name:
        check_broker_name(broker, res.resource_name)
    if res.configs:
        keys = ", ".join(sorted(c.name for c in res.configs))
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: {keys} (odradek reads "
            "broker configs only at start-up; set them in server.properties)",
        )


def _topic_info(broker: Broker, name: str) -> TopicInfo:
    try:
        check_topic_name(name)
    except TopicError as exc:
        raise ResourceError(exc.code, str(exc)) from None
    info = broker.topics.info(name)
    if info is None:
        raise ResourceError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        )
    return info


def _list_parts(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _incremental_overrides(
    broker: Broker, current: dict[str, str], configs: list[AlterableConfig]
) -> dict[str, str]:
    """Apply SET/DELETE/APPEND/SUBTRACT to a copy of the topic's overrides (KIP-339)."""
    out = dict(current)
    for c in configs:
        defn = TOPIC_CONFIGS.get(c.name)
        if defn is None:
            raise ResourceError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
        op = c.config_operation
        if op == SET:
            out[c.name] = c.value
        elif op == DELETE:
            out.pop(c.name, None)
        else:
            if defn.type != "list":
                raise ResourceError(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {OP_NAMES[op]} to key {c.name} because its type is not LIST.",
                )
            base = out.get(c.name)
            if base is None:
                base = render_optional(broker.config.topic_default(c.name)[0])
            parts = _list_parts(base)
            for item in _list_parts(c.value):
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            out[c.name] = ",".join(parts)
    return out


def _alter_one(broker: Broker, res: AlterResource, validate_only: bool, incremental: bool) -> None:
    _check_shape(res, incremental)
    if res.resource_type == BROKER:
        _refuse_broker_change(broker, res)
        return
    if res.resource_type == CLIENT_METRICS:
        try:
            client_metrics_configs.alter(
                broker, res.resource_name, res.configs, incremental, validate_only
            )
        except client_metrics_configs.ClientMetricsConfigError as exc:
            raise ResourceError(exc.code, exc.message) from None
        return
    if res.resource_type == GROUP:
        try:
            group_configs.alter(broker, res.resource_name, res.configs, incremental, validate_only)
        except group_configs.GroupConfigError as exc:
            raise ResourceError(exc.code, exc.message) from None
        return
    if res.resource_type != TOPIC:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")
    info = _topic_info(broker, res.resource_name)
    if incremental:
        new = _incremental_overrides(broker, info.configs, res.configs)
    else:
        new = {c.name: c.value for c in res.configs}
    try:
        broker.topics.set_configs(res.resource_name, new, validate_only)
    except TopicError as exc:
        raise ResourceError(exc.code, str(exc)) from None


def _alter(
    ctx: RequestContext,
    req: protocol.AlterConfigsRequest | protocol.IncrementalAlterConfigsRequest,
    incremental: bool,
) -> list[protocol.AlterConfigsResponse.AlterConfigsResourceResponse]:
    Item = (
        protocol.IncrementalAlterConfigsResponse if incremental else protocol.AlterConfigsResponse
    ).AlterConfigsResourceResponse
    counts = Counter((r.resource_type, r.resource_name) for r in req.resources)
    out = []
    for res in req.resources:
        code, message = ErrorCode.NONE, None
        denied = config_denied(
            ctx, AclOperation.ALTER_CONFIGS, res.resource_type, res.resource_name
        )
        if denied is not None:
            code = _denied_code(res.resource_type)
            message = denied
        elif counts[(res.resource_type, res.resource_name)] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
        else:
            try:
                _alter_one(ctx.broker, res, bool(req.validate_only), incremental)
            except ResourceError as exc:
                code, message = exc.code, exc.message
        if code != ErrorCode.NONE:
            log.info(
                "%s of %s %r from %s refused: %s %s",
                "IncrementalAlterConfigs" if incremental else "AlterConfigs",
                RESOURCE_NAMES.get(res.resource_type, res.resource_type),
                res.resource_name,
                ctx.client_id,
                code.name,
                message,
            )
        out.append(
            Item(
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return out


@handles(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def alter_configs(
    ctx: RequestContext, req: protocol.AlterConfigsRequest
) -> protocol.AlterConfigsResponse:
    return protocol.AlterConfigsResponse(
        throttle_time_ms=0, responses=_alter(ctx, req, incremental=False)
    )


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
async def incremental_alter_configs(
    ctx: RequestContext, req: protocol.IncrementalAlterConfigsRequest
) -> protocol.IncrementalAlterConfigsResponse:
    return protocol.IncrementalAlterConfigsResponse(
        throttle_time_ms=0, responses=_alter(ctx, req, incremental=True)
    )
