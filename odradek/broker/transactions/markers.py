"""Writing transaction markers into partitions (KIP-98): locally, or to their leaders elsewhere.

The transaction coordinator ends a transaction by appending one COMMIT or ABORT control batch to
every partition of it: directly for partitions this broker leads, with WriteTxnMarkers for the
others (Kafka's TransactionMarkerChannelManager). As Kafka's ProducerAppendInfo
.appendEndTxnMarker, a marker older than what the partition has seen is refused: a producer
epoch below the partition's (INVALID_PRODUCER_EPOCH) or a coordinator epoch below the one of the
last marker (TRANSACTION_COORDINATOR_FENCED). A written marker ends the producer's transaction in
the partition (its LSO moves on), an abort is indexed in the `.txnindex`, waiting read_committed
fetches are woken; a marker counts once replicated (acks=all), and one in `__consumer_offsets`
then settles the group's transactional offsets.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.broker.partitions.partition import AppendResult
from odradek.broker.replication.client import PeerError
from odradek.broker.replication.peers import NoEndpoint, PeerPool
from odradek.clock import now_ms
from odradek.log.disk_faults import KafkaStorageError
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.batch import parse_header
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_control_batch

if TYPE_CHECKING:
    from odradek.broker.partitions.partition import Partition
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
MARKER_TIMEOUT_MS = 10000
TopicPartition = tuple[str, int]


def append_marker(
    part: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
) -> ErrorCode:
    """Append a marker to a partition led here (no await inside: one writer)."""
    if part.log.offline:  # its log dir failed
        return ErrorCode.KAFKA_STORAGE_ERROR
    if not part.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    lg = part.log
    entry = lg.producer_state.producers.get(producer_id)
    if entry is not None:
        if producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
    buf = bytearray(
        build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms())
    )
    try:
        lg.append_control(
            buf, parse_header(buf), part.leader_epoch, coordinator_epoch, aborted=not commit
        )
    except KafkaStorageError:
        return ErrorCode.KAFKA_STORAGE_ERROR
    part.on_appended()
    return ErrorCode.NONE


async def write_local_markers(
    broker: Broker,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    partitions: list[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """Markers for partitions of this broker, each answered once replicated (acks=all)."""
    results: dict[TopicPartition, AppendResult] = {}
    waits = []
    for topic, index in partitions:
        part = broker.topics.get(topic, index)
        if part is None:
            info = broker.topics.info(topic)
            known = info is not None and 0 <= index < len(info.partitions)
            error = (
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            results[(topic, index)] = AppendResult(error)
            continue
        error = append_marker(part, producer_id, producer_epoch, coordinator_epoch, commit)
        results[(topic, index)] = AppendResult(error)
        if error == ErrorCode.NONE:
            waits.append((part, results[(topic, index)]))
        else:
            log.info(
                "%s marker for producer %d (epoch %d) on %s-%d refused: %s",
                "commit" if commit else "abort",
                producer_id,
                producer_epoch,
                topic,
                index,
                error.name,
            )
    if waits:
        await broker.replicas.wait_for_acks(waits, MARKER_TIMEOUT_MS)
    groups = broker.group_coordinator
    out = {}
    for (topic, index), result in results.items():
        out[(topic, index)] = ErrorCode(result.error)
        if topic == OFFSETS_TOPIC and result.error == ErrorCode.NONE and groups is not None:
            groups.on_txn_marker(index, producer_id, commit)
    return out


class MarkerSender:
    """Writes markers wherever the partitions' leaders are: locally, or with WriteTxnMarkers
    v1 over one connection per peer broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.peers = PeerPool(broker, "txn-markers")

    def _leader(self, topic: str, index: int) -> int | None:
        info = self.broker.topics.info(topic)
        if info is None or not 0 <= index < len(info.partitions):
            return None
        return info.partitions[index].leader

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        by_leader: dict[int, list[TopicPartition]] = {}
        out: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            leader = self._leader(*tp)
            if leader is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif leader < 0:
                out[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(leader, []).append(tp)
        args = (producer_id, producer_epoch, coordinator_epoch, commit)
        for leader, tps in by_leader.items():
            if leader == self.broker.node_id:
                out.update(await write_local_markers(self.broker, *args, tps))
            else:
                out.update(await self._remote(leader, *args, tps))
        return out

    async def _remote(
        self,
        node: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        Req = protocol.WriteTxnMarkersRequest
        Marker = Req.WritableTxnMarker
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = Req(
            markers=[
                Marker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=commit,
                    topics=[
                        Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )
        timeout_s = MARKER_TIMEOUT_MS / 1000 + 5
        try:
            resp = await self.peers.request(node, ApiKey.WRITE_TXN_MARKERS, 1, request, timeout_s)
        except NoEndpoint:
            return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        except PeerError as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", node, exc)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        out = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in resp.markers:
            for t in result.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    def close(self) -> None:
        self.peers.close()
