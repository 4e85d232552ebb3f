"""Loading a group coordinator partition: replaying `__consumer_offsets` records in order.

As Kafka's GroupMetadataManager.doLoadGroupsAndOffsets: offset commits and their tombstones are
applied as they come; a GroupMetadataValue makes its group Stable (with members, which keep their
sessions) or Empty; a group tombstone forgets the membership but not the offsets (they have their
own tombstones), and a group left with neither is dropped. Offsets in transactional batches stay
pending until their producer's COMMIT (applied) or ABORT (dropped) marker; those still open at the
end stay pending, so `require_stable` fetches keep answering UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.metadata import ClassicGroup, OffsetAndMetadata
from odradek.coordinator.group.offsets import OffsetManager
from odradek.coordinator.group.state import GroupStateMachine
from odradek.wire.batch import BatchHeader
from odradek.wire.records import COMMIT, Record, decode_records

log = logging.getLogger(__name__)


def batches(log_: Any, max_offset: int) -> Iterator[bytes]:
    """The bytes of every batch of a log below `max_offset` (its end), in order."""
    for seg in list(log_.segments):
        for bp in seg.batches_from(0):
            if bp.base_offset >= max_offset:
                return
            yield seg.read_bytes(bp.position, bp.size)


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
            except rec.RecordFormatError as exc:
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
    for data in batches(log_, max_offset):
        header, records = decode_records(data)
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
