"""`__share_group_state` records in Kafka's layout (share-coordinator's JSON definitions).

    ShareSnapshotKey  version 0: GroupId string, TopicId uuid, Partition int32
    ShareUpdateKey    version 1: the same fields
    ShareSnapshotValue version 0 (flexible): SnapshotEpoch uint16, StateEpoch int32,
        LeaderEpoch int32, StartOffset int64, CreateTimestamp int64, WriteTimestamp int64
        (both since Kafka 4.1, KAFKA-18170), StateBatches [FirstOffset int64, LastOffset int64,
        DeliveryState int8, DeliveryCount int16]
    ShareUpdateValue version 0 (flexible): SnapshotEpoch uint16, LeaderEpoch int32,
        StartOffset int64 (-1: unchanged), StateBatches as above

A key's version is its record type. A snapshot replaces the share-partition's state; an update
applies its state batches over the last snapshot (and its start offset when not -1). The record
for a share-partition lives in partition `abs(hash("group:topicId:partition")) % partitions`
(Kafka's SharePartitionKey.asCoordinatorKey, the topic id in Kafka's base64 form).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

from odradek.coordinator.codec import Reader, Writer
from odradek.coordinator.share.state import StateBatch

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1


@dataclass(slots=True, frozen=True)
class ShareKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    is_update: bool = False


@dataclass(slots=True, frozen=True)
class ShareValue:
    snapshot_epoch: int
    state_epoch: int  # -1 in an update (the field is a snapshot's only)
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = -1  # a snapshot's only, as state_epoch
    write_timestamp: int = -1


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def encode_key(key: ShareKey) -> bytes:
    w = Writer()
    w.i16(UPDATE_KEY_VERSION if key.is_update else SNAPSHOT_KEY_VERSION)
    w.string(key.group_id)
    w.out += key.topic_id.bytes
    w.i32(key.partition)
    return bytes(w.out)


def decode_key(data: bytes) -> ShareKey | None:
    """The key, or None for a record type other than a share snapshot or update."""
    r = Reader(data)
    version = r.i16()
    if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        return None
    group = r.req_string()
    topic_id = uuid.UUID(bytes=bytes(r.take(16)))
    return ShareKey(group, topic_id, r.i32(), version == UPDATE_KEY_VERSION)


def encode_value(value: ShareValue, is_update: bool = False) -> bytes:
    w = Writer(flexible=True)
    w.i16(0)  # value version
    w.out += value.snapshot_epoch.to_bytes(2, "big")
    if not is_update:
        w.i32(value.state_epoch)
    w.i32(value.leader_epoch)
    w.i64(value.start_offset)
    if not is_update:
        w.i64(value.create_timestamp)
        w.i64(value.write_timestamp)
    w.array_len(len(value.batches))
    for b in value.batches:
        w.i64(b.first_offset)
        w.i64(b.last_offset)
        w.i8(b.delivery_state)
        w.i16(b.delivery_count)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_value(data: bytes, is_update: bool = False) -> ShareValue:
    r = Reader(data, flexible=True)
    r.i16()  # value version 0
    snapshot_epoch = int.from_bytes(bytes(r.take(2)), "big")
    state_epoch = -1 if is_update else r.i32()
    leader_epoch = r.i32()
    start = r.i64()
    created = written = -1
    if not is_update:
        created, written = r.i64(), r.i64()
    batches = []
    for _ in range(r.array_len()):
        first, last, state, count = r.i64(), r.i64(), r.i8(), r.i16()
        r.tags()
        batches.append(StateBatch(first, last, state, count))
    r.tags()
    return ShareValue(
        snapshot_epoch, state_epoch, leader_epoch, start, tuple(batches), created, written
    )
