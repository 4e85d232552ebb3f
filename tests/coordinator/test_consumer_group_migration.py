"""KIP-848 online upgrade, the conversion itself: a live classic group of two consumers becomes
a consumer group keeping both as classic members at the classic generation, their SyncGroup
assignments as their targets, in the records Kafka 4.x writes."""

from __future__ import annotations

import struct
import uuid

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group import records as classic_records
from odradek.coordinator.group.assignment import encode_subscription
from odradek.coordinator.group.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    GroupState,
    HeartbeatRequest,
    MemberState,
)
from odradek.coordinator.group.metadata import ClassicGroup, Member
from odradek.coordinator.group.metadata import GroupState as ClassicState
from odradek.coordinator.group.migration import (
    adopt,
    classic_heartbeat,
    classic_join,
    classic_leave,
    classic_sync,
    consumer_group_from_classic,
    conversion_records,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    upgrade_refusal,
)
from odradek.coordinator.group.timers import ManualScheduler
from odradek.wire.errors import ErrorCode

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"orders": (T1, 4), "audit": (T2, 1)}


def _assignment(parts: dict[str, list[int]], version: int = 1) -> bytes:
    out = struct.pack(">hi", version, len(parts))
    for topic, ps in parts.items():
        out += struct.pack(">h", len(topic)) + topic.encode()
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out + struct.pack(">i", -1)


def _classic_group(protocol_type: str = "consumer") -> ClassicGroup:
    group = ClassicGroup("g", now_ms=0, state=ClassicState.STABLE)
    group.protocol_type = protocol_type
    group.protocol_name = "range"
    group.generation_id = 5
    for i, (parts, instance) in enumerate(
        [({"orders": [0, 1], "gone": [0]}, None), ({"orders": [2, 3], "audit": [0]}, "i-2")]
    ):
        sub = encode_subscription(["orders", "audit"])
        m = Member(
            f"m{i}",
            instance,
            f"c{i}",
            "/127.0.0.1",
            30000,
            6000,
            protocol_type,
            [("range", sub), ("cooperative-sticky", sub)],
        )
        m.assignment = _assignment(parts)
        group.members[m.member_id] = m
    return group


def test_decode_assignment() -> None:
    assert decode_assignment(_assignment({"a": [1, 0], "b": []}, version=3)) == {
        "a": [1, 0],
        "b": [],
    }
    assert decode_assignment(b"") == {}
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x05\x00") is None


def test_classic_join_subscription_and_sync_assignment() -> None:
    v0 = decode_subscription(encode_subscription(["b", "a"], b"user"))
    assert v0 is not None and (v0.version, v0.topics, v0.owned) == (0, ["b", "a"], {})
    v3 = (
        struct.pack(">hi", 3, 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", -1)
        + struct.pack(">ih", 1, 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">ih", 7, 2)
        + b"r1"
    )
    decoded = decode_subscription(v3)
    assert decoded is not None
    assert (decoded.topics, decoded.owned, decoded.generation_id, decoded.rack_id) == (
        ["t"],
        {"t": [0, 2]},
        7,
        "r1",
    )
    assert decode_subscription(v3[:-3]) is None
    assert decode_subscription(b"\xff\xff") is None
    encoded = encode_assignment({"t": {2, 0}, "a": []}, version=3)
    assert decode_assignment(encoded) == {"a": [], "t": [0, 2]}
    assert encoded[:2] == b"\x00\x03"
    assert encode_assignment({}, version=9)[:2] == b"\x00\x03"


def test_upgrade_refusal_follows_the_policy_protocol_type_and_size() -> None:
    group = _classic_group()
    assert upgrade_refusal(group, ConsumerGroupConfig()) is None
    assert upgrade_refusal(group, ConsumerGroupConfig(migration_policy="upgrade")) is None
    for policy in ("downgrade", "disabled"):
        refusal = upgrade_refusal(group, ConsumerGroupConfig(migration_policy=policy))
        assert refusal is not None and "disabled" in refusal
    connect = _classic_group(protocol_type="connect")
    assert "embedded protocol" in (upgrade_refusal(connect, ConsumerGroupConfig()) or "")
    assert "maximum size" in (upgrade_refusal(group, ConsumerGroupConfig(max_size=2)) or "")


def test_classic_members_keep_their_assignment_at_the_generation() -> None:
    converted = consumer_group_from_classic(_classic_group(), TOPICS, "uniform")
    assert (converted.group_epoch, converted.assignment_epoch) == (5, 5)
    assert converted.state is GroupState.STABLE
    m0, m1 = converted.members["m0"], converted.members["m1"]
    assert m0.assigned == {T1: {0, 1}}  # the deleted topic "gone" is dropped
    assert m1.assigned == {T1: {2, 3}, T2: {0}}
    assert converted.target == {"m0": {T1: {0, 1}}, "m1": {T1: {2, 3}, T2: {0}}}
    assert converted.owners[(T1, 2)] == "m1"
    assert converted.static_members == {"i-2": "m1"}
    for m in (m0, m1):
        assert (m.member_epoch, m.previous_member_epoch, m.state) == (5, 5, MemberState.STABLE)
        assert m.subscribed_topic_names == ["audit", "orders"]
        assert m.classic is not None and m.classic.session_timeout_ms == 6000
        assert [name for name, _ in m.classic.supported_protocols] == [
            "range",
            "cooperative-sticky",
        ]
    assert converted.subscription_metadata == TOPICS


def test_conversion_records_replay_to_the_converted_group() -> None:
    converted = consumer_group_from_classic(_classic_group(), TOPICS, "uniform")
    records = conversion_records(converted)
    assert records[0] == (classic_records.group_key("g"), None)  # the classic group is gone

    def append(_group: str, _records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        return ErrorCode.NONE

    loaded = ConsumerGroupManager(ConsumerGroupConfig(), ManualScheduler(), dict, append)
    for key, value in records[1:]:
        decoded = crec.decode_key(key)
        assert decoded is not None
        loaded.replay_record(decoded, value)
    group = loaded.get("g")
    assert group is not None
    assert (group.group_epoch, group.assignment_epoch) == (5, 5)
    assert group.target == converted.target
    assert group.subscription_metadata == TOPICS
    for member_id, m in converted.members.items():
        again = group.members[member_id]
        assert again.classic == m.classic
        assert again.assigned == m.assigned
        assert again.member_epoch == 5


def _manager(scheduler: ManualScheduler) -> ConsumerGroupManager:
    def append(_group: str, _records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        return ErrorCode.NONE

    return ConsumerGroupManager(ConsumerGroupConfig(), scheduler, lambda: TOPICS, append)


def _owned(assignment: bytes) -> set[tuple[str, int]]:
    decoded = decode_assignment(assignment)
    assert decoded is not None
    return {(t, p) for t, ps in decoded.items() for p in ps}


def test_classic_members_rebalance_with_a_consumer_protocol_member() -> None:
    scheduler = ManualScheduler()
    manager = _manager(scheduler)
    adopt(manager, consumer_group_from_classic(_classic_group(), TOPICS, "uniform"))
    # the classic members keep heartbeating at their generation while nothing changes
    assert classic_heartbeat(manager, "g", "m0", None, 5) == ErrorCode.NONE
    assert classic_heartbeat(manager, "g", "m0", None, 4) == ErrorCode.ILLEGAL_GENERATION
    assert classic_heartbeat(manager, "g", "m9", None, 5) == ErrorCode.UNKNOWN_MEMBER_ID
    # a consumer-protocol member joins: the group epoch moves, the classic members must rejoin
    joined = manager.heartbeat(
        HeartbeatRequest(
            "g",
            "",
            0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=["orders", "audit"],
            owned=[],
        )
    )
    assert joined.error == ErrorCode.NONE and joined.member_id is not None
    group = manager.get("g")
    assert group is not None and group.group_epoch == 6
    assert classic_heartbeat(manager, "g", "m0", None, 5) == ErrorCode.REBALANCE_IN_PROGRESS
    sync_error, _ = classic_sync(manager, "g", "m0", None, 5, "consumer", "range")
    assert sync_error == ErrorCode.REBALANCE_IN_PROGRESS
    subs = encode_subscription(["orders", "audit"])
    seen: set[tuple[str, int]] = set()
    for member_id, instance in (("m0", None), ("m1", "i-2")):
        answer = classic_join(
            manager, "g", member_id, instance, [("range", subs)], 6000, 30000, "c", "/h"
        )
        assert (answer.error, answer.generation_id, answer.protocol_name) == (
            ErrorCode.NONE,
            6,
            "range",
        )
        error, assignment = classic_sync(manager, "g", member_id, instance, 6, "consumer", "range")
        assert error == ErrorCode.NONE
        owned = _owned(assignment)
        assert not owned & seen  # never two owners
        seen |= owned
        # committing at the new generation is accepted, at the old one refused
        assert manager.validate_offset_commit("g", member_id, 6, 8) is None
        assert manager.validate_offset_commit("g", member_id, 5, 8) == ErrorCode.ILLEGAL_GENERATION
    # the consumer-protocol member gets the partitions the classic members released
    hb = manager.heartbeat(HeartbeatRequest("g", joined.member_id, joined.member_epoch))
    assert hb.error == ErrorCode.NONE and hb.assignment
    theirs = {("orders" if t == T1 else "audit", p) for t, ps in hb.assignment.items() for p in ps}
    assert theirs and not theirs & seen
    assert theirs | seen == {("orders", p) for p in range(4)} | {("audit", 0)}
    # a classic member that leaves is gone and the group epoch moves again
    assert classic_leave(manager, "g", "m0", None) == ErrorCode.NONE
    assert "m0" not in group.members and group.group_epoch == 7
    assert classic_heartbeat(manager, "g", "m1", "i-2", 6) == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_classic_member_expires_after_its_own_session_timeout() -> None:
    scheduler = ManualScheduler()
    manager = _manager(scheduler)
    adopt(manager, consumer_group_from_classic(_classic_group(), TOPICS, "uniform"))
    scheduler.advance(5000)
    assert classic_heartbeat(manager, "g", "m0", None, 5) == ErrorCode.NONE
    scheduler.advance(1500)  # m1's 6 s session (not the group's 45 s) ran out
    group = manager.get("g")
    assert group is not None and sorted(group.members) == ["m0"]
