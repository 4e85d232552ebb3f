"""OffsetCommit pending until replicated, as Kafka's GroupMetadata.pendingOffsetCommits (issue 11,
chaos finding seed 125): `prepare_offset_commit` appends, `complete_offset_commit` gets the ISR
wait's outcome; only NONE makes the offset visible to OffsetFetch."""

from __future__ import annotations

import asyncio

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.metadata import OffsetAndMetadata
from odradek.wire.errors import ErrorCode
from tests.coordinator.test_group_coordinator import PARTITIONS, World, _start, run

TP = ("t", 0)


def prepare(coord, offset: int, group: str = "g"):
    errors, pending = coord.prepare_offset_commit(
        group, "", None, -1, {TP: OffsetAndMetadata(offset, -1, "", 1000)}, 8
    )
    assert errors == {TP: ErrorCode.NONE}
    assert pending is not None
    return pending


def fetched(coord, require_stable: bool = False, group: str = "g") -> tuple[int, int]:
    error, (f,) = coord.fetch_offsets(group, [TP], require_stable)
    assert error == ErrorCode.NONE
    return f.error, f.offset


def test_a_commit_is_visible_only_once_replicated(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        coord.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(20, -1, "", 1000)}, 8)
        assert fetched(coord) == (ErrorCode.NONE, 20)

        pending = prepare(coord, 23)
        assert fetched(coord) == (ErrorCode.NONE, 20)  # before the fix: 23
        assert fetched(coord, require_stable=True)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        coord.complete_offset_commit(pending, ErrorCode.NONE)
        assert fetched(coord) == (ErrorCode.NONE, 23)
        assert fetched(coord, require_stable=True) == (ErrorCode.NONE, 23)

        # the wait failed (timed out, leadership lost): dropped, the previous offset stays
        pending = prepare(coord, 30)
        coord.complete_offset_commit(pending, ErrorCode.NOT_COORDINATOR)
        assert fetched(coord) == (ErrorCode.NONE, 23)
        assert fetched(coord, require_stable=True) == (ErrorCode.NONE, 23)
        assert not coord.machine.get("g").pending_offset_commits
        await coord.stop()

    run(go())


def test_an_older_commit_completing_late_does_not_overwrite_a_newer_one(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        older, newer = prepare(coord, 5), prepare(coord, 6)
        coord.complete_offset_commit(newer, ErrorCode.NONE)
        assert fetched(coord, require_stable=True) == (ErrorCode.NONE, 6)
        coord.complete_offset_commit(older, ErrorCode.NONE)
        assert fetched(coord) == (ErrorCode.NONE, 6)

        # in order, the older one is visible until the newer one completes
        older, newer = prepare(coord, 7), prepare(coord, 8)
        coord.complete_offset_commit(older, ErrorCode.NONE)
        assert fetched(coord) == (ErrorCode.NONE, 7)
        assert fetched(coord, require_stable=True)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        coord.complete_offset_commit(newer, ErrorCode.NONE)
        assert fetched(coord, require_stable=True) == (ErrorCode.NONE, 8)
        await coord.stop()

    run(go())


def test_offsets_deleted_while_a_commit_is_pending_stay_deleted(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        pending = prepare(coord, 9)
        top, errors = coord.delete_offsets("g", [TP])
        assert (top, errors) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
        coord.complete_offset_commit(pending, ErrorCode.NONE)
        assert fetched(coord, require_stable=True) == (ErrorCode.NONE, -1)
        await coord.stop()

    run(go())
    coord = world.reopen()

    async def after_restart():
        await _start(coord)
        # the commit's record was tombstoned as well
        assert coord.fetch_offsets("g", [TP], False)[1][0].offset == -1
        await coord.stop()

    run(after_restart())


def test_a_pending_commit_keeps_its_group_and_ignores_a_reloaded_one(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        pending = prepare(coord, 11)
        world.clock.advance(30 * 24 * 3600 * 1000)
        coord.expire_offsets()
        assert coord.machine.get("g") is not None  # not an offset-less Empty group
        # the coordinator resigns and leads again: the new group comes from the log
        index = rec.partition_for("g", PARTITIONS)
        coord.on_resignation(index)
        coord.on_election(index)
        while coord.loading:
            await asyncio.sleep(0)
        reloaded = coord.machine.get("g")
        assert reloaded is not None and reloaded is not pending.group
        assert fetched(coord) == (ErrorCode.NONE, 11)
        pending_again = prepare(coord, 12)
        coord.complete_offset_commit(pending, ErrorCode.NONE)  # the old group's: no effect
        assert fetched(coord) == (ErrorCode.NONE, 11)
        assert reloaded.pending_offset_commits == {TP: pending_again.offsets[TP]}
        await coord.stop()

    run(go())
