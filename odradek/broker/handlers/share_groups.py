"""KIP-932 share groups: ShareGroupHeartbeat (76) v1, ShareGroupDescribe (77) v1, ShareFetch (78)
and ShareAcknowledge (79) v1-2. v1 is Kafka 4.1's first stable version (what librdkafka 2.16's
ShareConsumer speaks); v2 (Kafka 4.2) adds ShareFetch's ShareAcquireMode (KIP-1206: 0
batch-optimized, 1 record-limit) and the Renew acknowledgement with IsRenewAck (KIP-1222: the
records stay acquired under a new lock; a renewing ShareFetch acquires nothing), and
ShareAcknowledge's AcquisitionLockTimeoutMs. The state lives in `odradek.coordinator.share`.

ShareFetch and ShareAcknowledge carry a share session (as Kafka's ShareSessionCache): epoch 0
opens it with the partitions the request names, each later request must carry the next epoch
(INVALID_SHARE_SESSION_EPOCH otherwise; SHARE_SESSION_NOT_FOUND without a session) and may add
partitions or forget them; -1 closes it, and the records its member still holds are released.
A session also ends when the connection that opened it closes (Kafka's ShareSessionCache
disconnect listener), not when its member leaves the group: a closing consumer's last
acknowledgements travel beside its leave heartbeat, on another connection, in no fixed order.
ShareFetch first applies the acknowledgements it piggybacks, then acquires MaxRecords records
from the session's partitions (waiting up to MaxWaitMs for some): by default the whole batch in
which MaxRecords is reached, exactly MaxRecords in record-limit mode; it answers with the whole
batches that hold them and the acquired offset ranges with their delivery counts. A group with
`share.isolation.level=read_committed` gets records up to the last stable offset only, and the
records of aborted transactions are archived, never delivered.

A consumer's consumer_byte_rate quota applies to ShareFetch as to Fetch (Kafka's
handleShareFetchRequest): MaxBytes is capped at what the quota allows in one window, the size
of the records answered is recorded, and a client over its quota gets throttle_time_ms, its
connection muted for that long and an answer without records. Beyond Kafka, which leaves such
records acquired until their lock expires (a delivery the client never saw, counted towards
the delivery limit), the records are given back at once with their delivery counts as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import TypedDict

from odradek.broker.network import quotas as q
from odradek.broker.network.context import RequestContext
from odradek.broker.network.registry import handles
from odradek.broker.share_host import share_coordinator
from odradek.coordinator.share.coordinator import (
    READ_STATE,
    WRITE_STATE,
    ShareCoordinator,
    ShareSession,
    SpKey,
    StoredState,
    batches_from_wire,
    batches_to_wire,
    mono_ms,
    state_key_error,
)
from odradek.coordinator.share.state import Acquired, SharePartition
from odradek.log.log import Log
from odradek.log.reader import LogBatch
from odradek.log.txn_index import AbortedTxn
from odradek.security.acl_types import CLUSTER_NAME, AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

SHARE_GROUP_HEARTBEAT = ApiKey.SHARE_GROUP_HEARTBEAT
SHARE_GROUP_DESCRIBE = ApiKey.SHARE_GROUP_DESCRIBE
SHARE_FETCH = ApiKey.SHARE_FETCH
RECORD_LIMIT = 1  # ShareFetch v2 ShareAcquireMode (0: batch-optimized, the default)
SHARE_ACKNOWLEDGE = ApiKey.SHARE_ACKNOWLEDGE

NONE = 0
NOT_COORDINATOR = 16
CLUSTER_AUTHORIZATION_FAILED = 31
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
GROUP_AUTHORIZATION_FAILED = 30
TOPIC_AUTHORIZATION_FAILED = 29
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_ID = 100
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123

MAX_EPOCH = 0x7FFFFFFF


class _Answer(TypedDict):
    """One partition of a ShareFetch answer, as it is gathered."""

    error: int
    ack_error: int
    records: bytearray
    acquired: list[Acquired]


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.client_host.strip("[]")


# -- ShareGroupHeartbeat -----------------------------------------------------------------------


@handles(SHARE_GROUP_HEARTBEAT, versions=(1, 1))
async def share_group_heartbeat(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    Resp = protocol.response_class(SHARE_GROUP_HEARTBEAT)
    coord = share_coordinator(ctx.broker)

    def error(code: int, message: str | None = None) -> protocol.Message:
        return Resp(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            member_id=None,
            member_epoch=0,
            heartbeat_interval_ms=0,
            assignment=None,
        )

    if not req.group_id:
        return error(INVALID_REQUEST, "GroupId can't be empty.")
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return error(GROUP_AUTHORIZATION_FAILED)
    if req.member_epoch < -1 or (req.member_epoch != 0 and not req.member_id):
        return error(INVALID_REQUEST, "MemberId can't be empty.")
    if req.member_epoch == -1:
        group = coord.group(req.group_id)
        if group is None or not group.leave(req.member_id):
            return error(25, f"Member {req.member_id} is not a member of the group.")
        # the member's share sessions stay: a closing consumer sends its last
        # acknowledgements (ShareAcknowledge, epoch -1) beside this leave, on another
        # connection; its records are released when that session closes or its connection does
        coord.poke()
        return Resp(
            throttle_time_ms=0,
            error_code=NONE,
            error_message=None,
            member_id=req.member_id,
            member_epoch=-1,
            heartbeat_interval_ms=0,
            assignment=None,
        )
    if req.subscribed_topic_names is not None:
        denied = [
            t
            for t in req.subscribed_topic_names
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t)
        ]
        if denied:
            return error(TOPIC_AUTHORIZATION_FAILED)
    coord.state_topic_ready()  # start creating __share_group_state before the first fetch
    group = coord.group(req.group_id, create=req.member_epoch == 0)
    if group is None:
        return error(25, f"Group {req.group_id} not found.")
    result = group.heartbeat(
        req.member_id,
        req.member_epoch,
        req.rack_id,
        None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        ctx.client_id or "",
        _client_host(ctx),
        coord.topic_metadata(),
        mono_ms(),
        coord.group_session_ms(req.group_id),
        coord.max_size,
    )
    coord.poke()
    if result.error:
        return error(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        assignment = Resp.Assignment(
            topic_partitions=[
                Resp.Assignment.TopicPartitions(topic_id=tid, partitions=sorted(parts))
                for tid, parts in sorted(result.assignment.items(), key=lambda x: str(x[0]))
            ]
        )
    return Resp(
        throttle_time_ms=0,
        error_code=NONE,
        error_message=None,
        member_id=result.member_id,
        member_epoch=result.epoch,
        heartbeat_interval_ms=coord.group_heartbeat_ms(req.group_id),
        assignment=assignment,
    )


# -- ListGroups --------------------------------------------------------------------------------


# -- ShareGroupDescribe ------------------------------------------------------------------------


@handles(SHARE_GROUP_DESCRIBE, versions=(1, 1))
async def share_group_describe(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    Resp = protocol.response_class(SHARE_GROUP_DESCRIBE)
    G = Resp.DescribedGroup
    coord = share_coordinator(ctx.broker)
    names = {tid: name for tid, name in ctx.topics.by_id.items()}
    groups = []
    for group_id in req.group_ids:
        empty: dict[str, object] = dict(
            group_id=group_id,
            group_state="",
            group_epoch=-1,
            assignment_epoch=-1,
            assignor_name="",
            members=[],
            authorized_operations=-(2**31),
        )
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(G(error_code=GROUP_AUTHORIZATION_FAILED, error_message=None, **empty))
            continue
        group = coord.group(group_id)
        if group is None:
            groups.append(
                G(
                    error_code=GROUP_ID_NOT_FOUND,
                    error_message=f"Group {group_id} not found.",
                    **empty,
                )
            )
            continue
        members = [
            G.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.topics),
                assignment=G.Member.Assignment(
                    topic_partitions=[
                        G.Member.Assignment.TopicPartitions(
                            topic_id=tid, topic_name=names.get(tid, ""), partitions=sorted(ps)
                        )
                        for tid, ps in m.assignment.items()
                    ]
                ),
            )
            for m in group.members.values()
        ]
        groups.append(
            G(
                error_code=NONE,
                error_message=None,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name="simple",
                members=members,
                authorized_operations=-(2**31),
            )
        )
    return Resp(throttle_time_ms=0, groups=groups)


# -- sessions ----------------------------------------------------------------------------------


def _session(
    coord: ShareCoordinator,
    group_id: str,
    member_id: str,
    epoch: int,
    fetch: bool,
    owner: object | None,
) -> tuple[int, ShareSession | None]:
    """The request's share session after its epoch is checked: (error, session). A new one
    belongs to `owner`, the connection that opened it."""
    key = (group_id, member_id)
    if epoch == 0:
        if not fetch:
            return INVALID_SHARE_SESSION_EPOCH, None
        old = coord.sessions.pop(key, None)
        if old is not None:
            coord.release_member(group_id, member_id)
        fresh = coord.sessions[key] = ShareSession(owner=owner)
        return NONE, fresh
    session = coord.sessions.get(key)
    if session is None:
        return SHARE_SESSION_NOT_FOUND, None
    if epoch == -1:
        return NONE, session
    if epoch != session.next_epoch:
        return INVALID_SHARE_SESSION_EPOCH, None
    session.next_epoch = 1 if epoch >= MAX_EPOCH else epoch + 1
    return NONE, session


def _request_session(
    ctx: RequestContext, coord: ShareCoordinator, req: protocol.Message, fetch: bool
) -> tuple[int, str | None, ShareSession | None]:
    """The share session of a ShareFetch / ShareAcknowledge once its group and member ids, READ
    on the group and its session epoch are checked: (NONE, None, session), or the whole
    request's (error, message, None)."""
    group_id, member_id = req.group_id, req.member_id
    if not group_id or not member_id:
        return INVALID_REQUEST, "GroupId and MemberId must be set.", None
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, None, None
    error, session = _session(
        coord, group_id, member_id, req.share_session_epoch, fetch, ctx.connection
    )
    if error or session is None:
        return error, None, None
    return NONE, None, session


def _close_session(coord: ShareCoordinator, group_id: str, member_id: str) -> None:
    coord.sessions.pop((group_id, member_id), None)
    if coord.release_member(group_id, member_id):
        coord.wake()


async def _acknowledge(
    ctx: RequestContext,
    coord: ShareCoordinator,
    group_id: str,
    member_id: str,
    topic_id: uuid.UUID,
    index: int,
    batches: protocol.Message,
) -> int:
    name = ctx.topics.name_for_id(topic_id)
    if name is None:
        return UNKNOWN_TOPIC_ID
    part = ctx.topics.get(name, index)
    if part is None:
        return UNKNOWN_TOPIC_OR_PARTITION
    if not part.is_leader:
        return NOT_LEADER_OR_FOLLOWER
    key: SpKey = (group_id, topic_id, index)
    sp = await coord.known_partition(key)
    if sp is None:
        return 121  # INVALID_RECORD_STATE: nothing was acquired here
    error = NONE
    # Renew (KIP-1222) from v2 on, when the group allows it
    renew_at = mono_ms() if ctx.api_version >= 2 and coord.group_renew_enabled(group_id) else None
    for b in batches:
        code = sp.acknowledge(
            member_id, b.first_offset, b.last_offset, list(b.acknowledge_types), renew_at
        )
        error = error or code
    coord.persist(key)
    coord.wake()  # released records may go to a waiting fetch
    return error


def _leader(ctx: RequestContext, topic_id: uuid.UUID, index: int) -> tuple[int, int]:
    name = ctx.topics.name_for_id(topic_id)
    part = ctx.topics.get(name, index) if name is not None else None
    return (part.leader, part.leader_epoch) if part is not None else (-1, -1)


async def _reread_idle(coord: ShareCoordinator, group_id: str, topics: protocol.Message) -> None:
    """A new share session on a broker that is not the group's coordinator: the share-partitions
    it names that hold no acquired record are read again from `__share_group_state`, where an
    AlterShareGroupOffsets or DeleteShareGroupOffsets answered by the coordinator (for an empty
    group, so before this member came) may have changed them."""
    keys: list[SpKey] = [
        (group_id, t.topic_id, p.partition_index) for t in topics for p in t.partitions
    ]
    await coord.flushed(keys)  # what this broker wrote reaches the share coordinator first
    for key in keys:
        sp = coord.partitions.get(key)
        if sp is not None and sp.in_flight() == 0:
            del coord.partitions[key]


# -- ShareFetch --------------------------------------------------------------------------------


@handles(SHARE_FETCH, versions=(1, 2))
async def share_fetch(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    Resp = protocol.response_class(SHARE_FETCH)
    T = Resp.ShareFetchableTopicResponse
    P = T.PartitionData
    coord = share_coordinator(ctx.broker)

    def top_error(code: int, message: str | None = None) -> protocol.Message:
        return Resp(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            acquisition_lock_timeout_ms=coord.group_lock_ms(group_id),
            responses=[],
            node_endpoints=[],
        )

    group_id, member_id = req.group_id, req.member_id
    error, message, session = _request_session(ctx, coord, req, fetch=True)
    if session is None:
        return top_error(error, message)
    quota = ctx.broker.quotas.fetch if ctx.broker.quotas.fetch.enabled else None
    user, client_id = q.tags_of(ctx)
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    if quota is not None:  # no more than the quota allows in one window, as Kafka
        window_max = quota.max_value_in_window(user, client_id)
        if window_max is not None:
            max_bytes = max(1, min(max_bytes, int(window_max)))
    if req.share_session_epoch == 0 and ctx.group_coordinator.status(group_id, "share"):
        await _reread_idle(coord, group_id, req.topics)

    results: dict[tuple[uuid.UUID, int], _Answer] = {}

    def entry(tid: uuid.UUID, index: int) -> _Answer:
        got = results.get((tid, index))
        if got is None:
            got = results[(tid, index)] = _Answer(
                error=NONE, ack_error=NONE, records=bytearray(), acquired=[]
            )
        return got

    # acknowledgements first, and the session's partitions
    for topic in req.topics:
        for p in topic.partitions:
            session.partitions.add((topic.topic_id, p.partition_index))
            if p.acknowledgement_batches:
                entry(topic.topic_id, p.partition_index)["ack_error"] = await _acknowledge(
                    ctx,
                    coord,
                    group_id,
                    member_id,
                    topic.topic_id,
                    p.partition_index,
                    p.acknowledgement_batches,
                )
    for topic in req.forgotten_topics_data:
        for index in topic.partitions:
            session.partitions.discard((topic.topic_id, index))

    closing = req.share_session_epoch == -1
    if closing:
        _close_session(coord, group_id, member_id)
    elif renew_only(ctx, req):
        pass  # KIP-1222: a renewing ShareFetch acquires nothing new
    elif req.max_records > 0 and session.partitions:
        await _fetch_records(ctx, coord, req, group_id, member_id, session, entry, max_bytes)
    throttle_ms = 0
    if quota is not None:
        total = sum(len(got["records"]) for got in results.values())
        throttle_ms = quota.record(user, client_id, total)
        if throttle_ms > 0:  # over quota: answered without records, the bytes taken back
            quota.unrecord(user, client_id, total)
            q.throttle(ctx, throttle_ms)
            _give_back(coord, group_id, member_id, results)

    # acknowledged state reaches the share coordinator before the client hears of it
    await coord.flushed((group_id, tid, index) for tid, index in results)
    responses: dict[uuid.UUID, list[protocol.Message]] = {}
    for (tid, index), got in results.items():
        leader_id, leader_epoch = _leader(ctx, tid, index)
        responses.setdefault(tid, []).append(
            P(
                partition_index=index,
                error_code=got["error"],
                error_message=None,
                acknowledge_error_code=got["ack_error"],
                acknowledge_error_message=None,
                current_leader=P.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
                records=bytes(got["records"]),
                acquired_records=[
                    P.AcquiredRecords(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in got["acquired"]
                ],
            )
        )
    return Resp(
        throttle_time_ms=throttle_ms,
        error_code=NONE,
        error_message=None,
        acquisition_lock_timeout_ms=coord.group_lock_ms(group_id),
        responses=[T(topic_id=tid, partitions=parts) for tid, parts in responses.items()],
        node_endpoints=[],
    )


def _give_back(
    coord: ShareCoordinator,
    group_id: str,
    member_id: str,
    results: dict[tuple[uuid.UUID, int], _Answer],
) -> None:
    """A throttled answer carries no records: what it acquired is available again."""
    for (tid, index), got in results.items():
        sp = coord.partitions.get((group_id, tid, index))
        if got["acquired"] and sp is not None:
            sp.unacquire(member_id, got["acquired"])
            coord.persist((group_id, tid, index))
        got["acquired"], got["records"] = [], bytearray()
    coord.wake()


def renew_only(ctx: RequestContext, req: protocol.Message) -> bool:
    return ctx.api_version >= 2 and bool(req.is_renew_ack)


def record_limit(ctx: RequestContext, req: protocol.Message) -> bool:
    """KIP-1206's record-limit acquisition (ShareAcquireMode 1): at most MaxRecords records;
    otherwise (v1, mode 0) whole batches, even past MaxRecords."""
    return ctx.api_version >= 2 and req.share_acquire_mode == RECORD_LIMIT


async def _fetch_records(
    ctx: RequestContext,
    coord: ShareCoordinator,
    req: protocol.Message,
    group_id: str,
    member_id: str,
    session: ShareSession,
    entry: Callable[[uuid.UUID, int], _Answer],
    max_bytes: int,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000
    read_committed = coord.group_read_committed(group_id)
    limit = record_limit(ctx, req)
    while True:
        remaining = req.max_records
        size = 0
        waiters = []
        state_ready = coord.state_topic_ready()
        for tid, index in sorted(session.partitions, key=lambda x: (str(x[0]), x[1])):
            name = ctx.topics.name_for_id(tid)
            part = ctx.topics.get(name, index) if name is not None else None
            if name is None or part is None:
                entry(tid, index)["error"] = (
                    UNKNOWN_TOPIC_ID if name is None else UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            if not part.is_leader:
                entry(tid, index)["error"] = NOT_LEADER_OR_FOLLOWER
                continue
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                entry(tid, index)["error"] = TOPIC_AUTHORIZATION_FAILED
                continue
            waiters.append(part)
            if remaining <= 0 or size >= max_bytes or not state_ready:
                continue
            sp = await coord.share_partition((group_id, tid, index), part)
            # share.isolation.level=read_committed: up to the last stable offset, the batches
            # of aborted transactions archived like control batches, never delivered
            committed = read_committed
            hwm = part.last_stable_offset if committed else part.high_watermark
            log = part.log
            if sp.start_offset >= hwm and not sp.has_available():
                continue
            aborted = log.aborted_transactions(sp.start_offset, hwm) if committed else []
            batches: list[LogBatch] = []  # those the acquisition looked at (it stops when done)

            def ranges(
                log: Log = log,
                hwm: int = hwm,
                sp: SharePartition = sp,
                seen: list[LogBatch] = batches,
                aborted: list[AbortedTxn] = aborted,
            ) -> Iterator[tuple[int, int, bool, int]]:
                for batch in log.batches(sp.start_offset, hwm):
                    seen.append(batch)
                    h = batch.header()
                    skip = h.is_control or (
                        bool(aborted)
                        and h.is_transactional
                        and any(
                            a.producer_id == h.producer_id
                            and a.first_offset <= batch.base_offset <= a.last_offset
                            for a in aborted
                        )
                    )
                    yield batch.base_offset, batch.last_offset, skip, batch.size

            acquired = sp.acquire(
                member_id,
                ranges(),
                remaining,
                mono_ms(),
                max_bytes - size,
                whole_first=not size,
                record_limit=limit,
            )
            if not acquired:
                continue
            coord.persist((group_id, tid, index))  # the delivery counts survive a crash
            coord.poke()
            got = entry(tid, index)
            got["acquired"].extend(acquired)
            remaining -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            for b in batches:
                if any(
                    a.first_offset <= b.last_offset and b.base_offset <= a.last_offset
                    for a in acquired
                ):
                    data = b.read()
                    got["records"] += data
                    size += len(data)
        if remaining < req.max_records or loop.time() >= deadline:
            return
        # nothing acquired: wait for new records or released ones, up to MaxWaitMs
        fut: asyncio.Future[None] = loop.create_future()
        for part in waiters:
            part.add_waiter(fut)
        released = coord.released
        rel = loop.create_task(released.wait())
        either: list[asyncio.Future[None] | asyncio.Task[bool]] = [fut, rel]
        try:
            await asyncio.wait(
                either,
                timeout=max(0.0, deadline - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            rel.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rel
            for part in waiters:
                part.remove_waiter(fut)
        if not state_ready and loop.time() < deadline:
            await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))


# -- ShareAcknowledge --------------------------------------------------------------------------


@handles(SHARE_ACKNOWLEDGE, versions=(1, 2))
async def share_acknowledge(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    Resp = protocol.response_class(SHARE_ACKNOWLEDGE)
    T = Resp.ShareAcknowledgeTopicResponse
    P = T.PartitionData
    coord = share_coordinator(ctx.broker)

    def top_error(code: int, message: str | None = None) -> protocol.Message:
        # no lock was renewed: 0, as Kafka 4.4 answers a refused ShareAcknowledge v2
        return Resp(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            acquisition_lock_timeout_ms=0,
            responses=[],
            node_endpoints=[],
        )

    group_id, member_id = req.group_id, req.member_id
    error, message, session = _request_session(ctx, coord, req, fetch=False)
    if session is None:
        return top_error(error, message)
    topics = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            code = await _acknowledge(
                ctx,
                coord,
                group_id,
                member_id,
                topic.topic_id,
                p.partition_index,
                p.acknowledgement_batches,
            )
            leader_id, leader_epoch = _leader(ctx, topic.topic_id, p.partition_index)
            parts.append(
                P(
                    partition_index=p.partition_index,
                    error_code=code,
                    error_message=None,
                    current_leader=P.LeaderIdAndEpoch(
                        leader_id=leader_id, leader_epoch=leader_epoch
                    ),
                )
            )
        topics.append(T(topic_id=topic.topic_id, partitions=parts))
    if req.share_session_epoch == -1:
        _close_session(coord, group_id, member_id)
    await coord.flushed(
        (group_id, t.topic_id, p.partition_index) for t in req.topics for p in t.partitions
    )
    return Resp(
        throttle_time_ms=0,
        error_code=NONE,
        error_message=None,
        acquisition_lock_timeout_ms=coord.group_lock_ms(group_id),
        responses=topics,
        node_endpoints=[],
    )


# -- ReadShareGroupState / WriteShareGroupState (broker to share coordinator) -----------------


@handles(READ_STATE, versions=(0, 0))
async def read_share_group_state(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    """A share-partition leader reads the stored state of a share-partition from the broker
    that leads its `__share_group_state` partition (StartOffset -1: nothing stored)."""
    Resp = protocol.response_class(READ_STATE)
    R = Resp.ReadStateResult
    P = R.PartitionResult
    coord = share_coordinator(ctx.broker)
    denied = not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    asked: list[SpKey] = [
        (req.group_id, t.topic_id, p.partition)
        for t in req.topics
        for p in t.partitions
        if not state_key_error(t.topic_id, p.partition)
    ]
    # each state partition is read once for all the keys asked (DescribeShareGroupOffsets asks
    # for every partition of every topic)
    stored = {} if denied else coord.stored_group_states(req.group_id, asked)
    results = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            key: SpKey = (req.group_id, topic.topic_id, p.partition)
            error, state = NONE, None
            if denied:
                error = CLUSTER_AUTHORIZATION_FAILED
            elif bad := state_key_error(topic.topic_id, p.partition):
                error = bad
            elif not coord.leads_state_of(key):
                error = NOT_COORDINATOR
            else:
                state = stored.get(key)
            parts.append(
                P(
                    partition=p.partition,
                    error_code=error,
                    error_message=None,
                    state_epoch=state.state_epoch if state else 0,
                    start_offset=state.start_offset if state else -1,
                    state_batches=batches_to_wire(P.StateBatch, state.batches if state else []),
                )
            )
        results.append(R(topic_id=topic.topic_id, partitions=parts))
    return Resp(results=results)


@handles(WRITE_STATE, versions=(0, 0))
async def write_share_group_state(ctx: RequestContext, req: protocol.Message) -> protocol.Message:
    """A share-partition leader writes its state to the broker that leads the key's
    `__share_group_state` partition, as a ShareSnapshot record."""
    Resp = protocol.response_class(WRITE_STATE)
    R = Resp.WriteStateResult
    coord = share_coordinator(ctx.broker)
    denied = not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            key: SpKey = (req.group_id, topic.topic_id, p.partition)
            if denied:
                error = CLUSTER_AUTHORIZATION_FAILED
            elif bad := state_key_error(topic.topic_id, p.partition):
                error = bad
            else:
                batches = batches_from_wire(p.state_batches)
                error = coord.write_stored(
                    key, StoredState(p.state_epoch, p.leader_epoch, p.start_offset, batches)
                )
            parts.append(
                R.PartitionResult(partition=p.partition, error_code=error, error_message=None)
            )
        results.append(R(topic_id=topic.topic_id, partitions=parts))
    return Resp(results=results)
