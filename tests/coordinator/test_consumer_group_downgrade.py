"""KIP-848 online downgrade and the classic members' timers, through the coordinator: a live
classic group (m0, m1 static as i-2) is upgraded by a consumer-protocol member `c`; the group
becomes classic again when `c` is fenced (session or rebalance timeout) or replaced by a classic
static member (Kafka 4.4's consumerGroupFenceMember, validateOnlineDowngradeWith*); a classic
member that does not rejoin or sync within its rebalance timeout is fenced (Kafka's
classicGroupJoinTimeout / SyncTimeout)."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

from odradek.coordinator.group import records as classic_records
from odradek.coordinator.group.assignment import encode_subscription
from odradek.coordinator.group.consumer_group import ConsumerGroupConfig, HeartbeatRequest
from odradek.coordinator.group.coordinator import GroupCoordinator, GroupCoordinatorConfig
from odradek.coordinator.group.metadata import ClassicGroup, GroupState, Member
from odradek.coordinator.group.migration import decode_assignment
from odradek.coordinator.group.state import LeaveMember
from odradek.coordinator.group.timers import ManualScheduler
from odradek.wire.errors import ErrorCode

T1 = uuid.UUID(int=1)
TOPICS = {"orders": (T1, 4)}
SUB = encode_subscription(["orders"])
Written = list[list[tuple[bytes, bytes | None]]]


def _assignment(parts: list[int]) -> bytes:
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", 6) + b"orders"
    return out + struct.pack(f">i{len(parts)}i", len(parts), *parts) + struct.pack(">i", -1)


class World:
    def __init__(self, policy: str = "bidirectional", session_ms: int = 45000) -> None:
        class Part:
            is_leader = True

        self.clock = ManualScheduler()
        cfg = GroupCoordinatorConfig(
            num_partitions=1,
            consumer=ConsumerGroupConfig(migration_policy=policy, session_timeout_ms=session_ms),
        )
        self.coord = GroupCoordinator(
            cfg,
            get_partition=lambda _i: Part(),
            partition_count=lambda: 1,
            scheduler=self.clock,
            topics=lambda: dict(TOPICS),
        )
        self.coord.active = True
        self.coord.loaded.add(0)
        self.written: Written = []

        def append(_group: str, records: list[tuple[bytes, bytes | None]], **_kw: Any) -> ErrorCode:
            self.written.append(records)
            return ErrorCode.NONE

        self.coord._append = append  # type: ignore[method-assign]
        self.coord.consumer.append = append
        self.coord.machine.append = append  # type: ignore[method-assign]
        # a live classic group: m0 owns orders 0-1, m1 (static) orders 2-3, generation 5
        classic = ClassicGroup("g", now_ms=0, state=GroupState.STABLE)
        classic.protocol_type = "consumer"
        classic.protocol_name = "range"
        classic.generation_id = 5
        for member_id, instance, parts in (("m0", None, [0, 1]), ("m1", "i-2", [2, 3])):
            m = Member(member_id, instance, "c", "/h", 30000, 6000, "consumer", [("range", SUB)])
            m.assignment = _assignment(parts)
            classic.add(m, None)
        self.coord.machine.groups["g"] = classic

    def consumer(
        self, member_id: str, epoch: int, owned: list[int] | None = None, **kw: Any
    ) -> Any:
        full = epoch == 0
        return self.coord.consumer_heartbeat(
            HeartbeatRequest(
                "g",
                member_id,
                epoch,
                rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30000) if full else -1,
                subscribed_topic_names=["orders"] if full else None,
                owned=[(T1, owned)] if owned else [] if full else None,
                **kw,
            )
        )

    def join(self, member_id: str, instance: str | None = None, sub: bytes = SUB) -> Any:
        return asyncio.run(
            self.coord.join_group(
                "g", member_id, instance, False, False, "c", "/h", 30000, 6000, "consumer",
                [("range", sub)],
            )
        )  # fmt: skip

    def sync(self, member_id: str, generation: int, instance: str | None = None) -> Any:
        return asyncio.run(
            self.coord.sync_group("g", generation, member_id, "consumer", "range", instance, {})
        )

    def upgrade(self, instance: str | None = None, rebalance_timeout_ms: int = 30000) -> Any:
        c = self.consumer("c", 0, instance_id=instance, rebalance_timeout_ms=rebalance_timeout_ms)
        assert c.error == ErrorCode.NONE and c.member_epoch == 6
        assert self.coord.consumer.get("g") is not None
        return c

    def classic_group(self) -> ClassicGroup:
        assert self.coord.consumer.get("g") is None, "still a consumer group"
        group = self.coord.machine.get("g")
        assert group is not None
        return group

    def classic_record_written(self) -> bool:
        key = classic_records.group_key("g")
        return any(k == key and v is not None for r in self.written[-1:] for k, v in r)


def test_the_last_consumer_member_fenced_by_its_session_downgrades_the_group() -> None:
    w = World(session_ms=3000)
    w.upgrade()
    w.clock.advance(2000)  # the classic members heartbeat, told to rejoin (the epoch moved)
    assert w.coord.heartbeat("g", "m0", None, 5) == ErrorCode.REBALANCE_IN_PROGRESS
    assert w.coord.heartbeat("g", "m1", "i-2", 5) == ErrorCode.REBALANCE_IN_PROGRESS
    w.clock.advance(1500)  # c's 3 s session ran out
    group = w.classic_group()
    assert group.state == GroupState.PREPARING_REBALANCE
    assert sorted(group.members) == ["m0", "m1"] and group.generation_id == 6
    assert group.protocol_type == "consumer" and group.protocol_name == "range"
    assert w.classic_record_written()
    assert not w.clock.pending(("cg-join", "g", "m0"))  # the consumer group's timers are gone
    # the members rejoin the classic group, which completes with both
    assert w.coord.heartbeat("g", "m0", None, 6) == ErrorCode.REBALANCE_IN_PROGRESS


def test_without_downgrade_in_the_policy_the_group_stays_a_consumer_group() -> None:
    w = World(policy="upgrade", session_ms=3000)
    w.upgrade()
    w.clock.advance(2000)
    w.coord.heartbeat("g", "m0", None, 5)
    w.coord.heartbeat("g", "m1", "i-2", 5)
    w.clock.advance(1500)
    group = w.coord.consumer.get("g")
    assert group is not None and sorted(group.members) == ["m0", "m1"]


def test_the_last_consumer_member_fenced_by_its_rebalance_timeout_downgrades_the_group() -> None:
    w = World()
    c = w.upgrade(rebalance_timeout_ms=1000)
    # both classic members leave: c gets every partition
    for member_id, instance in (("m0", None), ("m1", "i-2")):
        _, results = w.coord.leave_group("g", [LeaveMember(member_id, instance)])
        assert [e for _m, e in results] == [ErrorCode.NONE]
    hb = w.consumer("c", c.member_epoch)
    assert hb.error == ErrorCode.NONE and hb.assignment == {T1: {0, 1, 2, 3}}
    # a classic member joins: c must give up two partitions within its 1 s rebalance timeout
    joined = w.join("")
    assert joined.error == ErrorCode.NONE
    hb = w.consumer("c", hb.member_epoch, owned=[0, 1, 2, 3])
    assert hb.error == ErrorCode.NONE
    assert w.clock.pending(("cg-rebalance", "g", "c"))
    w.clock.advance(600)
    assert w.coord.heartbeat("g", joined.member_id, None, joined.generation_id) in (
        ErrorCode.NONE,
        ErrorCode.REBALANCE_IN_PROGRESS,
    )
    w.clock.advance(600)  # c never released them: fenced, and the group is classic again
    group = w.classic_group()
    assert sorted(group.members) == [joined.member_id]
    assert group.state == GroupState.PREPARING_REBALANCE


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_at_once() -> None:
    w = World()
    w.upgrade(instance="i-c")
    target = w.coord.consumer.get("g").target["c"]  # type: ignore[union-attr]
    # c's process is gone; a classic consumer starts with its instance id
    joined = w.join("", instance="i-c")
    assert joined.error == ErrorCode.NONE and joined.generation_id == 6
    group = w.classic_group()
    # the target assignment was current: the classic group is Stable at once
    assert group.state == GroupState.STABLE and group.generation_id == 6
    assert sorted(group.members) == sorted(["m0", "m1", joined.member_id])
    assert group.static_members["i-c"] == joined.member_id
    synced = w.sync(joined.member_id, 6, instance="i-c")
    assert synced.error == ErrorCode.NONE
    assert decode_assignment(synced.assignment) == {"orders": sorted(target[T1])}
    # the other classic members, still at generation 5, are told to rejoin
    assert w.coord.heartbeat("g", "m0", None, 5) == ErrorCode.ILLEGAL_GENERATION


def test_a_classic_static_member_replacing_a_consumer_member_without_downgrade() -> None:
    w = World(policy="upgrade")
    w.upgrade(instance="i-c")
    joined = w.join("", instance="i-c")
    assert joined.error == ErrorCode.NONE
    group = w.coord.consumer.get("g")
    assert group is not None and "c" not in group.members
    assert group.static_members["i-c"] == joined.member_id
    # a known member id that is not the instance's owner is fenced
    assert w.join("someone-else", instance="i-c").error == ErrorCode.FENCED_INSTANCE_ID


def test_classic_members_that_do_not_rejoin_or_sync_within_the_rebalance_timeout_are_fenced() -> (
    None
):
    w = World()
    c = w.upgrade()
    # m0 is told to rejoin and never does; m1 rejoins and never syncs; both heartbeat
    assert w.coord.heartbeat("g", "m0", None, 5) == ErrorCode.REBALANCE_IN_PROGRESS
    joined = w.join("m1", instance="i-2")
    assert joined.error == ErrorCode.NONE and joined.generation_id == 6
    for _ in range(5):
        w.clock.advance(5000)
        w.coord.heartbeat("g", "m0", None, 5)
        w.coord.heartbeat("g", "m1", "i-2", 6)
        w.consumer("c", c.member_epoch)
    group = w.coord.consumer.get("g")
    assert group is not None and sorted(group.members) == ["c", "m0", "m1"]
    w.clock.advance(5000)  # 30 s: their rebalance timeout
    assert sorted(group.members) == ["c"]
    assert w.coord.heartbeat("g", "m0", None, 5) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_classic_member_that_rejoins_and_syncs_in_time_stays() -> None:
    w = World()
    c = w.upgrade()
    assert w.coord.heartbeat("g", "m0", None, 5) == ErrorCode.REBALANCE_IN_PROGRESS
    joined = w.join("m0")
    assert joined.error == ErrorCode.NONE
    assert w.sync("m0", joined.generation_id).error == ErrorCode.NONE
    assert not w.clock.pending(("cg-join", "g", "m0"))
    assert not w.clock.pending(("cg-sync", "g", "m0"))
    for _ in range(8):
        w.clock.advance(5000)
        w.coord.heartbeat("g", "m0", None, joined.generation_id)
        w.coord.heartbeat("g", "m1", "i-2", 5)
        w.consumer("c", c.member_epoch)
    group = w.coord.consumer.get("g")
    assert group is not None and "m0" in group.members and "m1" not in group.members


def test_an_admin_removing_the_consumer_member_by_instance_id_downgrades() -> None:
    # Kafka 4.4's LeaveGroup into a consumer group removes members of either protocol, a
    # static one by its instance id alone (AdminClient.removeMembersFromConsumerGroup)
    w = World()
    w.upgrade(instance="i-c")
    _, results = w.coord.leave_group("g", [LeaveMember("", "i-c")])
    assert [e for _m, e in results] == [ErrorCode.NONE]
    group = w.classic_group()
    assert sorted(group.members) == ["m0", "m1"]
    assert group.state == GroupState.PREPARING_REBALANCE


def test_a_replacement_with_another_subscription_downgrades_into_a_rebalance() -> None:
    w = World()
    w.upgrade(instance="i-c")
    joined = w.join("", instance="i-c", sub=encode_subscription(["orders", "refunds"]))
    assert joined.error == ErrorCode.NONE
    group = w.classic_group()  # the group epoch moved: the assignment is stale, so it rebalances
    assert group.state == GroupState.PREPARING_REBALANCE
    assert sorted(group.members) == sorted(["m0", "m1", joined.member_id])
