"""KIP-1071 streams groups, answered by the group coordinator's StreamsGroupManager.

StreamsGroupHeartbeat (key 88), v0-1: joins (epoch 0, with the topology and process id),
heartbeats, leaves (-1, static -2); the response carries the member epoch, the heartbeat
interval, the group's status codes and, when they changed or the member (re)joined, its active
and standby tasks (v1 makes AcceptableRecoveryLag an int64 and adds KIP-1331's
TopologyDescriptionRequired, always false here). The internal topics the topology declares and
the cluster lacks are created here, off the request path (Kafka's group coordinator does it
through its AutoTopicCreationManager); meanwhile the status says MISSING_INTERNAL_TOPICS.
StreamsGroupDescribe (key 89), v0-1: the group epoch, assignment epoch, topology and every member's
current and target tasks; v1 adds the assignor name and KIP-1331's topology description (null:
odradek does not keep one).
StreamsGroupTopologyDescriptionUpdate (key 93), v0 (KIP-1331): answered as Kafka 4.4 answers it
without a `group.streams.topology.description.plugin.class` (its default): UNSUPPORTED_VERSION,
"The broker has no streams group topology description plugin configured." (after the group's
READ ACL). The three are listed by ApiVersions only while `streams.version` >= 1.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.broker.handler_support import client_host, group_allowed
from odradek.broker.modern_group_support import (
    Fields,
    describe_groups,
    heartbeat_fields,
    heartbeat_refusal,
)
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.partitions.internal_topics import offsets_replicated
from odradek.coordinator import group_configs
from odradek.coordinator.group import streams_group as sg
from odradek.coordinator.group.streams_assignor import Tasks
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

STICKY = "sticky"  # the assignor's name, as Kafka's StickyTaskAssignor
NO_DESCRIPTION_PLUGIN = "The broker has no streams group topology description plugin configured."

# topics being created per broker, so heartbeats arriving meanwhile do not start them again
_CREATING: weakref.WeakKeyDictionary[Broker, dict[str, asyncio.Task[None]]] = (
    weakref.WeakKeyDictionary()
)


def _tasks(items: list[object] | None) -> Tasks | None:
    if items is None:
        return None
    out: Tasks = {}
    for t in items:
        out.setdefault(t.subtopology_id, set()).update(t.partitions)  # type: ignore[attr-defined]
    return out


def _topic_info(t: object) -> sg.TopicInfo:
    return sg.TopicInfo(
        t.name,  # type: ignore[attr-defined]
        t.partitions,  # type: ignore[attr-defined]
        t.replication_factor,  # type: ignore[attr-defined]
        tuple((c.key, c.value) for c in t.topic_configs),  # type: ignore[attr-defined]
    )


def _topology(raw: object | None) -> sg.Topology | None:
    if raw is None:
        return None
    subs = []
    for s in raw.subtopologies:  # type: ignore[attr-defined]
        subs.append(
            sg.Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.source_topic_regex),
                tuple(_topic_info(t) for t in s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                tuple(_topic_info(t) for t in s.repartition_source_topics),
                tuple(
                    (
                        tuple(c.source_topics),
                        tuple(c.source_topic_regex),
                        tuple(c.repartition_source_topics),
                    )  # fmt: skip
                    for c in s.copartition_groups
                ),
            )
        )
    return sg.Topology(raw.epoch, tuple(subs))  # type: ignore[attr-defined]


def _create_internal_topics(broker: Broker, topics: list[sg.TopicInfo]) -> None:
    creating = _CREATING.setdefault(broker, {})
    for t in topics:
        if t.name in creating or t.name in broker.topics.store.topics:
            continue

        async def create(info: sg.TopicInfo = t) -> None:
            try:
                await broker.topics.create_topic_async(
                    info.name, info.partitions or -1, info.replication_factor or -1,
                    dict(info.configs),
                )  # fmt: skip
                log.info("created streams internal topic %s (%d partitions)", info.name,
                         info.partitions)  # fmt: skip
            except Exception as exc:  # a TopicError, or the broker stopping
                log.warning("streams internal topic %s not created: %s", info.name, exc)
            finally:
                creating.pop(info.name, None)

        creating[t.name] = asyncio.get_running_loop().create_task(create())


@handles(ApiKey.STREAMS_GROUP_HEARTBEAT, versions=(0, 1))
async def streams_group_heartbeat(
    ctx: RequestContext, req: protocol.StreamsGroupHeartbeatRequest
) -> protocol.StreamsGroupHeartbeatResponse:
    Resp = protocol.StreamsGroupHeartbeatResponse
    coord = ctx.group_coordinator

    def failed(error: ErrorCode, message: str | None = None) -> object:
        return Resp(
            **heartbeat_fields(error, message, None, req.member_id or ""),
            acceptable_recovery_lag_legacy=0,
            acceptable_recovery_lag=0,
            task_offset_interval_ms=0,
            topology_description_required=False,
            status=None,
            active_tasks=None,
            standby_tasks=None,
            warmup_tasks=None,
            endpoint_information_epoch=0,
            partitions_by_user_endpoint=None,
        )

    topology = _topology(req.topology)
    sources = (
        None if topology is None else {t for s in topology.subtopologies for t in s.source_topics}
    )
    refused = heartbeat_refusal(ctx, req.group_id, sources)
    if refused is not None or coord is None:
        return failed(*(refused or (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)))
    endpoint = req.user_endpoint
    result = coord.streams_heartbeat(
        sg.StreamsHeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            topology=topology,
            active=_tasks(req.active_tasks),
            standby=_tasks(req.standby_tasks),
            process_id=req.process_id,
            user_endpoint=None if endpoint is None else (endpoint.host, endpoint.port),
            client_tags=None
            if req.client_tags is None
            else {kv.key: kv.value for kv in req.client_tags},
            shutdown_application=bool(req.shutdown_application),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
        )
    )
    if result.error != ErrorCode.NONE:
        return failed(result.error, result.message)
    if result.create_topics:
        if ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster",
                         log_if_denied=False) or all(
            ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, t.name, log_if_denied=False)
            for t in result.create_topics
        ):  # fmt: skip
            _create_internal_topics(ctx.broker, result.create_topics)
    error = await offsets_replicated(ctx.broker, req.group_id)
    if error != ErrorCode.NONE:
        return failed(error)
    T = Resp.TaskIds

    def task_ids(tasks: Mapping[str, set[int]]) -> list[object]:
        return [T(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items())]

    active: list[object] | None = None
    standby: list[object] | None = None
    warmup: list[object] | None = None
    if result.tasks is not None:
        active, standby, warmup = task_ids(result.tasks[0]), task_ids(result.tasks[1]), []
    lag = int(group_configs.value(ctx.broker, req.group_id, "streams.acceptable.recovery.lag"))
    return Resp(
        **heartbeat_fields(ErrorCode.NONE, None, result, None),
        acceptable_recovery_lag_legacy=min(lag, 2**31 - 1),  # v0 (int32)
        acceptable_recovery_lag=lag,  # v1 (int64)
        task_offset_interval_ms=group_configs.value(
            ctx.broker, req.group_id, "streams.task.offset.interval.ms"
        ),
        topology_description_required=False,  # KIP-1331: odradek keeps no description
        status=[Resp.Status(status_code=c, status_detail=d) for c, d in result.status or []],
        active_tasks=active,
        standby_tasks=standby,
        warmup_tasks=warmup,
        endpoint_information_epoch=0,
        partitions_by_user_endpoint=None,
    )


@handles(ApiKey.STREAMS_GROUP_DESCRIBE, versions=(0, 1))
async def streams_group_describe(
    ctx: RequestContext, req: protocol.StreamsGroupDescribeRequest
) -> protocol.StreamsGroupDescribeResponse:
    Resp = protocol.StreamsGroupDescribeResponse
    G = Resp.DescribedGroup
    M = G.Member
    A = M.Assignment
    T = A.TaskIds
    S = G.Topology.Subtopology
    coord = ctx.group_coordinator

    def task_ids(tasks: Mapping[str, set[int]]) -> list[object]:
        return [T(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items()) if p]

    def topic_info(t: sg.TopicInfo) -> object:
        return S.TopicInfo(
            name=t.name,
            partitions=t.partitions,
            replication_factor=t.replication_factor,
            topic_configs=[S.TopicInfo.KeyValue(key=k, value=v) for k, v in t.configs],
        )

    def found(fields: Fields, group: sg.StreamsGroup) -> object:
        topology = None
        if group.topology is not None:
            topology = G.Topology(
                epoch=group.topology.epoch,
                subtopologies=[
                    S(
                        subtopology_id=s.subtopology_id,
                        source_topics=list(s.source_topics),
                        repartition_sink_topics=list(s.repartition_sink_topics),
                        state_changelog_topics=[topic_info(t) for t in s.state_changelog_topics],
                        repartition_source_topics=[
                            topic_info(t) for t in s.repartition_source_topics
                        ],
                    )
                    for s in group.topology.subtopologies
                ],
            )
        members = []
        for m in group.members.values():
            target_active, target_standby = group.target.get(m.member_id, ({}, {}))
            members.append(
                M(
                    member_id=m.member_id,
                    member_epoch=m.member_epoch,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    topology_epoch=m.topology_epoch,
                    process_id=m.process_id,
                    user_endpoint=None
                    if m.user_endpoint is None
                    else M.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                    client_tags=[M.KeyValue(key=k, value=v) for k, v in m.client_tags.items()],
                    task_offsets=[],
                    task_end_offsets=[],
                    assignment=A(
                        active_tasks=task_ids(m.active),
                        standby_tasks=task_ids(m.standby),
                        warmup_tasks=[],
                    ),
                    target_assignment=A(
                        active_tasks=task_ids(target_active),
                        standby_tasks=task_ids(target_standby),
                        warmup_tasks=[],
                    ),
                    is_classic=False,
                )
            )
        return G(
            **fields,
            topology=topology,
            members=members,
            topology_description=None,  # KIP-1331 (v1): not kept by odradek
            topology_description_status=0,
            assignor_name=STICKY,
        )

    out = describe_groups(
        ctx,
        req.group_ids,
        req.include_authorized_operations,
        lambda group_id: coord.streams_describe(group_id) if coord else (ErrorCode.NONE, None),
        lambda fields: G(
            **fields,
            topology=None,
            topology_description=None,
            topology_description_status=0,
            assignor_name=None,
        ),
        found,
    )
    return Resp(throttle_time_ms=0, groups=out)


@handles(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, versions=(0, 0))
async def streams_group_topology_description_update(
    ctx: RequestContext, req: protocol.StreamsGroupTopologyDescriptionUpdateRequest
) -> protocol.StreamsGroupTopologyDescriptionUpdateResponse:
    """Kafka 4.4 with no topology description plugin (its default) refuses every push."""
    allowed = group_allowed(ctx, AclOperation.READ, req.group_id)
    return protocol.StreamsGroupTopologyDescriptionUpdateResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.UNSUPPORTED_VERSION
        if allowed
        else ErrorCode.GROUP_AUTHORIZATION_FAILED,
        error_message=NO_DESCRIPTION_PLUGIN if allowed else None,
    )
