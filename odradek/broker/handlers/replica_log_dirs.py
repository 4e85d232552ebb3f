"""AlterReplicaLogDirs (key 34) v0-2 (v1: throttle first; v2 flexible) and DescribeQuorum (key
55) v0-2.

AlterReplicaLogDirs moves replicas hosted here to another of this broker's data dirs, as Kafka's
ReplicaManager.alterReplicaLogDirs: a path that is not one of `log.dirs` answers
LOG_DIR_NOT_FOUND, an offline one KAFKA_STORAGE_ERROR, a partition not hosted here
REPLICA_NOT_AVAILABLE (and the replica is created in that dir when it comes, as Kafka's
preferred log dir), a topic name too long for the future dir's name
INVALID_TOPIC_EXCEPTION; the replica already in that dir is a no-op; a move already running to
another dir is replaced. The copy runs in the background (odradek/log/dir_move.py) while the
partition keeps serving; DescribeLogDirs shows the future replica and its lag meanwhile. Needs
ALTER on the cluster.

DescribeQuorum answers for the metadata store as a single-voter KRaft quorum on
`__cluster_metadata`-0: the voter and leader is the controller, the other live brokers are
observers. In ZooKeeper mode it is not served, as by Kafka 3.9's ZooKeeper brokers (the API
has no zkBroker listener): ApiVersions leaves it out and a request gets UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.clock import now_ms
from odradek.log.dir_move import FutureReplica
from odradek.log.log import Log
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

AlterResp: TypeAlias = protocol.AlterReplicaLogDirsResponse
AlterTopic = AlterResp.AlterReplicaLogDirTopicResult
AlterPart = AlterTopic.AlterReplicaLogDirPartitionResult

QuorumResp: TypeAlias = protocol.DescribeQuorumResponse
QTopic = QuorumResp.TopicData
QPart = QTopic.PartitionData
QReplica = QPart.ReplicaState
QNode = QuorumResp.Node

METADATA_TOPIC = "__cluster_metadata"
_TASKS: set[asyncio.Task[None]] = set()


def _move(ctx: RequestContext, topic: str, index: int, path: str) -> int:
    logs = ctx.broker.logs
    if len(f"{topic}-{index}.{uuid.uuid4().hex}-future") > 255:  # the future dir's name
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    dest = os.path.abspath(path) if os.path.isabs(path) else None
    if dest is None or dest not in logs.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if logs.log_dirs[dest].offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    part = ctx.broker.topics.partitions.get((topic, index))
    if part is None or (topic, index) not in logs.logs:
        # created there when it comes (a reassignment adding this broker), as Kafka's
        # maybeUpdatePreferredLogDir; REPLICA_NOT_AVAILABLE: Kafka's code here, kept for
        # compatibility
        logs.preferred_dirs[(topic, index)] = dest
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if part.log.offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    running = logs.moves.get((topic, index))
    if running is not None:
        if running.dest == dest:
            return ErrorCode.NONE
        logs.moves.pop((topic, index), None)
        running.abort()
    if logs.dir_of(topic, index) == dest:
        return ErrorCode.NONE
    move = FutureReplica(logs, topic, index, dest)
    logs.moves[(topic, index)] = move

    def swap(new: Log) -> None:
        current = ctx.broker.topics.partitions.get((topic, index))
        if current is not None:
            current.log = new

    task = asyncio.get_running_loop().create_task(move.run(swap))
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    return ErrorCode.NONE


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(0, 2))
async def alter_replica_log_dirs(
    ctx: RequestContext, req: protocol.AlterReplicaLogDirsRequest
) -> protocol.AlterReplicaLogDirsResponse:
    allowed = ctx.authorize_cluster(AclOperation.ALTER)
    results: dict[str, list[object]] = {}
    for d in req.dirs:
        for t in d.topics:
            for index in t.partitions:
                code = (
                    _move(ctx, t.name, int(index), d.path)
                    if allowed
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                results.setdefault(t.name, []).append(
                    AlterPart(partition_index=int(index), error_code=code)
                )
    return AlterResp(
        throttle_time_ms=0,
        results=[AlterTopic(topic_name=n, partitions=ps) for n, ps in results.items()],
    )


@handles(ApiKey.DESCRIBE_QUORUM, versions=(0, 2))
async def describe_quorum(
    ctx: RequestContext, req: protocol.DescribeQuorumRequest
) -> protocol.DescribeQuorumResponse:
    broker = ctx.broker
    if broker.config.get("zookeeper.connect"):
        return QuorumResp(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            error_message="DescribeQuorum is only served by KRaft brokers",
            topics=[],
            nodes=[],
        )
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return QuorumResp(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            topics=[],
            nodes=[],
        )
    leader = broker.controller_id
    hw = int(getattr(broker.store, "metadata_offset", 0) or 0)
    now = now_ms()
    no_dir = uuid.UUID(int=0)

    def replica(node: int, lagless: bool) -> object:
        return QReplica(
            replica_id=node,
            replica_directory_id=no_dir,
            log_end_offset=hw,
            last_fetch_timestamp=-1 if node == leader else now,
            last_caught_up_timestamp=now if lagless else -1,
        )

    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                parts.append(
                    QPart(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=None,
                        leader_id=-1,
                        leader_epoch=-1,
                        high_watermark=-1,
                        current_voters=[],
                        observers=[],
                    )
                )
                continue
            observers = [replica(b, True) for b in broker.live_brokers() if b != leader]
            parts.append(
                QPart(
                    partition_index=0,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    leader_id=leader,
                    leader_epoch=1,
                    high_watermark=hw,
                    current_voters=[replica(leader, True)],
                    observers=observers,
                )
            )
        topics.append(QTopic(topic_name=t.topic_name, partitions=parts))
    # the voters' endpoints come with the metadata partition's answer only (as Kafka's
    # KafkaRaftClient): a request that does not ask for it gets no nodes
    asked = any(
        t.topic_name == METADATA_TOPIC and any(p.partition_index == 0 for p in t.partitions)
        for t in req.topics
    )
    nodes = []
    for node, host, port, _rack in broker.broker_endpoints() if asked else ():
        if node == leader:
            nodes.append(
                QNode(
                    node_id=node,
                    listeners=[
                        QNode.Listener(name=broker.security.inter_broker, host=host, port=port)
                    ],
                )
            )
    return QuorumResp(error_code=ErrorCode.NONE, error_message=None, topics=topics, nodes=nodes)
