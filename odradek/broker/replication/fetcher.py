"""Replica fetchers, as Kafka's ReplicaFetcherThread / AbstractFetcherThread.

A follower runs one `ReplicaFetcher` task per leader broker, for every partition it follows
there. Each partition starts out *truncating*: the follower asks the leader, with
OffsetForLeaderEpoch (KIP-101, KIP-279), where the follower's latest leader epoch ends in the
leader's log, and cuts its own log there, so records a deposed leader wrote but never
replicated are gone before fetching resumes. Then it *fetches*: Fetch with its replica id from
its log end offset (which tells the leader how far it has got), appending the leader's batches
as they are (offsets and epochs included) with `Log.append_as_follower`, and taking the
leader's high watermark (capped by its own log end offset).

Truncation, per partition, from the leader's answer (epoch E', end offset O) to the follower's
latest epoch E:

    E' undefined                     -> truncate to the follower's high watermark
    follower's largest epoch <= E' is E'
                                     -> truncate to min(O, end of E' here); done
    it is an older epoch F           -> truncate to the end of F here, ask again with F
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVarTuple

from odradek.broker.partitions.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH
from odradek.broker.replication.client import PeerClient, PeerError
from odradek.broker.replication.fetch_request import FetchPartition, encode_fetch_v12
from odradek.broker.replication.fetch_response import (
    MalformedResponse,
    PartitionAnswer,
    parse_fetch_v12,
)
from odradek.log.disk_faults import KafkaStorageError
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.batch import (
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    crc_ok,
    parse_header,
    peek_sizes,
)
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import MetadataStore
    from odradek.broker.partitions.partition import Partition
    from odradek.broker.server import Broker


class FetcherHost(Protocol):
    """What a fetcher uses of its ReplicaManager: a Protocol, so that this module does not import
    the manager that creates its fetchers."""

    node_id: int
    broker: Broker
    store: MetadataStore
    fetch_wait_ms: int
    fetch_max_bytes: int
    fetch_delay_ms: int
    backoff_s: float

    def can_reach(self, peer: int) -> bool: ...


Ts = TypeVarTuple("Ts")

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # current leader epoch (v9), flexible, topic names (v13 switches to ids)
EPOCH_VERSION = 4
RESPONSE_MAX_BYTES = 10 * 1024 * 1024  # Kafka's replica.fetch.response.max.bytes default
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0


@dataclass(slots=True)
class FetchState:
    topic: str
    index: int
    leader_epoch: int
    truncating: bool = True


def whole_batches(data: Buffer) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """The complete, CRC-checked batches at the start of `data`: (bytes used, batches), checked
    in place (a memoryview of the response frame). A fetch may end in a partial batch (the
    leader cuts at max bytes); it is left for later."""
    pos = 0
    out = []
    end = len(data)
    while end - pos >= LOG_OVERHEAD:
        _base, length = peek_sizes(data, pos)
        if length + LOG_OVERHEAD > end - pos:
            break
        header = parse_header(data, pos)
        if not crc_ok(data, pos, header):
            raise CorruptRecordError(f"CRC mismatch in the batch at offset {header.base_offset}")
        out.append((pos, header))
        pos += header.size
    return pos, out


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    def __init__(self, manager: FetcherHost, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self.client: PeerClient | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        # the fetch session with the leader (KIP-227): id, next epoch, and what it holds of
        # each partition (fetch offset, leader epoch, log start offset) as last sent
        self._session_id = 0
        self._session_epoch = INITIAL_EPOCH
        self._sessions = True  # False once the leader answered a full fetch without a session
        self._in_session: dict[tuple[str, int], tuple[int, int, int]] = {}

    # -- membership -------------------------------------------------------------------------

    def add(self, topic: str, index: int, leader_epoch: int) -> None:
        self.partitions[(topic, index)] = FetchState(topic, index, leader_epoch)
        self._changed.set()
        if self._task is None:
            name = f"replica-fetcher-{self.manager.node_id}-from-{self.leader_id}"
            self._task = asyncio.create_task(self._run(), name=name)

    def remove(self, key: tuple[str, int]) -> None:
        if self.partitions.pop(key, None) is not None:
            self._changed.set()

    async def stop(self) -> None:
        self._stopping = True  # besides cancelling: a cancellation can be lost in a race
        self._changed.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
        self._disconnect()

    def abandon(self) -> None:
        self._stopping = True
        self._changed.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._disconnect()

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        mgr = self.manager
        while not self._stopping:
            if not self.partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                if not mgr.can_reach(self.leader_id):
                    self._disconnect()  # a cut link: as if packets were dropped
                    await self._pause(mgr.backoff_s)
                    continue
                await self._connect()
                if mgr.fetch_delay_ms:
                    await asyncio.sleep(mgr.fetch_delay_ms / 1000)  # a slowed follower
                truncating = [s for s in self.partitions.values() if s.truncating]
                if truncating:
                    await self._truncate(truncating)
                fetching = [s for s in self.partitions.values() if not s.truncating]
                if not fetching or not await self._fetch(fetching):
                    await self._pause(mgr.backoff_s)
            except PeerError as exc:
                log.debug("fetcher %d <- %d: %s", mgr.node_id, self.leader_id, exc)
                self._disconnect()
                await self._pause(mgr.backoff_s)
            except CorruptRecordError as exc:
                log.warning("fetcher %d <- %d: %s", mgr.node_id, self.leader_id, exc)
                self._disconnect()
                await self._pause(mgr.backoff_s)

    async def _pause(self, seconds: float) -> None:
        """Back off, but wake early when partitions are added or removed."""
        self._changed.clear()
        try:
            async with asyncio.timeout(seconds):
                await self._changed.wait()
        except TimeoutError:
            pass

    async def _connect(self) -> None:
        if self.client is not None and self.client.connected:
            return
        reg = self.manager.store.broker(self.leader_id)
        if reg is None:
            raise PeerError(f"broker {self.leader_id} is not registered")
        security = self.manager.broker.security
        host, port = reg.endpoint(security.inter_broker)
        client = PeerClient(
            host,
            port,
            f"odradek-replica-fetcher-{self.manager.node_id}",
            security.peer_tls(),
            security.peer_sasl,
            self.manager.broker.config.get("replica.socket.receive.buffer.bytes"),
        )
        await client.connect(CONNECT_TIMEOUT_S)
        self.client = client

    def _disconnect(self) -> None:
        self._reset_session()
        if self.client is not None:
            self.client.close()
            self.client = None

    def _current(self, state: FetchState) -> Partition | None:
        """The local partition when `state` still describes it (else None: it moved on)."""
        if self.partitions.get((state.topic, state.index)) is not state:
            return None
        part = self.manager.broker.topics.get(state.topic, state.index)
        if part is not None and part.offline:
            self._mark_failed(state, "its log dir is offline")
            return None
        if (
            part is None
            or part.is_leader
            or part.leader != self.leader_id
            or part.leader_epoch != state.leader_epoch
        ):
            return None
        return part

    def _mark_failed(self, state: FetchState, reason: str) -> None:
        """Stop fetching one partition and go on with the others (Kafka's markPartitionFailed,
        KIP-461): it is fetched again only when a leader change adds it anew. The leader's ISR
        loses this replica as it stops fetching."""
        key = (state.topic, state.index)
        if self.partitions.get(key) is state:
            del self.partitions[key]
            log.error(
                "fetcher %d <- %d: stopped fetching %s-%d: %s",
                self.manager.node_id,
                self.leader_id,
                state.topic,
                state.index,
                reason,
            )

    def _guarded(self, state: FetchState, fn: Callable[[*Ts], object], *args: *Ts) -> object:
        """`fn(*args)`: one partition's local work; a storage error (or a bug) fails that
        partition only, the fetcher goes on with the others."""
        try:
            return fn(*args)
        except KafkaStorageError as exc:
            self._mark_failed(state, str(exc))
        except Exception as exc:
            log.exception("%s-%d: unexpected error while replicating", state.topic, state.index)
            self._mark_failed(state, f"unexpected {type(exc).__name__}")
        return None

    # -- truncation (OffsetForLeaderEpoch) --------------------------------------------------

    async def _truncate(self, states: list[FetchState]) -> None:
        Req = protocol.OffsetForLeaderEpochRequest
        topics: dict[str, list[protocol.Message]] = {}
        asked: dict[tuple[str, int], tuple[FetchState, int]] = {}
        for st in states:
            part = self._current(st)
            if part is None:
                continue
            lg = part.log
            epoch = lg.epochs.latest_epoch
            if epoch < 0:
                # no epochs: nothing written under any leader, or a log from before epochs
                to = min(part.high_watermark, lg.log_end_offset)
                self._guarded(st, self._truncate_to, part, st, to)
                st.truncating = False
                continue
            asked[(st.topic, st.index)] = (st, epoch)
            topics.setdefault(st.topic, []).append(
                Req.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=st.index, current_leader_epoch=st.leader_epoch, leader_epoch=epoch
                )
            )
        if not asked:
            return
        req = Req(
            replica_id=self.manager.node_id,
            topics=[Req.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        )
        assert self.client is not None
        resp = await self.client.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, req, REQUEST_TIMEOUT_S
        )
        for t in resp.topics:
            for p in t.partitions:
                entry = asked.get((t.topic, p.partition))
                if entry is None:
                    continue
                st, asked_epoch = entry
                part = self._current(st)
                if part is None or p.error_code != ErrorCode.NONE:
                    if p.error_code:
                        log.debug(
                            "%s-%d: OffsetForLeaderEpoch answered %s",
                            st.topic,
                            st.index,
                            ErrorCode(p.error_code).name,
                        )
                    continue
                answer = (p.leader_epoch, p.end_offset)
                self._guarded(st, self._apply_epoch_answer, part, st, asked_epoch, *answer)

    def _apply_epoch_answer(
        self, part: Partition, st: FetchState, asked: int, epoch: int, end_offset: int
    ) -> None:
        lg = part.log
        leo = lg.log_end_offset
        if epoch < 0 or end_offset < 0:
            self._truncate_to(part, st, min(part.high_watermark, leo))
            st.truncating = False
            return
        mine, my_end = lg.epochs.end_offset_for(epoch, leo)
        if mine == epoch or mine < 0:
            self._truncate_to(part, st, min(end_offset, my_end if mine >= 0 else leo))
            st.truncating = False
        else:
            # the leader never had our epoch: cut back to where our older epoch ends, ask again
            self._truncate_to(part, st, min(my_end, leo))
            if lg.epochs.latest_epoch >= asked:
                st.truncating = False  # no progress possible: fetch and let the leader judge

    def _truncate_to(self, part: Partition, st: FetchState, offset: int) -> None:
        lg = part.log
        offset = max(offset, lg.log_start_offset)
        if offset < lg.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (leader %d, epoch %d)",
                st.topic,
                st.index,
                lg.log_end_offset,
                offset,
                self.leader_id,
                st.leader_epoch,
            )
            lg.truncate_to(offset)
        lg.epochs.truncate_from_end(max(offset, lg.log_end_offset))
        part.high_watermark = min(part.high_watermark, lg.log_end_offset)

    # -- fetching ---------------------------------------------------------------------------

    def _reset_session(self) -> None:
        """Start over with a full fetch (a new connection, or the leader lost our session)."""
        self._session_id = 0
        self._session_epoch = INITIAL_EPOCH
        self._in_session.clear()

    async def _fetch(self, states: list[FetchState]) -> bool:
        """One Fetch round; False when nothing could be asked or every answer was an error.

        In a fetch session (KIP-227), as Kafka's followers: the first request names every
        partition and opens the session; later ones name only the partitions whose fetch
        position changed (and forget those no longer fetched here), and the leader answers only
        for partitions with records or changed offsets. A round trip then costs what changed,
        not what is followed: the many idle partitions of __consumer_offsets and
        __transaction_state stay out of every request and answer."""
        mgr = self.manager
        topics: dict[str, list[FetchPartition]] = {}
        asked: dict[tuple[str, int], tuple[FetchState, int]] = {}
        full = self._session_id == 0
        in_session = self._in_session
        for st in states:
            part = self._current(st)
            if part is None:
                continue
            lg = part.log
            key = (st.topic, st.index)
            offset = lg.log_end_offset
            asked[key] = (st, offset)
            sent = (offset, st.leader_epoch, lg.log_start_offset)
            if not full and in_session.get(key) == sent:
                continue  # the leader's session holds this position already
            in_session[key] = sent
            topics.setdefault(st.topic, []).append(
                FetchPartition(
                    st.index,
                    st.leader_epoch,
                    offset,
                    lg.epochs.latest_epoch,
                    lg.log_start_offset,
                    mgr.fetch_max_bytes,
                )
            )
        if not asked:
            return False
        forgotten: dict[str, list[int]] = {}
        for key in [k for k in in_session if k not in asked]:
            del in_session[key]
            forgotten.setdefault(key[0], []).append(key[1])
        client = self.client
        assert client is not None
        session_id = self._session_id
        session_epoch = self._session_epoch if self._sessions else FINAL_EPOCH
        if full:
            forgotten = {}

        def encode(correlation: int) -> bytes:
            return encode_fetch_v12(
                correlation,
                client.client_id,
                replica_id=mgr.node_id,
                max_wait_ms=mgr.fetch_wait_ms,
                min_bytes=1,
                max_bytes=RESPONSE_MAX_BYTES,
                session_id=session_id,
                session_epoch=session_epoch,
                topics=topics,
                forgotten=forgotten,
            )

        timeout = mgr.fetch_wait_ms / 1000 + REQUEST_TIMEOUT_S
        try:
            frame = await client.request_encoded(encode, timeout)
            resp = parse_fetch_v12(frame)
        except PeerError:
            self._reset_session()
            raise
        except MalformedResponse as exc:
            self._reset_session()
            raise PeerError(f"undecodable fetch response: {exc}") from None
        if not mgr.can_reach(self.leader_id):
            # the link was cut while the fetch was out (a long poll): its answer is dropped,
            # as a network partition would drop it
            self._disconnect()
            return False
        if resp.error_code:
            code = resp.error_code
            log.debug("fetch from %d failed: %s", self.leader_id, ErrorCode(code).name)
            self._reset_session()
            # a lost session is not the leader's trouble: ask again at once, in full
            return code in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            )
        if self._sessions and resp.session_id:
            if full:
                self._session_id = resp.session_id
            self._session_epoch = self._session_epoch + 1 if self._session_epoch < 0x7FFFFFFF else 1
        elif full:
            self._sessions = False  # a leader without sessions: full fetches, none opened
            in_session.clear()
        progressed = not resp.partitions  # nothing changed anywhere: not an error
        for p in resp.partitions:
            entry = asked.get((p.topic, p.partition))
            if entry is None:
                continue
            st, offset = entry
            part = self._current(st)
            if part is None:
                continue
            applied = self._guarded(st, self._apply_fetched, part, st, offset, p)
            progressed = bool(applied) or progressed
        return progressed

    def _apply_fetched(
        self,
        part: Partition,
        st: FetchState,
        offset: int,
        p: PartitionAnswer,
    ) -> bool:
        """Append one partition's answer (no await inside: one writer)."""
        lg = part.log
        code = p.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if 0 <= offset < p.log_start_offset:
                log.info(
                    "%s-%d: behind the leader's log start %d: starting over there",
                    st.topic,
                    st.index,
                    p.log_start_offset,
                )
                lg.truncate_fully_and_start_at(p.log_start_offset)
                part.high_watermark = p.log_start_offset
            else:
                st.truncating = True  # ahead of the leader: find where we diverged
            return False
        if code != ErrorCode.NONE:
            if code in (
                ErrorCode.FENCED_LEADER_EPOCH,
                ErrorCode.UNKNOWN_LEADER_EPOCH,
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ):
                log.debug(
                    "%s-%d: leader %d answered %s",
                    st.topic,
                    st.index,
                    self.leader_id,
                    ErrorCode(code).name,
                )
            else:
                log.warning(
                    "%s-%d: leader %d answered %s",
                    st.topic,
                    st.index,
                    self.leader_id,
                    ErrorCode(code).name,
                )
            return False
        if lg.log_end_offset != offset:
            return True  # truncated meanwhile: the next round asks again
        data = p.records
        if data is not None and len(data):
            used, batches = whole_batches(data)
            batches = [(pos, h) for pos, h in batches if h.last_offset >= offset]
            if batches:
                start = batches[0][0]
                if batches[0][1].base_offset != offset:
                    log.warning(
                        "%s-%d: leader sent offset %d for fetch offset %d",
                        st.topic,
                        st.index,
                        batches[0][1].base_offset,
                        offset,
                    )
                    st.truncating = True
                    return False
                buf = data[start:used]
                lg.append_as_follower(buf, [(pos - start, h) for pos, h in batches])
        leader_start = p.log_start_offset
        if lg.log_start_offset < leader_start <= lg.log_end_offset:
            lg.advance_log_start(leader_start)  # follow DeleteRecords and retention
        part.high_watermark = min(p.high_watermark, lg.log_end_offset)
        part.wake()
        return True
