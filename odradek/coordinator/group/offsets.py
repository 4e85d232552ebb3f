"""Committed offsets, as Kafka's OffsetMetadataManager: OffsetCommit, OffsetFetch, OffsetDelete,
DeleteGroups and the expiry of old offsets (offsets.retention.minutes, KIP-211).

Every change is written as `__consumer_offsets` records first and applied to memory only once the
append succeeded, with `apply_offset` - the same function that replays the log at load time.
An OffsetCommit goes further, as Kafka's GroupMetadataManager.storeOffsets: once appended it is
only pending (`ClassicGroup.pending_offset_commits`, Kafka's prepareOffsetCommit) and becomes
visible to OffsetFetch when the broker knows the ISR holds it (`complete_commit` with NONE,
Kafka's onOffsetCommitAppend); if the wait fails it is dropped (failPendingOffsetWrite). A
client thus never sees an offset that a new leader of the offsets partition may not have.
Offsets of a transaction (TxnOffsetCommit, KIP-98) stay pending until its marker: `require_stable`
fetches (KIP-447) answer UNSTABLE_OFFSET_COMMIT for them.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.metadata import (
    ClassicGroup,
    GroupState,
    OffsetAndMetadata,
)
from odradek.coordinator.group.state import GroupStateMachine, Record
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_MAX_METADATA_SIZE = 4096  # offset.metadata.max.bytes


@dataclass(slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True, frozen=True)
class OffsetConfig:
    retention_ms: int = 7 * 24 * 3600 * 1000
    max_metadata_size: int = DEFAULT_MAX_METADATA_SIZE


@dataclass(slots=True, frozen=True, eq=False)
class PendingCommit:
    """An OffsetCommit appended to the log, waiting for the ISR: `OffsetManager.complete_commit`
    applies or drops it. It holds the group object itself, as Kafka's append callback does: if
    the group is unloaded meanwhile, completing it touches nothing a reload rebuilt."""

    group: ClassicGroup
    seq: int
    offsets: dict[TopicPartition, OffsetAndMetadata]


class OffsetManager:
    def __init__(self, machine: GroupStateMachine, config: OffsetConfig) -> None:
        self.machine = machine
        self.config = config
        self._append_seq = itertools.count()

    # -- applying records (runtime and load) --------------------------------------------------

    def apply_offset(self, key: rec.OffsetKey, value: rec.OffsetValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            group = self.machine.get(key.group)
            if group is not None:
                group.offsets.pop(tp, None)
                # as Kafka's removeOffsets: a commit still waiting for the ISR is dropped too
                group.pending_offset_commits.pop(tp, None)
                group.offset_append_seq.pop(tp, None)
            return
        group = self.machine.get_or_create(key.group)
        group.offsets[tp] = OffsetAndMetadata(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp,
        )

    @staticmethod
    def offset_record(group_id: str, tp: TopicPartition, om: OffsetAndMetadata) -> Record:
        value = rec.OffsetValue(
            om.offset, om.metadata, om.commit_timestamp, om.leader_epoch, om.expire_timestamp
        )
        return rec.offset_key(group_id, tp[0], tp[1]), rec.offset_value(value)

    @staticmethod
    def offset_tombstone(group_id: str, tp: TopicPartition) -> Record:
        return rec.offset_key(group_id, tp[0], tp[1]), None

    def _append_and_apply(self, group_id: str, records: list[Record]) -> ErrorCode:
        error = self.machine.append(group_id, records)
        if error == ErrorCode.NONE:
            for key, value in records:
                decoded = rec.decode_key(key)
                if isinstance(decoded, rec.OffsetKey):
                    self.apply_offset(
                        decoded, None if value is None else rec.decode_offset_value(value)
                    )
        return error

    # -- OffsetCommit -------------------------------------------------------------------------

    def _validate_commit(
        self, group: ClassicGroup, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # admin client or a consumer without group management (assign())
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self.machine.validate_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def prepare_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int,
    ) -> tuple[dict[TopicPartition, ErrorCode], PendingCommit | None]:
        """Validate and append an OffsetCommit; what was appended stays pending (invisible to
        OffsetFetch, UNSTABLE_OFFSET_COMMIT to require_stable ones) until `complete_commit`."""
        machine = self.machine
        group = machine.get(group_id)
        if group is None:
            if generation_id >= 0:
                unknown = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if api_version >= 9
                    else ErrorCode.ILLEGAL_GENERATION
                )
                return dict.fromkeys(offsets, unknown), None
            log.info("creating simple consumer group %s through a manual offset commit", group_id)
            group = machine.get_or_create(group_id)
        error = self._validate_commit(group, generation_id, member_id, instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error), None
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            machine.touch(group, member_id)
        results: dict[TopicPartition, ErrorCode] = {}
        written: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.max_metadata_size
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata.encode("utf-8")) > limit:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                written[tp] = om
                results[tp] = ErrorCode.NONE
        if not written:
            return results, None
        records = [self.offset_record(group_id, tp, om) for tp, om in written.items()]
        error = machine.append(group_id, records)
        if error != ErrorCode.NONE:
            results.update(dict.fromkeys(written, error))
            return results, None
        group.pending_offset_commits.update(written)
        return results, PendingCommit(group, next(self._append_seq), written)

    def complete_commit(self, pending: PendingCommit, error: ErrorCode) -> None:
        """The ISR's answer for a prepared commit: NONE materialises it (Kafka's
        onOffsetCommitAppend), anything else drops it (failPendingOffsetWrite). Offsets removed
        meanwhile (OffsetDelete, expiry) stay removed; an older commit finishing after a newer
        one was applied does not overwrite it."""
        group = pending.group
        if group.is_(GroupState.DEAD):
            return
        for tp, om in pending.offsets.items():
            staged = group.pending_offset_commits.get(tp)
            if error == ErrorCode.NONE and staged is not None:
                if tp not in group.offsets or group.offset_append_seq.get(tp, -1) < pending.seq:
                    group.offsets[tp] = om
                    group.offset_append_seq[tp] = pending.seq
            if staged is om:
                del group.pending_offset_commits[tp]

    # -- transactional offsets (TxnOffsetCommit, markers) -------------------------------------

    def stage_txn_offsets(
        self, group_id: str, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Offsets written in a transaction: visible only once its COMMIT marker is applied."""
        group = self.machine.get_or_create(group_id)
        group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def complete_txn(self, group_id: str, producer_id: int, commit: bool) -> None:
        group = self.machine.get(group_id)
        if group is None:
            return
        pending = group.pending_txn_offsets.pop(producer_id, None)
        if pending and commit:
            group.offsets.update(pending)
            # the marker follows every commit appended before it: none of those may overwrite
            seq = next(self._append_seq)
            group.offset_append_seq.update(dict.fromkeys(pending, seq))

    # -- OffsetFetch --------------------------------------------------------------------------

    def fetch(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool
    ) -> list[FetchedOffset]:
        group = self.machine.get(group_id)
        if partitions is None:
            if group is None:
                return []
            return [self._fetched(group, tp, require_stable) for tp in sorted(group.offsets)]
        if group is None:
            return [FetchedOffset(t, p) for t, p in partitions]
        return [self._fetched(group, tp, require_stable) for tp in partitions]

    @staticmethod
    def _fetched(group: ClassicGroup, tp: TopicPartition, require_stable: bool) -> FetchedOffset:
        if require_stable and group.has_pending_offsets(tp):
            return FetchedOffset(tp[0], tp[1], error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        om = group.offsets.get(tp)
        if om is None:
            return FetchedOffset(tp[0], tp[1])
        return FetchedOffset(tp[0], tp[1], om.offset, om.leader_epoch, om.metadata)

    # -- OffsetDelete (KIP-496) ---------------------------------------------------------------

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        group = self.machine.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group():
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            tombstones = [
                self.offset_tombstone(group_id, tp)
                for tp in eligible
                if tp in group.offsets or tp in group.pending_offset_commits
            ]
            error = self._append_and_apply(group_id, tombstones) if tombstones else ErrorCode.NONE
            for tp in eligible:
                errors[tp] = error
            log.info("deleted offsets of group %s: %s", group_id, eligible)
        return ErrorCode.NONE, errors

    # -- DeleteGroups -------------------------------------------------------------------------

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.machine.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        written = set(group.offsets) | set(group.pending_offset_commits)
        records = [self.offset_tombstone(group_id, tp) for tp in sorted(written)]
        records.append((rec.group_key(group_id), None))
        error = self._append_and_apply(group_id, records)
        if error != ErrorCode.NONE:
            return error
        self.machine.drop(group)
        log.info("deleted group %s and %d offsets", group_id, len(records) - 1)
        return ErrorCode.NONE

    # -- expiry -------------------------------------------------------------------------------

    def expired_offsets(self, group: ClassicGroup, now: int) -> list[TopicPartition]:
        """Kafka's GroupMetadata.removeExpiredOffsets rules."""
        retention = self.config.retention_ms

        def expired(om: OffsetAndMetadata, base: int) -> bool:
            if om.expire_timestamp >= 0:
                return now >= om.expire_timestamp
            return now - base >= retention

        out = []
        if group.protocol_type is not None and group.is_(GroupState.EMPTY):
            for tp, om in group.offsets.items():
                if not group.has_pending_offsets(tp) and expired(om, group.state_timestamp):
                    out.append(tp)
        elif (
            group.is_consumer_group()
            and group.subscribed is not None
            and group.is_(GroupState.STABLE)
        ):
            for tp, om in group.offsets.items():
                if (
                    tp[0] not in group.subscribed
                    and not group.has_pending_offsets(tp)
                    and expired(om, om.commit_timestamp)
                ):
                    out.append(tp)
        elif group.protocol_type is None:
            for tp, om in group.offsets.items():
                if not group.has_pending_offsets(tp) and expired(om, om.commit_timestamp):
                    out.append(tp)
        return out

    def cleanup(self, groups: list[ClassicGroup], now: int) -> int:
        """Expire offsets; an Empty group left without offsets is removed (a tombstone)."""
        removed = 0
        for group in groups:
            if group.is_(GroupState.DEAD):
                continue
            expired = self.expired_offsets(group, now)
            records = [self.offset_tombstone(group.group_id, tp) for tp in expired]
            dead = (
                group.is_(GroupState.EMPTY)
                and not group.pending_members
                and not (set(group.offsets) - set(expired))
                and not group.pending_offset_commits
                and not group.pending_txn_offsets
            )
            if dead:
                records.append((rec.group_key(group.group_id), None))
            if not records:
                continue
            if self._append_and_apply(group.group_id, records) != ErrorCode.NONE:
                continue
            removed += len(expired)
            if dead:
                self.machine.drop(group)
                log.info("group %s has no members and no offsets left: removed", group.group_id)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed
