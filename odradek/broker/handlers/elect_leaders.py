"""ElectLeaders (key 43), v0-2 (KIP-183, KIP-460). v0 preferred-leader election; v1 election
type (0 preferred, 1 unclean) and a top-level error code; v2 flexible.

Null `topic_partitions` means every partition; then, as Kafka, partitions that already have
the leader asked for are left out of the answer instead of reporting ELECTION_NOT_NEEDED.
Elections are conditional updates of the metadata store (`controller.py`), so any broker of an
in-process cluster can run them. A standalone broker leads every partition it has, which is
always the preferred leader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.cluster.controller import PREFERRED, UNCLEAN
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

Resp: TypeAlias = protocol.ElectLeadersResponse
TopicResult: TypeAlias = protocol.ElectLeadersResponse.ReplicaElectionResult
PartResult: TypeAlias = protocol.ElectLeadersResponse.ReplicaElectionResult.PartitionResult

NOT_NEEDED = "Leader election not needed for topic partition."


def _requested(broker: Broker, req: protocol.ElectLeadersRequest) -> list[tuple[str, int]]:
    if req.topic_partitions is None:
        return [
            (name, idx)
            for name, info in sorted(broker.store.topics.items())
            for idx in range(len(info.partitions))
        ]
    return [(t.topic, idx) for t in req.topic_partitions for idx in t.partitions]


@handles(ApiKey.ELECT_LEADERS, versions=(0, 2))
async def elect_leaders(
    ctx: RequestContext, req: protocol.ElectLeadersRequest
) -> protocol.ElectLeadersResponse:
    broker = ctx.broker
    election_type = req.election_type if ctx.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):
        return Resp(
            throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[]
        )
    if not ctx.authorize_cluster(AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Resp(
            throttle_time_ms=0,
            error_code=code,
            replica_election_results=[
                TopicResult(
                    topic=t.topic,
                    partition_result=[
                        PartResult(partition_id=i, error_code=code, error_message=None)
                        for i in t.partitions
                    ],
                )
                for t in req.topic_partitions or []
            ],
        )
    wanted = _requested(broker, req)
    replication = getattr(broker, "replication", None)
    if replication is not None:
        results = replication.controller.elect(wanted, election_type)
    else:
        results = {}
        for topic, idx in wanted:
            info = broker.topics.info(topic)
            if info is None or not 0 <= idx < len(info.partitions):
                results[(topic, idx)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "The partition does not exist.",
                )
            else:
                results[(topic, idx)] = (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)
    by_topic: dict[str, list[PartResult]] = {}
    for (topic, idx), (code, message) in results.items():
        if req.topic_partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(topic, []).append(
            PartResult(partition_id=idx, error_code=code, error_message=message)
        )
    return Resp(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        replica_election_results=[
            TopicResult(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ],
    )
