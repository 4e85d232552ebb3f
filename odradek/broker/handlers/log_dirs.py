"""DescribeLogDirs (key 35) v0-5 (v1: throttle first; v2 flexible; v3 top-level error): this
broker's data dirs and the replicas each one holds.

As Kafka's ReplicaManager.describeLogDirs: one result per data dir (an offline dir answers
KAFKA_STORAGE_ERROR and no topics), each partition replica hosted here with its size on disk
(the sum of its segments) and its offset lag (the high watermark's lead over the log end offset,
0 when caught up); a replica moving to another dir (AlterReplicaLogDirs) is also listed in its
destination with IsFutureKey and the lag of its copy behind the current log. A null topic
list means every replica. v4 adds the volume's total and usable bytes; v5 IsCordoned (no dir is
cordoned here: false). Partitions named in the
request but not hosted here are left out, as Kafka does.
`odradek topics describe` reads the sizes from here, as `rpk topic describe -p` does.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, TypeAlias

from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.security.acl_types import AclOperation
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partitions.partition import Partition

Resp: TypeAlias = protocol.DescribeLogDirsResponse
Result = Resp.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
PartResult = TopicResult.DescribeLogDirsPartition


def _wanted(req: protocol.DescribeLogDirsRequest) -> set[tuple[str, int]] | None:
    if req.topics is None:
        return None
    return {(t.topic, int(p)) for t in req.topics for p in t.partitions}


def _dir_of(part: Partition, default: str) -> str:
    log_dir = getattr(part.log, "log_dir", None)
    return os.path.abspath(log_dir.path) if log_dir is not None else default


@handles(ApiKey.DESCRIBE_LOG_DIRS, versions=(0, 5))
async def describe_log_dirs(
    ctx: RequestContext, req: protocol.DescribeLogDirsRequest
) -> protocol.DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED if ctx.api_version >= 3 else 0
        return Resp(throttle_time_ms=0, error_code=code, results=[])
    logs = ctx.broker.logs
    wanted = _wanted(req)
    by_dir: dict[str, dict[str, list[protocol.Message]]] = {d: {} for d in logs.dirs}
    for (topic, index), part in sorted(ctx.broker.topics.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        d = _dir_of(part, logs.dirs[0])
        lg = part.log
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            PartResult(
                partition_index=index,
                partition_size=lg.size_bytes,
                offset_lag=max(part.high_watermark - lg.log_end_offset, 0),
                is_future_key=False,
            )
        )
    for (topic, index), move in sorted(logs.moves.items()):  # replicas moving (dir_move.py)
        if wanted is not None and (topic, index) not in wanted:
            continue
        by_dir.setdefault(move.dest, {}).setdefault(topic, []).append(
            PartResult(
                partition_index=index,
                partition_size=move.future.size_bytes,
                offset_lag=move.offset_lag,
                is_future_key=True,
            )
        )
    offline = set(logs.offline_dirs)
    results = []
    for d, topics in by_dir.items():
        total = usable = -1
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            pass
        results.append(
            Result(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR if d in offline else ErrorCode.NONE,
                log_dir=d,
                topics=[]
                if d in offline
                else [TopicResult(name=t, partitions=ps) for t, ps in sorted(topics.items())],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
