"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0-3 (v1 pattern types, KIP-290; v2
flexible), as Kafka 3.9's AclApis.

No authorizer configured: SECURITY_DISABLED (54) "No Authorizer is configured on the broker".
DescribeAcls needs DESCRIBE on the cluster, the other two ALTER; denied, every error field of the
answer is CLUSTER_AUTHORIZATION_FAILED (31). A body Kafka's request classes refuse while parsing
(UNKNOWN codes, v0 with a non-literal pattern) closes the connection. Each creation is validated
on its own (INVALID_REQUEST with Kafka's message), each DeleteAcls filter too; the valid ones
are stored together through the metadata store's ACL backend, so every broker sees them.
"""

from __future__ import annotations

import logging
from typing import TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.dispatch import ProtocolError
from odradek.broker.network.registry import handles
from odradek.security.acl import Authorizer
from odradek.security.acl_types import (
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    MalformedAclRequest,
    PatternType,
    group_by_pattern,
    request_creation,
    request_filter,
)
from odradek.security.acl_wire import (
    binding_fields,
    binding_from_wire,
    entry_fields,
    filter_from_wire,
)
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

DescResp: TypeAlias = protocol.DescribeAclsResponse
CreateResp: TypeAlias = protocol.CreateAclsResponse
DelResp: TypeAlias = protocol.DeleteAclsResponse

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _pattern_type(req: protocol.Message, field: str, version: int) -> PatternType:
    return PatternType.from_code(getattr(req, field)) if version >= 1 else PatternType.LITERAL


def _filter(f: protocol.Message, version: int) -> AclBindingFilter:
    flt = filter_from_wire(f, _pattern_type(f, "pattern_type_filter", version))
    try:
        return request_filter(flt, version)
    except MalformedAclRequest as exc:
        raise ProtocolError(str(exc)) from None


def _denied(ctx: RequestContext, operation: AclOperation) -> tuple[int, str] | None:
    """(error, message) when the request may not be served; None when it may."""
    if ctx.broker.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not ctx.authorize_cluster(operation):
        name = ApiKey(ctx.header.api_key).name
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"Request {name} is not authorized."
    return None


@handles(ApiKey.DESCRIBE_ACLS, versions=(0, 3))
async def describe_acls(
    ctx: RequestContext, req: protocol.DescribeAclsRequest
) -> protocol.DescribeAclsResponse:
    flt = _filter(req, ctx.api_version)
    denied = _denied(ctx, AclOperation.DESCRIBE)
    if denied is not None:
        return DescResp(
            throttle_time_ms=0, error_code=denied[0], error_message=denied[1], resources=[]
        )
    authorizer = ctx.broker.authorizer
    assert authorizer is not None
    resources = [
        DescResp.DescribeAclsResource(
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=[DescResp.DescribeAclsResource.AclDescription(**entry_fields(e)) for e in entries],
        )
        for pattern, entries in group_by_pattern(authorizer.acls(flt)).items()
    ]
    return DescResp(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


@handles(ApiKey.CREATE_ACLS, versions=(0, 3))
async def create_acls(
    ctx: RequestContext, req: protocol.CreateAclsRequest
) -> protocol.CreateAclsResponse:
    version = ctx.api_version
    bindings = []
    for c in req.creations:
        binding = binding_from_wire(c, c, _pattern_type(c, "resource_pattern_type", version))
        try:
            bindings.append(request_creation(binding, version))
        except MalformedAclRequest as exc:
            raise ProtocolError(str(exc)) from None
    denied = _denied(ctx, AclOperation.ALTER)
    if denied is not None:
        return CreateResp(
            throttle_time_ms=0,
            results=[
                CreateResp.AclCreationResult(error_code=denied[0], error_message=denied[1])
                for _ in bindings
            ],
        )
    authorizer = ctx.broker.authorizer
    assert authorizer is not None
    work = Authorizer(acls=authorizer)
    outcomes: list[InvalidAcl | None | str] = list(work.create_acls(bindings))
    if set(work) != set(authorizer):
        try:
            authorizer.write(list(work))
        except Exception as exc:  # the store failed (ZooKeeper gone): each creation says so
            log.warning("storing ACLs failed: %s", exc)
            outcomes = [o if o is not None else f"storing the ACLs failed: {exc}" for o in outcomes]
        else:
            for binding, outcome in zip(bindings, outcomes, strict=True):
                if outcome is None:
                    log.info("ACL created by %s: %s", ctx.principal, binding)
    results = []
    for outcome in outcomes:
        if outcome is None:
            results.append(CreateResp.AclCreationResult(error_code=0, error_message=None))
        elif isinstance(outcome, InvalidAcl):
            results.append(
                CreateResp.AclCreationResult(
                    error_code=outcome.error_code, error_message=str(outcome)
                )
            )
        else:
            results.append(
                CreateResp.AclCreationResult(
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=outcome
                )
            )
    return CreateResp(throttle_time_ms=0, results=results)


@handles(ApiKey.DELETE_ACLS, versions=(0, 3))
async def delete_acls(
    ctx: RequestContext, req: protocol.DeleteAclsRequest
) -> protocol.DeleteAclsResponse:
    version = ctx.api_version
    filters = [_filter(f, version) for f in req.filters]
    R = DelResp.DeleteAclsFilterResult
    denied = _denied(ctx, AclOperation.ALTER)
    if denied is not None:
        return DelResp(
            throttle_time_ms=0,
            filter_results=[
                R(error_code=denied[0], error_message=denied[1], matching_acls=[]) for _ in filters
            ],
        )
    authorizer = ctx.broker.authorizer
    assert authorizer is not None
    work = Authorizer(acls=authorizer)
    outcomes = work.delete_acls(filters)
    failure: str | None = None
    if set(work) != set(authorizer):
        try:
            authorizer.write(list(work))
        except Exception as exc:
            log.warning("storing ACLs failed: %s", exc)
            failure = f"storing the ACLs failed: {exc}"
    results = []
    for outcome in outcomes:
        if isinstance(outcome, InvalidAcl):
            results.append(
                R(error_code=outcome.error_code, error_message=str(outcome), matching_acls=[])
            )
            continue
        if failure is not None and outcome:
            results.append(
                R(
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                    error_message=failure,
                    matching_acls=[],
                )
            )
            continue
        for binding in outcome:
            log.info("ACL deleted by %s: %s", ctx.principal, binding)
        results.append(
            R(
                error_code=0,
                error_message=None,
                matching_acls=[
                    R.DeleteAclsMatchingAcl(error_code=0, error_message=None, **binding_fields(b))
                    for b in outcome
                ],
            )
        )
    return DelResp(throttle_time_ms=0, filter_results=results)
