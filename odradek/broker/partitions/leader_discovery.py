"""KIP-951 leader discovery: a Produce (v10+) or Fetch (v16+) partition that fails with
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries the partition's current leader and epoch
(`CurrentLeader`), and the response lists the endpoints of those leaders on the client's
listener (`NodeEndpoints`), so the client can retry at the new leader without a Metadata round
trip, as Kafka's KafkaApis does from its metadata cache. A leader that is unknown (-1) or not
live gets no endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.network.context import RequestContext
    from odradek.broker.partitions.fetch_sessions import SessionPartition
    from odradek.broker.server import Broker
    from odradek.wire.fetch_encoder import PartitionData

LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
PRODUCE_MIN_VERSION = 10
FETCH_MIN_VERSION = 16

Endpoint = tuple[int, str, int, str | None]  # node id, host, port, rack


def current_leader(broker: Broker, topic: str, index: int) -> tuple[int, int] | None:
    """(leader id, leader epoch) of a partition from the cluster metadata, None if unknown."""
    info = broker.topics.info(topic)
    if info is None or not 0 <= index < len(info.partitions):
        return None
    state = info.partitions[index]
    return state.leader, state.leader_epoch


def leader_epoch_error(current: int, leader_epoch: int) -> ErrorCode | None:
    """A request's current leader epoch against the partition's (Kafka's
    Partition.getPartitionWithLeaderEpoch): None when not given (-1) or equal, FENCED_LEADER_EPOCH
    when older, UNKNOWN_LEADER_EPOCH when newer."""
    if current < 0 or current == leader_epoch:
        return None
    if current < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def endpoints(ctx: RequestContext, node_ids: set[int]) -> list[Endpoint]:
    """The live brokers among `node_ids`, at the listener this client came in on."""
    return [e for e in ctx.broker.broker_endpoints(ctx.listener) if e[0] in node_ids]


def annotate_produce(
    ctx: RequestContext, resp: protocol.ProduceResponse
) -> protocol.ProduceResponse:
    """Fill CurrentLeader / NodeEndpoints of a ProduceResponse (v10+) in place."""
    if ctx.api_version < PRODUCE_MIN_VERSION:
        return resp
    leaders: set[int] = set()
    for topic in resp.responses:
        for part in topic.partition_responses:
            if part.error_code not in LEADER_ERRORS:
                continue
            found = current_leader(ctx.broker, topic.name, part.index)
            if found is None:
                continue
            part.current_leader = type(part).LeaderIdAndEpoch(
                leader_id=found[0], leader_epoch=found[1]
            )
            if found[0] >= 0:
                leaders.add(found[0])
    if leaders:
        resp.node_endpoints = [
            type(resp).NodeEndpoint(node_id=n, host=h, port=p, rack=r)
            for n, h, p, r in endpoints(ctx, leaders)
        ]
    return resp


def fetch_leaders(
    ctx: RequestContext, results: list[tuple[SessionPartition, PartitionData]]
) -> list[Endpoint]:
    """For Fetch v16+: set `current_leader` of each failed partition (fetch_encoder's
    PartitionData, keyed by a session partition with `.topic`) and return the NodeEndpoints."""
    if ctx.api_version < FETCH_MIN_VERSION:
        return []
    leaders: set[int] = set()
    for sp, pd in results:
        if pd.error_code not in LEADER_ERRORS:
            continue
        found = current_leader(ctx.broker, sp.topic, pd.partition_index)
        if found is None:
            continue
        pd.current_leader = found
        if found[0] >= 0:
            leaders.add(found[0])
    return endpoints(ctx, leaders) if leaders else []
