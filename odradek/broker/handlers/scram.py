"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0 (flexible),
the versions Kafka 3.9 serves.

Credentials live in the metadata store (odradek.broker.network.scram_store over
``MetadataStore.scram_credentials``), so every broker of a cluster sees them and SCRAM logins
use them. The semantics are odradek.security.credentials' (Kafka's controller): an upsertion
carries the salt and the client's SaltedPassword, the broker stores salt, StoredKey, ServerKey
and iterations; a user named twice in one request gets DUPLICATE_RESOURCE, iterations outside
4096..16384 UNACCEPTABLE_CREDENTIAL, deleting a missing credential RESOURCE_NOT_FOUND; describe
answers every user with a credential when no user is named.

Authorization (docs/security-acls.md): DESCRIBE on the cluster for 50, ALTER on the cluster for
51; denied, the answer is the request's error response as Kafka builds it (top-level 31 for
describe, plus one result per named user; for alter one result per user named, sorted).
"""

from __future__ import annotations

import logging

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.network.scram_store import for_store
from odradek.security import credentials as core
from odradek.security.acl_types import AclOperation
from odradek.security.credentials import AlterResult, ScramDeletion, ScramUpsertion
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

DResp = protocol.DescribeUserScramCredentialsResponse
AResp = protocol.AlterUserScramCredentialsResponse
CLUSTER_DENIED = "Cluster authorization failed."


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def describe_user_scram_credentials(
    ctx: RequestContext, req: protocol.DescribeUserScramCredentialsRequest
) -> protocol.DescribeUserScramCredentialsResponse:
    names = None if req.users is None else [u.name for u in req.users]
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DResp(
            throttle_time_ms=0,
            error_code=code,
            error_message=CLUSTER_DENIED,
            results=[
                DResp.DescribeUserScramCredentialsResult(
                    user=name, error_code=code, error_message=CLUSTER_DENIED, credential_infos=[]
                )
                for name in names or []
            ],
        )
    results = core.describe_user_scram_credentials(for_store(ctx.broker.store), names)
    return DResp(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        results=[
            DResp.DescribeUserScramCredentialsResult(
                user=r.user,
                error_code=r.error_code,
                error_message=r.error_message,
                credential_infos=[
                    DResp.DescribeUserScramCredentialsResult.CredentialInfo(
                        mechanism=info.mechanism, iterations=info.iterations
                    )
                    for info in r.credential_infos
                ],
            )
            for r in results
        ],
    )


def _result(r: AlterResult) -> protocol.Message:
    return AResp.AlterUserScramCredentialsResult(
        user=r.user, error_code=r.error_code, error_message=r.error_message
    )


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def alter_user_scram_credentials(
    ctx: RequestContext, req: protocol.AlterUserScramCredentialsRequest
) -> protocol.AlterUserScramCredentialsResponse:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    if not ctx.authorize_cluster(AclOperation.ALTER):
        users = sorted({d.name for d in deletions} | {u.name for u in upsertions})
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AResp(
            throttle_time_ms=0,
            results=[_result(AlterResult(user, code, CLUSTER_DENIED)) for user in users],
        )
    credentials = for_store(ctx.broker.store)
    results: list[AlterResult] = []
    try:
        with credentials.batch():  # one persisted change for the whole request
            results = core.alter_user_scram_credentials(credentials, deletions, upsertions)
    except Exception as exc:  # the store failed (ZooKeeper gone, disk full)
        if not results:
            raise
        log.warning("storing SCRAM credentials failed: %s", exc)
        failed = f"storing the credentials failed: {exc}"
        results = [
            r if r.error_code else AlterResult(r.user, ErrorCode.UNKNOWN_SERVER_ERROR, failed)
            for r in results
        ]
    for r in results:
        if not r.error_code:
            log.info("SCRAM credentials of user %r altered by %s", r.user, ctx.principal)
    return AResp(throttle_time_ms=0, results=[_result(r) for r in results])
