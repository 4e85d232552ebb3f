"""Loading a group coordinator partition: replaying `__consumer_offsets` records in order.

As Kafka's GroupMetadataManager.doLoadGroupsAndOffsets: offset commits and their tombstones are
applied as they come; a GroupMetadataValue makes its group Stable (with members, which keep their
sessions) or Empty; a group tombstone forgets the membership but not the offsets (they have their
own tombstones), and a group left with neither is dropped. Offsets in transactional batches stay
pending until their producer's COMMIT (applied) or ABORT (dropped) marker; those still open at the
end stay pending, so `require_stable` fetches keep answering UNSTABLE_OFFSET_COMMIT.

Loading never stops on bad data: a batch that cannot be decoded (bad framing, a compressed
section over the decompression bound) and a record whose key or value does not follow the
schema are each logged once and skipped, and the rest of the partition loads (Kafka's loader
skips records it cannot read rather than failing the partition).
"""

from __future__ import annotations

import logging
import struct

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group import records as rec
from odradek.coordinator.group import streams_records as srec
from odradek.coordinator.group.consumer_group import ConsumerGroupManager
from odradek.coordinator.group.metadata import ClassicGroup, OffsetAndMetadata
from odradek.coordinator.group.offsets import OffsetManager
from odradek.coordinator.group.state import GroupStateMachine
from odradek.coordinator.group.streams_group import StreamsGroupManager
from odradek.log.log import Log
from odradek.wire.batch import BatchHeader
from odradek.wire.records import COMMIT, Record, end_txn_marker

log = logging.getLogger(__name__)

# what decoding a stored record's key or value raises on bad bytes (RecordFormatError is a
# ValueError); undecodable batches are skipped by `Log.records`
DECODE_ERRORS = (ValueError, struct.error)


class _Replay:
    def __init__(
        self,
        machine: GroupStateMachine,
        offsets: OffsetManager,
        name: str,
        consumer: ConsumerGroupManager | None = None,
        streams: StreamsGroupManager | None = None,
    ) -> None:
        self.consumer = consumer
        self.streams = streams
        self.streams_groups: set[str] = set()
        self.consumer_groups: set[str] = set()
        self.machine = machine
        self.offsets = offsets
        self.name = name
        self.touched: set[str] = set()
        self.tombstoned: set[str] = set()
        self.txn_groups: dict[int, set[str]] = {}
        self.count = 0

    def batch(self, header: BatchHeader, records: list[Record]) -> None:
        if header.is_control:
            marker = end_txn_marker(records)
            commit = marker is not None and marker[0] == COMMIT
            for group_id in self.txn_groups.pop(header.producer_id, set()):
                self.offsets.complete_txn(group_id, header.producer_id, commit)
            return
        for r in records:
            if r.key is None:
                continue
            try:
                self.record(header, r)
            except DECODE_ERRORS as exc:
                log.warning(
                    "%s: skipping unreadable record at offset %d: %s", self.name, r.offset, exc
                )

    def record(self, header: BatchHeader, r: Record) -> None:
        key = rec.decode_key(bytes(r.key or b""))
        if key is None:
            ckey = crec.decode_key(bytes(r.key or b"")) if self.consumer is not None else None
            if ckey is not None and self.consumer is not None:  # a KIP-848 consumer group
                self.count += 1
                self.consumer_groups.add(ckey.group_id)
                self.consumer.replay_record(ckey, None if r.value is None else bytes(r.value))
                return
            skey = srec.decode_key(bytes(r.key or b"")) if self.streams is not None else None
            if skey is not None and self.streams is not None:  # a KIP-1071 streams group
                self.count += 1
                self.streams_groups.add(skey.group_id)
                self.streams.replay_record(skey, None if r.value is None else bytes(r.value))
            return
        self.touched.add(key.group)
        self.count += 1
        if isinstance(key, rec.OffsetKey):
            value = None if r.value is None else rec.decode_offset_value(r.value)
            if header.is_transactional and value is not None:
                om = OffsetAndMetadata(
                    value.offset,
                    value.leader_epoch,
                    value.metadata,
                    value.commit_timestamp,
                    value.expire_timestamp,
                )
                self.offsets.stage_txn_offsets(
                    key.group, header.producer_id, {(key.topic, key.partition): om}
                )
                self.txn_groups.setdefault(header.producer_id, set()).add(key.group)
            else:
                self.offsets.apply_offset(key, value)
        elif r.value is None:
            self.tombstoned.add(key.group)
            self.forget_metadata(key.group)
        else:
            self.tombstoned.discard(key.group)
            self.machine.load_group(key.group, rec.decode_group_value(r.value))

    def forget_metadata(self, group_id: str) -> None:
        """A group tombstone: keep the group's offsets as a simple Empty group."""
        group = self.machine.get(group_id)
        if group is None:
            return
        fresh = ClassicGroup(group_id, group.state_timestamp)
        fresh.offsets = group.offsets
        fresh.pending_txn_offsets = group.pending_txn_offsets
        self.machine.groups[group_id] = fresh


def replay(
    machine: GroupStateMachine,
    offsets: OffsetManager,
    log_: Log,
    max_offset: int,
    name: str,
    consumer: ConsumerGroupManager | None = None,
    streams: StreamsGroupManager | None = None,
) -> tuple[int, int]:
    """Apply a partition's records to the coordinator; returns (records, groups loaded)."""
    before = set(machine.groups)
    state = _Replay(machine, offsets, name, consumer, streams)
    for header, records in log_.records(None, max_offset, name):
        state.batch(header, records)
    loaded = 0
    for group_id in state.touched - before:
        group = machine.get(group_id)
        if group is None:
            continue
        if group_id in state.tombstoned and not group.has_offsets():
            machine.drop(group)
            continue
        machine.on_group_loaded(group)
        loaded += 1
    if consumer is not None and state.consumer_groups:
        consumer.on_loaded(state.consumer_groups)
        loaded += sum(1 for g in state.consumer_groups if consumer.get(g) is not None)
    if streams is not None and state.streams_groups:
        streams.on_loaded(state.streams_groups)
        loaded += sum(1 for g in state.streams_groups if streams.get(g) is not None)
    return state.count, loaded
