"""The coordinator service over real logs (no sockets): records are appended, then replayed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.assignment import encode_subscription
from odradek.coordinator.group.coordinator import GroupCoordinator, GroupCoordinatorConfig
from odradek.coordinator.group.metadata import GroupState, OffsetAndMetadata
from odradek.coordinator.group.state import GroupConfig, LeaveMember
from odradek.coordinator.group.timers import ManualScheduler
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.wire.batch import iter_batches
from odradek.wire.errors import ErrorCode
from odradek.wire.records import build_batch, build_control_batch, decode_records

PARTITIONS = 3
SUB = encode_subscription(["t"])


@dataclass
class Result:
    error: ErrorCode


class FakePartition:
    """What the coordinator needs of a partition: a real log, leadership, the HW, appends."""

    def __init__(self, directory: str, index: int) -> None:
        self.topic = "__consumer_offsets"
        self.index = index
        self.log = Log(directory, self.topic, index, LogConfig(cleanup_policy="compact"))
        self.is_leader = True
        self.fail = False

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    def append_internal(self, batch: bytes) -> Result:
        if self.fail:
            return Result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        buf = bytearray(batch)
        self.log.append_as_leader(buf, list(iter_batches(buf)), 0, False)
        return Result(ErrorCode.NONE)

    def records(self):
        out = []
        for seg in self.log.segments:
            for bp in seg.batches_from(0):
                _h, recs = decode_records(seg.read_bytes(bp.position, bp.size))
                out += recs
        return out


class World:
    def __init__(self, tmp_path) -> None:
        self.tmp = tmp_path
        self.parts = {
            i: FakePartition(str(tmp_path / f"__consumer_offsets-{i}"), i)
            for i in range(PARTITIONS)
        }
        self.clock = ManualScheduler()
        self.coord = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        cfg = GroupCoordinatorConfig(
            num_partitions=PARTITIONS, group=GroupConfig(initial_rebalance_delay_ms=0)
        )
        return GroupCoordinator(
            cfg,
            get_partition=self.parts.get,
            partition_count=lambda: PARTITIONS,
            scheduler=self.clock,
        )

    def reopen(self) -> GroupCoordinator:
        """A broker restart: close the logs, reopen them, replay into a new coordinator."""
        for i, part in self.parts.items():
            part.log.close()
            self.parts[i] = FakePartition(part.log.dir, i)
        self.coord = self.new_coordinator()
        return self.coord


def run(coro):
    return asyncio.run(coro)


async def _start(coord: GroupCoordinator) -> None:
    await coord.start()
    for _ in range(50):
        if not coord.loading:
            break
        await asyncio.sleep(0)


async def _join_sync(world: World, coord: GroupCoordinator, group: str):
    first = await coord.join_group(
        group, "", None, True, False, "cid", "/h", 30000, 10000, "consumer", [("range", SUB)]
    )
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    task = asyncio.ensure_future(
        coord.join_group(
            group,
            first.member_id,
            None,
            True,
            False,
            "cid",
            "/h",
            30000,
            10000,
            "consumer",
            [("range", SUB)],
        )
    )
    await asyncio.sleep(0)
    world.clock.advance(0)
    joined = await task
    assert joined.error == ErrorCode.NONE
    synced = await coord.sync_group(
        group,
        joined.generation_id,
        joined.member_id,
        "consumer",
        "range",
        None,
        {joined.member_id: b"assignment"},
    )
    assert synced.error == ErrorCode.NONE
    return joined


def test_commit_then_restart_replays_offsets_and_group(tmp_path):
    world = World(tmp_path)

    async def first_life():
        coord = world.coord
        await _start(coord)
        joined = await _join_sync(world, coord, "g")
        errors = coord.commit_offsets(
            "g",
            joined.member_id,
            None,
            joined.generation_id,
            {
                ("t", 0): OffsetAndMetadata(10, 3, "meta", 1000),
                ("t", 1): OffsetAndMetadata(20, -1, "", 1000),
            },
            8,
        )
        assert set(errors.values()) == {ErrorCode.NONE}
        # a simple (assign()) group commits without a generation
        errors = coord.commit_offsets(
            "simple", "", None, -1, {("t", 0): OffsetAndMetadata(5, -1, "", 1000)}, 8
        )
        assert errors == {("t", 0): ErrorCode.NONE}
        # deleting a group tombstones its offsets and metadata
        coord.commit_offsets(
            "gone", "", None, -1, {("t", 2): OffsetAndMetadata(1, -1, "", 1000)}, 8
        )
        assert coord.delete_groups(["gone"]) == {"gone": ErrorCode.NONE}
        await coord.stop()
        return joined

    joined = run(first_life())
    coord = world.reopen()

    async def second_life():
        await _start(coord)
        err, fetched = coord.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)], False)
        assert err == ErrorCode.NONE
        assert [(f.offset, f.leader_epoch, f.metadata) for f in fetched] == [
            (10, 3, "meta"),
            (20, -1, ""),
            (-1, -1, ""),
        ]
        group = coord.machine.get("g")
        assert group.is_(GroupState.STABLE)
        assert group.generation_id == joined.generation_id
        assert group.members[joined.member_id].assignment == b"assignment"
        # the member carries on heartbeating without a rebalance
        assert coord.heartbeat("g", joined.member_id, None, joined.generation_id) == ErrorCode.NONE
        assert coord.fetch_offsets("simple", None, False)[1][0].offset == 5
        assert coord.machine.get("gone") is None
        assert coord.describe_group("gone").state == "Dead"
        await coord.stop()

    run(second_life())


def test_records_are_kafka_format(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        coord.commit_offsets(
            "simple", "", None, -1, {("t", 0): OffsetAndMetadata(5, 2, "x", 1234)}, 8
        )
        part = world.parts[rec.partition_for("simple", PARTITIONS)]
        (record,) = part.records()
        assert rec.decode_key(record.key) == rec.OffsetKey("simple", "t", 0)
        assert record.value[:2] == b"\x00\x03"  # OffsetCommitValue v3
        assert rec.decode_offset_value(record.value).offset == 5
        await coord.stop()

    run(go())


def test_not_coordinator_and_loading(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        assert coord.status("g", "join") == ErrorCode.COORDINATOR_NOT_AVAILABLE
        index = rec.partition_for("g", PARTITIONS)
        world.parts[index].append_internal(build_batch([(rec.group_key("x"), None, (), 1)]))
        await coord.start()
        assert coord.status("g", "join") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert coord.heartbeat("g", "m", None, 1) == ErrorCode.NONE
        assert (
            await coord.sync_group("g", 1, "m", None, None, None, {})
        ).error == ErrorCode.REBALANCE_IN_PROGRESS
        for _ in range(20):
            await asyncio.sleep(0)
        assert coord.status("g", "join") is None
        world.parts[index].is_leader = False
        assert coord.status("g", "join") == ErrorCode.NOT_COORDINATOR
        assert coord.status("", "join") == ErrorCode.INVALID_GROUP_ID
        assert coord.status("", "offset_fetch") is None or True
        await coord.stop()

    run(go())


def test_commit_validation(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        tp = {("t", 0): OffsetAndMetadata(1)}
        # unknown group with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND after
        assert (
            coord.commit_offsets("nope", "m", None, 3, tp, 8)[("t", 0)]
            == ErrorCode.ILLEGAL_GENERATION
        )
        assert (
            coord.commit_offsets("nope", "m", None, 3, tp, 9)[("t", 0)]
            == ErrorCode.GROUP_ID_NOT_FOUND
        )
        joined = await _join_sync(world, coord, "g")
        gen = joined.generation_id
        assert (
            coord.commit_offsets("g", "", None, -1, tp, 8)[("t", 0)] == ErrorCode.UNKNOWN_MEMBER_ID
        )
        assert (
            coord.commit_offsets("g", "other", None, gen, tp, 8)[("t", 0)]
            == ErrorCode.UNKNOWN_MEMBER_ID
        )
        assert (
            coord.commit_offsets("g", joined.member_id, None, gen + 1, tp, 8)[("t", 0)]
            == ErrorCode.ILLEGAL_GENERATION
        )
        big = {("t", 0): OffsetAndMetadata(1, -1, "x" * 5000)}
        assert (
            coord.commit_offsets("g", joined.member_id, None, gen, big, 8)[("t", 0)]
            == ErrorCode.OFFSET_METADATA_TOO_LARGE
        )
        world.parts[rec.partition_for("g", PARTITIONS)].fail = True
        assert (
            coord.commit_offsets("g", joined.member_id, None, gen, tp, 8)[("t", 0)]
            == ErrorCode.NOT_COORDINATOR
        )
        await coord.stop()

    run(go())


def test_offset_delete_and_subscribed_topics(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        joined = await _join_sync(world, coord, "g")
        coord.commit_offsets(
            "g",
            joined.member_id,
            None,
            joined.generation_id,
            {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)},
            8,
        )
        err, res = coord.delete_offsets("g", [("t", 0), ("u", 0)])
        assert err == ErrorCode.NONE
        assert res == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NONE}
        assert [f.offset for f in coord.fetch_offsets("g", None, False)[1]] == [1]
        assert coord.delete_groups(["g"]) == {"g": ErrorCode.NON_EMPTY_GROUP}
        coord.leave_group("g", [LeaveMember(joined.member_id)])
        assert coord.delete_offsets("g", [("t", 0)]) == (ErrorCode.NONE, {("t", 0): ErrorCode.NONE})
        assert coord.delete_offsets("missing", [("t", 0)])[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert coord.delete_groups(["g", "missing"]) == {
            "g": ErrorCode.NONE,
            "missing": ErrorCode.GROUP_ID_NOT_FOUND,
        }
        await coord.stop()

    run(go())


def test_list_and_describe(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        joined = await _join_sync(world, coord, "g")
        coord.commit_offsets("simple", "", None, -1, {("t", 0): OffsetAndMetadata(1)}, 8)
        err, groups = coord.list_groups([], [])
        assert err == ErrorCode.NONE
        assert groups == [
            ("g", "consumer", "Stable", "classic"),
            ("simple", "", "Empty", "classic"),
        ]
        assert coord.list_groups(["stable"], [])[1] == [("g", "consumer", "Stable", "classic")]
        assert coord.list_groups([], ["consumer"])[1] == []
        s = coord.describe_group("g")
        assert (s.state, s.protocol_type, s.protocol) == ("Stable", "consumer", "range")
        assert s.members[0].member_id == joined.member_id
        assert s.members[0].assignment == b"assignment"
        assert s.members[0].metadata == SUB
        await coord.stop()

    run(go())


def test_transactional_offsets_replay(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        tp = {("t", 0): OffsetAndMetadata(7)}
        assert coord.txn_offset_commit("tx", 99, 0, "", None, -1, tp) == {("t", 0): ErrorCode.NONE}
        err, fetched = coord.fetch_offsets("tx", [("t", 0)], True)
        assert fetched[0].error == ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert coord.fetch_offsets("tx", [("t", 0)], False)[1][0].offset == -1
        index = rec.partition_for("tx", PARTITIONS)
        world.parts[index].append_internal(build_control_batch(99, 0, True, 0, 1))
        coord.on_txn_marker(index, 99, True)
        assert coord.fetch_offsets("tx", [("t", 0)], True)[1][0].offset == 7
        await coord.stop()

    run(go())
    coord = world.reopen()

    async def again():
        await _start(coord)
        assert coord.fetch_offsets("tx", [("t", 0)], True)[1][0].offset == 7
        await coord.stop()

    run(again())


def test_offset_expiry_for_empty_group(tmp_path):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        joined = await _join_sync(world, coord, "g")
        now = world.clock.now_ms()
        coord.commit_offsets(
            "g",
            joined.member_id,
            None,
            joined.generation_id,
            {("t", 0): OffsetAndMetadata(1, -1, "", now)},
            8,
        )
        coord.leave_group("g", [LeaveMember(joined.member_id)])
        assert coord.expire_offsets() == 0
        world.clock.advance(coord.config.offsets.retention_ms + 1)
        assert coord.expire_offsets() == 1
        assert coord.machine.get("g") is None
        index = rec.partition_for("g", PARTITIONS)
        tail = world.parts[index].records()[-2:]
        assert [r.value for r in tail] == [None, None]  # offset and group tombstones
        await coord.stop()

    run(go())


@pytest.mark.parametrize("expire_in", [100])
def test_commit_with_retention_expires_on_its_own(tmp_path, expire_in):
    world = World(tmp_path)

    async def go():
        coord = world.coord
        await _start(coord)
        now = world.clock.now_ms()
        coord.commit_offsets(
            "s", "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "", now, now + expire_in)}, 2
        )
        world.clock.advance(expire_in)
        assert coord.expire_offsets() == 1
        await coord.stop()

    run(go())
