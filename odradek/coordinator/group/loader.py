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
from collections.abc import Iterator
from typing import Any

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.metadata import ClassicGroup, OffsetAndMetadata
from odradek.coordinator.group.offsets import OffsetManager
from odradek.coordinator.group.state import GroupStateMachine
from odradek.wire.batch import BatchHeader
from odradek.wire.compression import max_decompressed_size
from odradek.wire.records import COMMIT, Record, decode_records

log = logging.getLogger(__name__)

# what decoding a stored batch or record raises on bad bytes (CorruptRecordError and
# RecordFormatError are ValueErrors)
DECODE_ERRORS = (ValueError, struct.error)


def batches(log_: Any, max_offset: int) -> Iterator[tuple[int, bytes]]:
    """(base offset, bytes) of every batch of a log below `max_offset` (its end), in order."""
    for seg in list(log_.segments):
        for bp in seg.batches_from(0):
            if bp.base_offset >= max_offset:
                return
            yield bp.base_offset, seg.read_bytes(bp.position, bp.size)


def decoded_batches(
    log_: Any, max_offset: int, name: str
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every decodable batch below `max_offset`; an undecodable one is logged and skipped."""
    bound = max_decompressed_size(log_.config.max_message_bytes)
    for base_offset, data in batches(log_, max_offset):
        try:
            yield decode_records(data, max_size=bound)
        except DECODE_ERRORS as exc:
            log.warning(
                "%s: skipping undecodable batch at offset %d (%d bytes): %s",
                name,
                base_offset,
                len(data),
                exc,
            )


def _control_type(records: list[Record]) -> int | None:
    if not records or records[0].key is None or len(records[0].key) < 4:
        return None
    return int.from_bytes(records[0].key[2:4], "big", signed=True)


class _Replay:
    def __init__(self, machine: GroupStateMachine, offsets: OffsetManager, name: str) -> None:
        self.machine = machine
        self.offsets = offsets
        self.name = name
        self.touched: set[str] = set()
        self.tombstoned: set[str] = set()
        self.txn_groups: dict[int, set[str]] = {}
        self.count = 0

    def batch(self, header: BatchHeader, records: list[Record]) -> None:
        if header.is_control:
            commit = _control_type(records) == COMMIT
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
    machine: GroupStateMachine, offsets: OffsetManager, log_: Any, max_offset: int, name: str
) -> tuple[int, int]:
    """Apply a partition's records to the coordinator; returns (records, groups loaded)."""
    before = set(machine.groups)
    state = _Replay(machine, offsets, name)
    for header, records in decoded_batches(log_, max_offset, name):
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
    return state.count, loaded
