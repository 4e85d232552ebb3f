"""A share group's offsets as the admin APIs see them (KIP-932): DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets, served by the group's coordinator.

Kafka's group coordinator keeps which share-partitions a group has initialized and asks the share
coordinator (ReadShareGroupStateSummary, InitializeShareGroupState, DeleteShareGroupState). Here
the stored state in `__share_group_state` is the only record of that: a group's share-partitions
are those with a stored state, read from the local state partitions in one pass each and from the
other brokers with one ReadShareGroupState per broker. Altering writes a snapshot with the new
start offset, nothing in flight and the next state epoch; a share-partition leader still holding
the old state is fenced on its next write (FENCED_STATE_EPOCH) and reads the new one back, and
this broker's own copy is dropped at once. Deleting writes a tombstone for the snapshot key.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from odradek.coordinator.share.coordinator import (
    NOT_COORDINATOR,
    READ_STATE,
    STATE_TOPIC,
    WRITE_STATE,
    ShareCoordinator,
    SpKey,
    StoredState,
    stored_from_wire,
    write_state_request,
)
from odradek.coordinator.share.state import ACKNOWLEDGED, ARCHIVED
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

DELETE_STATE = ApiKey.DELETE_SHARE_GROUP_STATE
COORDINATOR_NOT_AVAILABLE = 15
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
LIST_OFFSETS_VERSION = 2  # timestamp -1 with read_uncommitted: the high watermark
STATE_TOPIC_WAIT_S = 5.0


@dataclass(slots=True, frozen=True)
class OffsetInfo:
    start_offset: int  # -1: the share-partition has no state
    leader_epoch: int
    lag: int  # -1: unknown


# -- reading and writing the state wherever it is led -----------------------------------------


async def read_states(
    coord: ShareCoordinator, group_id: str, keys: Iterable[SpKey]
) -> dict[SpKey, StoredState]:
    """The stored states of these keys that exist (one request per remote broker)."""
    wanted = set(keys)
    local = [k for k in wanted if coord.leads_state_of(k)]
    found = {k: v for k, v in coord.stored_group_states(group_id, local).items() if k in wanted}
    remote: dict[int, list[SpKey]] = {}
    for key in wanted.difference(local):
        node = coord._state_leader(key)
        if node is not None:
            remote.setdefault(node, []).append(key)
    R: Any = protocol.request_class(READ_STATE)
    for node, node_keys in remote.items():
        by_topic: dict[uuid.UUID, list[int]] = {}
        for _g, tid, p in node_keys:
            by_topic.setdefault(tid, []).append(p)
        req = R(
            group_id=group_id,
            topics=[
                R.ReadStateData(
                    topic_id=tid,
                    partitions=[
                        R.ReadStateData.PartitionData(partition=p, leader_epoch=0) for p in ps
                    ],
                )
                for tid, ps in by_topic.items()
            ],
        )
        resp = await coord._peer_request(node, READ_STATE, req)
        for result in resp.results if resp is not None else []:
            for p in result.partitions:
                state = stored_from_wire(p)
                if state is not None:
                    found[(group_id, result.topic_id, p.partition)] = state
    return found


async def store(coord: ShareCoordinator, key: SpKey, state: StoredState) -> int:
    """Write a share-partition's state where its state partition is led; 0 or an error code."""
    if coord.leads_state_of(key):
        return coord.write_stored(key, state)
    return await _ask_state_leader(coord, key, WRITE_STATE, write_state_request(key, state))


async def delete(coord: ShareCoordinator, key: SpKey) -> int:
    if coord.leads_state_of(key):
        return coord.delete_stored(key)
    D: Any = protocol.request_class(DELETE_STATE)
    req = D(
        group_id=key[0],
        topics=[
            D.DeleteStateData(
                topic_id=key[1], partitions=[D.DeleteStateData.PartitionData(partition=key[2])]
            )
        ],
    )
    return await _ask_state_leader(coord, key, DELETE_STATE, req)


async def _ask_state_leader(coord: ShareCoordinator, key: SpKey, api: int, req: Any) -> int:
    """Send a one-partition Write/DeleteShareGroupState to the leader of the key's state
    partition; its error code, 0, or COORDINATOR_NOT_AVAILABLE when it is unknown or silent."""
    node = coord._state_leader(key)
    if node is None:
        return COORDINATOR_NOT_AVAILABLE
    resp = await coord._peer_request(node, api, req)
    if resp is None:
        return COORDINATOR_NOT_AVAILABLE
    errors = [p.error_code for r in resp.results for p in r.partitions]
    return next((e for e in errors if e), 0)


# -- the three admin operations ---------------------------------------------------------------


async def high_watermarks(coord: ShareCoordinator, keys: Iterable[SpKey]) -> dict[SpKey, int]:
    """The partitions' high watermarks (Kafka's latest offsets, which the lag is counted to):
    read here where this broker leads the partition, else asked of the leader with ListOffsets
    (one request per broker); a partition with no answer is left out."""
    host = coord.host
    out: dict[SpKey, int] = {}
    remote: dict[int, dict[str, list[SpKey]]] = {}
    for key in keys:
        name = host.topic_name(key[1])
        leaders = host.partition_leaders(name) if name is not None else None
        if name is None or leaders is None or not 0 <= key[2] < len(leaders):
            continue
        part = host.partition(name, key[2])
        if part is not None and part.is_leader:
            out[key] = part.high_watermark
            continue
        leader = leaders[key[2]]
        if leader >= 0:
            remote.setdefault(leader, {}).setdefault(name, []).append(key)
    L: Any = protocol.ListOffsetsRequest
    for node, by_name in remote.items():
        req = L(
            replica_id=-1,
            isolation_level=0,
            topics=[
                L.ListOffsetsTopic(
                    name=name,
                    partitions=[
                        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=k[2], timestamp=-1)
                        for k in ks
                    ],
                )
                for name, ks in by_name.items()
            ],
        )
        resp = await coord._peer_request(node, ApiKey.LIST_OFFSETS, req, LIST_OFFSETS_VERSION)
        for t in resp.topics if resp is not None else []:
            for p in t.partitions:
                asked = [k for k in by_name.get(t.name, []) if k[2] == p.partition_index]
                if asked and not p.error_code and p.offset >= 0:
                    out[asked[0]] = p.offset
    return out


def offset_info(
    key: SpKey, state: StoredState | None, high_watermarks: dict[SpKey, int]
) -> OffsetInfo:
    """Start offset, leader epoch and lag as Kafka computes them: the high watermark less the
    start offset less the records past it already acknowledged or archived."""
    if state is None:
        return OffsetInfo(-1, -1, -1)
    hwm = high_watermarks.get(key)
    if hwm is None:
        return OffsetInfo(state.start_offset, state.leader_epoch, -1)
    done = sum(
        b.last_offset - b.first_offset + 1
        for b in state.batches
        if b.delivery_state in (ACKNOWLEDGED, ARCHIVED) and b.first_offset >= state.start_offset
    )
    return OffsetInfo(state.start_offset, state.leader_epoch, hwm - state.start_offset - done)


def all_keys(coord: ShareCoordinator, group_id: str) -> list[SpKey]:
    """Every share-partition the group could have: each partition of each topic."""
    return [
        (group_id, tid, p)
        for name, (tid, count) in coord.topic_metadata().items()
        if not name.startswith("__")
        for p in range(count)
    ]


async def state_topic(coord: ShareCoordinator, timeout_s: float = STATE_TOPIC_WAIT_S) -> bool:
    """Wait (bounded) until `__share_group_state` exists with leaders, creating it if needed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        leaders = coord.host.partition_leaders(STATE_TOPIC) if coord.state_topic_ready() else None
        if leaders is not None and all(leader >= 0 for leader in leaders):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.05)


async def alter(
    coord: ShareCoordinator, group_id: str, offsets: dict[SpKey, int]
) -> dict[SpKey, int]:
    """Set the start offsets of an empty group's share-partitions; key -> error code."""
    if not await state_topic(coord):
        return dict.fromkeys(offsets, COORDINATOR_NOT_AVAILABLE)
    current = await read_states(coord, group_id, offsets)
    out: dict[SpKey, int] = {}
    for key, start in offsets.items():
        old = current.get(key)
        epoch = old.state_epoch + 1 if old is not None else 1
        name = coord.host.topic_name(key[1])
        part = coord.host.partition(name, key[2]) if name is not None else None
        leader_epoch = part.leader_epoch if part is not None else 0
        out[key] = await store(coord, key, StoredState(epoch, leader_epoch, start, []))
        if out[key] == NOT_COORDINATOR:
            out[key] = COORDINATOR_NOT_AVAILABLE
        coord.partitions.pop(key, None)  # this broker's copy, if it leads the partition
    return out


async def delete_topics(
    coord: ShareCoordinator, group_id: str, keys: list[SpKey]
) -> dict[SpKey, int]:
    """Delete the stored state of these share-partitions (those that have one)."""
    out: dict[SpKey, int] = {}
    for key in keys:
        out[key] = await delete(coord, key)
        coord.partitions.pop(key, None)
    return out


async def delete_group(coord: ShareCoordinator, group_id: str) -> int:
    """DeleteGroups of a share group: an empty one is forgotten with all its state
    (NON_EMPTY_GROUP while it has members; GROUP_ID_NOT_FOUND when it has neither members
    nor state)."""
    group = coord.group(group_id)
    if group is not None and group.members:
        return NON_EMPTY_GROUP
    states = await read_states(coord, group_id, all_keys(coord, group_id))
    if group is None and not states:
        return GROUP_ID_NOT_FOUND
    outcome = await delete_topics(coord, group_id, list(states))
    error = next((c for c in outcome.values() if c), 0)
    if not error:
        coord.groups.pop(group_id, None)
    return error
