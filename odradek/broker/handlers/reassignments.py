"""AlterPartitionReassignments (key 45, v0-1) and ListPartitionReassignments (key 46, v0)
(KIP-455), as Kafka's controller answers them.

Alter starts, replaces or (with null replicas) cancels the reassignment of each partition named
and answers once it has started, not when the data has moved (`controller.py` does the moving
through replication). v1's AllowReplicationFactorChange=false refuses a target whose size differs
from the current replication factor. List answers the partitions with a reassignment in
progress: the current replicas (original plus adding), the adding and the removing ones.

A standalone broker has one replica per partition on itself: a target of exactly that broker is
accepted (nothing to move), any other names brokers that do not exist. With ZooKeeper the
topic node (`/brokers/topics/<t>`) carries the replicas and, during a move, Kafka's
`adding_replicas` / `removing_replicas` maps, written with the partition state in one
transaction.
"""

from __future__ import annotations

from typing import TypeAlias

from odradek.broker.cluster.metadata_store import PartitionState
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

AlterResp: TypeAlias = protocol.AlterPartitionReassignmentsResponse
AlterTopic: TypeAlias = protocol.AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AlterPart: TypeAlias = protocol.AlterPartitionReassignmentsResponse.ReassignableTopicResponse.ReassignablePartitionResponse  # noqa: E501
ListResp: TypeAlias = protocol.ListPartitionReassignmentsResponse
ListTopic: TypeAlias = protocol.ListPartitionReassignmentsResponse.OngoingTopicReassignment
ListPart: TypeAlias = protocol.ListPartitionReassignmentsResponse.OngoingTopicReassignment.OngoingPartitionReassignment  # noqa: E501


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 1))
async def alter_partition_reassignments(
    ctx: RequestContext, req: protocol.AlterPartitionReassignmentsRequest
) -> AlterResp:
    broker = ctx.broker
    extra = {"allow_replication_factor_change": True} if ctx.api_version >= 1 else {}
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return AlterResp(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            responses=[],
            **extra,
        )
    allow_rf_change = ctx.api_version < 1 or bool(req.allow_replication_factor_change)
    replication = broker.replication
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            target = None if p.replicas is None else list(p.replicas)
            info = broker.store.topics.get(t.name)
            code: ErrorCode
            message: str | None
            if info is None or not 0 <= p.partition_index < len(info.partitions):
                code, message = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "The partition does not exist.",
                )
            elif (
                target is not None
                and not allow_rf_change
                and len(target) != len(original := _original(info.partitions[p.partition_index]))
            ):
                code, message = (
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(original)} to {len(target)} "
                    "but the AllowReplicationFactorChange flag is false",
                )
            elif replication is None:
                code, message = _standalone(broker.node_id, target)
            elif not broker.store.reassignable:
                code, message = (
                    ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                    "This metadata store cannot change replica assignments.",
                )
            else:
                code, message = replication.controller.reassign(t.name, p.partition_index, target)
            parts.append(
                AlterPart(partition_index=p.partition_index, error_code=code, error_message=message)
            )
        responses.append(AlterTopic(name=t.name, partitions=parts))
    return AlterResp(
        throttle_time_ms=0, error_code=0, error_message=None, responses=responses, **extra
    )


def _original(st: PartitionState) -> list[int]:
    return [r for r in st.replicas if r not in st.adding_replicas]


def _standalone(node_id: int, target: list[int] | None) -> tuple[ErrorCode, str | None]:
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress."
    if target == [node_id]:
        return ErrorCode.NONE, None
    return (
        ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
        f"The proposed assignment {target} contains brokers that are not alive.",
    )


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0))
async def list_partition_reassignments(
    ctx: RequestContext, req: protocol.ListPartitionReassignmentsRequest
) -> ListResp:
    broker = ctx.broker
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return ListResp(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            topics=[],
        )
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.name, i) for t in req.topics for i in t.partition_indexes}
    by_topic: dict[str, list[ListPart]] = {}
    for name, info in sorted(broker.store.topics.items()):
        for idx, st in enumerate(info.partitions):
            if not (st.adding_replicas or st.removing_replicas):
                continue
            if wanted is not None and (name, idx) not in wanted:
                continue
            by_topic.setdefault(name, []).append(
                ListPart(
                    partition_index=idx,
                    replicas=list(st.replicas),
                    adding_replicas=list(st.adding_replicas),
                    removing_replicas=list(st.removing_replicas),
                )
            )
    return ListResp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        topics=[ListTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )
