"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1 (KIP-546); v1 is flexible.

Entities are user, client-id or (user, client-id), a null name meaning `<default>`; the keys are
producer_byte_rate, consumer_byte_rate, request_percentage and controller_mutation_rate
(quotas.py enforces them). Quotas live in the metadata store, so every broker sees them.

Describe filters as Kafka's ClientQuotaControlManager: each component names an entity type and
matches an exact name (0), the default (1) or any specified name (2); `strict` excludes entities
with types the filter does not name. A malformed filter is INVALID_REQUEST for the whole answer.
Alter checks each entry on its own (INVALID_REQUEST with Kafka's message for an unknown entity
type or key, a repeated type, a byte rate that is not whole, a value not positive) and applies
the valid ones together unless `validate_only`. `ip` entities (connection_creation_rate, KIP-612)
are refused: odradek does not limit connection rates.

With an authorizer, as KafkaApis: Describe needs DESCRIBE_CONFIGS on the cluster (else the whole
answer is CLUSTER_AUTHORIZATION_FAILED), Alter needs ALTER_CONFIGS on the cluster (else every
entry is).
"""

from __future__ import annotations

import logging
from typing import TypeAlias

from odradek.broker.network import quotas as q
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

DResp: TypeAlias = protocol.DescribeClientQuotasResponse
AResp: TypeAlias = protocol.AlterClientQuotasResponse

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
ENTITY_TYPES = (q.USER, q.CLIENT_ID)


def _filter_error(components: list[protocol.Message]) -> str | None:
    seen: set[str] = set()
    for c in components:
        if c.entity_type == q.IP:
            return "odradek does not support ip quotas (connection_creation_rate)"
        if c.entity_type not in ENTITY_TYPES:
            return f"Custom entity type '{c.entity_type}' not supported"
        if c.entity_type in seen:
            return f"Entity type {c.entity_type} cannot appear more than once in the filter."
        seen.add(c.entity_type)
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                return "Request specified exact match type but no match string"
        elif c.match_type in (MATCH_DEFAULT, MATCH_ANY):
            if c.match is not None:
                return "Request specified a match string but not an exact match type"
        else:
            return f"Unknown match type: {c.match_type}"
    return None


def _matches(entity: q.Entity, components: list[protocol.Message], strict: bool) -> bool:
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        if c.match_type == MATCH_EXACT and name != c.match:
            return False
        if c.match_type == MATCH_DEFAULT and name is not None:
            return False
        if c.match_type == MATCH_ANY and name is None:
            return False
    return not strict or len(names) == len(components)


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1))
async def describe_client_quotas(
    ctx: RequestContext, req: protocol.DescribeClientQuotasRequest
) -> protocol.DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return DResp(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            entries=None,
        )
    components = list(req.components or [])
    error = _filter_error(components)
    if error is not None:
        return DResp(
            throttle_time_ms=0,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=error,
            entries=None,
        )
    entries = []
    for entity, values in sorted(
        ctx.broker.store.client_quotas.items(), key=lambda kv: repr(kv[0])
    ):
        if not _matches(entity, components, req.strict):
            continue
        entries.append(
            DResp.EntryData(
                entity=[
                    DResp.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity
                ],
                values=[
                    DResp.EntryData.ValueData(key=k, value=float(v))
                    for k, v in sorted(values.items())
                ],
            )
        )
    return DResp(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def _entry_error(entry: protocol.Message) -> str | None:
    parts = [(e.entity_type, e.entity_name) for e in entry.entity]
    if not parts:
        return "Invalid empty client quota entity"
    types = [t for t, _ in parts]
    if len(set(types)) != len(types):
        return f"Invalid client quota entity: duplicate entity type in {types}"
    for t, name in parts:
        if t == q.IP:
            return "odradek does not support ip quotas (connection_creation_rate)"
        if t not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {t}"
        if name == "":
            return f"Invalid empty {t} name"
    seen: set[str] = set()
    for op in entry.ops:
        if op.key in seen:
            return f"Duplicate quota key {op.key} in the same entity"
        seen.add(op.key)
        if op.remove:
            if op.key not in q.CLIENT_KEYS:
                return f"Invalid configuration key {op.key}"
            continue
        message = q.validate(parts, op.key, op.value)
        if message is not None:
            return message
    return None


@handles(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1))
async def alter_client_quotas(
    ctx: RequestContext, req: protocol.AlterClientQuotasRequest
) -> protocol.AlterClientQuotasResponse:
    results = []
    changes: list[tuple[q.Entity, dict[str, float | None]]] = []
    allowed = ctx.authorize_cluster(AclOperation.ALTER_CONFIGS)
    for entry in req.entries:
        error = _entry_error(entry) if allowed else None
        entity_data = [
            AResp.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity
        ]
        if not allowed:
            results.append(
                AResp.EntryData(
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=None,
                    entity=entity_data,
                )
            )
            continue
        code = ErrorCode.INVALID_REQUEST if error else ErrorCode.NONE
        results.append(AResp.EntryData(error_code=code, error_message=error, entity=entity_data))
        if error is None:
            entity = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
            ops = {op.key: (None if op.remove else float(op.value)) for op in entry.ops}
            changes.append((entity, ops))
    if changes and not req.validate_only:
        try:
            ctx.broker.store.alter_client_quotas(changes)
        except Exception as exc:  # the store failed (ZooKeeper gone): every entry says so
            log.warning("storing client quotas failed: %s", exc)
            for r in results:
                if not r.error_code:
                    r.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
                    r.error_message = f"storing the quotas failed: {exc}"
            return AResp(throttle_time_ms=0, entries=results)
        for entity, ops in changes:
            log.info(
                "client quotas of %s altered by %s: %s",
                _describe(entity),
                ctx.client_id,
                ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in ops.items()),
            )
    return AResp(throttle_time_ms=0, entries=results)


def _describe(entity: q.Entity) -> str:
    return ", ".join(f"{t} {'<default>' if n is None else repr(n)}" for t, n in entity)
