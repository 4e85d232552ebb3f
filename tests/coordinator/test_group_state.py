"""The classic group state machine, driven without sockets: a fake clock and a fake log."""

from __future__ import annotations

import pytest

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.assignment import encode_subscription
from odradek.coordinator.group.join import NEW_MEMBER_JOIN_TIMEOUT_MS, JoinGroupOp, JoinParams
from odradek.coordinator.group.metadata import GroupState, JoinResult, SyncResult
from odradek.coordinator.group.state import (
    GroupConfig,
    GroupStateMachine,
    LeaveMember,
)
from odradek.coordinator.group.sync import SyncGroupOp, SyncParams
from odradek.coordinator.group.timers import ManualScheduler
from odradek.wire.errors import ErrorCode

SESSION = 10_000
REBALANCE = 30_000
SUB = encode_subscription(["t"])
PROTOCOLS = [("range", SUB), ("roundrobin", SUB)]


class Harness:
    def __init__(self, delay: int = 0, max_size: int = 2**31 - 1) -> None:
        self.clock = ManualScheduler()
        self.appended: list[tuple[str, list]] = []
        self.fail_appends = False
        self.machine = GroupStateMachine(
            GroupConfig(initial_rebalance_delay_ms=delay, max_size=max_size),
            self.clock,
            self.append,
        )
        self.joins = JoinGroupOp(self.machine)
        self.syncs = SyncGroupOp(self.machine)

    def append(self, group_id, records):
        if self.fail_appends:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        self.appended.append((group_id, records))
        return ErrorCode.NONE

    def join(
        self,
        member_id="",
        group="g",
        instance=None,
        protocols=PROTOCOLS,
        require_known=True,
        skip=False,
        session=SESSION,
        rebalance=REBALANCE,
        client="client",
        protocol_type="consumer",
    ) -> list[JoinResult]:
        out: list[JoinResult] = []
        params = JoinParams(
            group,
            member_id,
            instance,
            require_known,
            skip,
            client,
            "/127.0.0.1",
            rebalance,
            session,
            protocol_type,
            protocols,
        )
        self.joins.join(params, out.append)
        return out

    def join_new(self, **kw) -> list[JoinResult]:
        """A dynamic member's first join: MEMBER_ID_REQUIRED, then the join with its id."""
        first = self.join(**kw)
        assert first[0].error == ErrorCode.MEMBER_ID_REQUIRED
        kw.pop("member_id", None)
        return self.join(member_id=first[0].member_id, **kw)

    def sync(
        self,
        member_id,
        generation,
        assignments=None,
        group="g",
        instance=None,
        ptype=None,
        pname=None,
    ) -> list[SyncResult]:
        out: list[SyncResult] = []
        params = SyncParams(group, generation, member_id, ptype, pname, instance, assignments or {})
        self.syncs.sync(params, out.append)
        return out

    def group(self, group_id="g"):
        return self.machine.get(group_id)

    def stable_pair(self):
        """Two members in a Stable group: (leader id, follower id, generation)."""
        a = self.join_new()
        b = self.join_new(client="other")
        self.clock.advance(0)  # the initial rebalance delay (0 ms) elapses
        assert a and b
        gen = a[0].generation_id
        leader = a[0].leader_id
        follower = b[0].member_id if leader == a[0].member_id else a[0].member_id
        self.sync(follower, gen)
        res = self.sync(leader, gen, {leader: b"L", follower: b"F"})
        assert res[0].error == ErrorCode.NONE
        assert self.group().is_(GroupState.STABLE)
        return leader, follower, gen


def test_first_join_requires_member_id_then_completes():
    h = Harness()
    first = h.join()
    assert first[0].error == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first[0].member_id
    assert member_id.startswith("client-")
    assert h.group().is_pending_member(member_id)
    assert h.group().is_(GroupState.EMPTY)
    second = h.join(member_id=member_id)
    assert second == []  # waiting for the initial delay (0 ms, but still a timer)
    h.clock.advance(0)
    result = second[0]
    assert result.error == ErrorCode.NONE
    assert result.generation_id == 1
    assert result.leader_id == member_id
    assert result.protocol_name == "range"
    assert [m[0] for m in result.members] == [member_id]
    assert h.group().is_(GroupState.COMPLETING_REBALANCE)


def test_join_before_v4_needs_no_member_id():
    h = Harness()
    out = h.join(require_known=False)
    h.clock.advance(0)
    assert out[0].error == ErrorCode.NONE
    assert out[0].member_id


def test_invalid_session_timeout():
    h = Harness()
    assert h.join(session=10)[0].error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(session=10**9)[0].error == ErrorCode.INVALID_SESSION_TIMEOUT


def test_unknown_member_id_for_missing_group():
    h = Harness()
    assert h.join(member_id="nobody")[0].error == ErrorCode.UNKNOWN_MEMBER_ID


def test_inconsistent_protocols():
    h = Harness()
    h.join_new()
    h.clock.advance(0)
    other = h.join(protocols=[("cooperative-sticky", SUB)])
    assert other[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other = h.join(protocol_type="connect")
    assert other[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=[], group="g2")[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_sync_and_stable_assignment():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    group = h.group()
    assert group.members[leader].assignment == b"L"
    assert group.members[follower].assignment == b"F"
    # the group metadata record was written with both assignments
    _gid, records = h.appended[-1]
    key, value = records[0]
    assert rec.decode_key(key) == rec.GroupKey("g")
    decoded = rec.decode_group_value(value)
    assert decoded.generation == gen
    assert decoded.leader == leader
    assert {m.member_id: m.assignment for m in decoded.members} == {leader: b"L", follower: b"F"}
    # a late SyncGroup in Stable gets the stored assignment
    assert h.sync(follower, gen)[0].assignment == b"F"


def test_follower_sync_waits_for_leader():
    h = Harness()
    a = h.join_new()
    h.clock.advance(0)
    b = h.join_new(client="other")
    # b joined while the group was CompletingRebalance: a new rebalance started
    assert not b
    assert h.group().is_(GroupState.PREPARING_REBALANCE)
    a2 = h.join(member_id=a[0].member_id)
    assert a2 and b
    gen = a2[0].generation_id
    assert gen == 2
    leader = a2[0].leader_id
    follower = b[0].member_id if leader != b[0].member_id else a2[0].member_id
    waiting = h.sync(follower, gen)
    assert waiting == []
    h.sync(leader, gen, {leader: b"x", follower: b"y"})
    assert waiting[0].error == ErrorCode.NONE and waiting[0].assignment == b"y"


def test_sync_errors():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert h.sync("nobody", gen)[0].error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync(leader, gen + 5)[0].error == ErrorCode.ILLEGAL_GENERATION
    assert h.sync(leader, gen, ptype="connect")[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(leader, gen, pname="roundrobin")[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(leader, gen, group="other")[0].error == ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeat_errors_and_rebalance_signal():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    m = h.machine
    assert m.heartbeat("g", leader, None, gen) == ErrorCode.NONE
    assert m.heartbeat("g", leader, None, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert m.heartbeat("g", "nobody", None, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert m.heartbeat("missing", leader, None, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    # a new member makes the group rebalance: the others learn it from their heartbeat
    h.join_new(client="third")
    assert h.group().is_(GroupState.PREPARING_REBALANCE)
    assert m.heartbeat("g", follower, None, gen) == ErrorCode.REBALANCE_IN_PROGRESS


def test_leader_rejoin_in_stable_rebalances():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    out = h.join(member_id=leader)
    assert h.group().is_(GroupState.PREPARING_REBALANCE)
    assert not out
    f = h.join(member_id=follower)
    assert out[0].generation_id == gen + 1 and f[0].generation_id == gen + 1


def test_follower_rejoin_with_same_metadata_in_stable_is_answered_at_once():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    out = h.join(member_id=follower)
    assert out[0].error == ErrorCode.NONE and out[0].generation_id == gen
    assert out[0].members == []
    assert h.group().is_(GroupState.STABLE)


def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    # only the leader heartbeats
    for _ in range(3):
        h.clock.advance(SESSION // 2)
        assert h.machine.heartbeat("g", leader, None, gen) in (
            ErrorCode.NONE,
            ErrorCode.REBALANCE_IN_PROGRESS,
        )
    group = h.group()
    assert follower not in group.members
    assert group.is_(GroupState.PREPARING_REBALANCE)
    out = h.join(member_id=leader)
    assert out[0].error == ErrorCode.NONE
    assert out[0].generation_id == gen + 1
    assert [m[0] for m in out[0].members] == [leader]


def test_member_not_rejoining_is_dropped_after_rebalance_timeout():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    out = h.join(member_id=leader)
    assert not out
    # keep the follower's session alive without rejoining: it still gets dropped
    for _ in range(REBALANCE // 5000):
        h.clock.advance(5000)
        h.machine.heartbeat("g", follower, None, gen)
    assert out and out[0].generation_id == gen + 1
    assert list(h.group().members) == [leader]


def test_pending_member_expires():
    h = Harness()
    first = h.join()
    h.clock.advance(SESSION + 1)
    assert not h.group().is_pending_member(first[0].member_id)
    assert h.join(member_id=first[0].member_id)[0].error == ErrorCode.UNKNOWN_MEMBER_ID


def test_new_member_join_times_out():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    third = h.join_new(client="third")  # waits: others have not rejoined
    assert not third
    assert (
        h.group()
        .members[third_id := next(m for m in h.group().members if m.startswith("third"))]
        .is_new
    )
    h.clock.advance(NEW_MEMBER_JOIN_TIMEOUT_MS + 1)
    assert third_id not in h.group().members or third  # answered either way
    assert third


def test_leave_group_and_empty():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    err, results = h.machine.leave("g", [LeaveMember(follower), LeaveMember("nobody")])
    assert err == ErrorCode.NONE
    assert [e for _m, e in results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.group().is_(GroupState.PREPARING_REBALANCE)
    out = h.join(member_id=leader)
    assert out[0].generation_id == gen + 1
    h.sync(leader, gen + 1, {leader: b"all"})
    h.machine.leave("g", [LeaveMember(leader)])
    group = h.group()
    assert group.is_(GroupState.EMPTY)
    assert group.generation_id == gen + 2
    # the Empty transition was stored with no members
    _gid, records = h.appended[-1]
    assert rec.decode_group_value(records[0][1]).members == []


def test_leave_unknown_group():
    h = Harness()
    err, results = h.machine.leave("nope", [LeaveMember("a")])
    assert err == ErrorCode.NONE and results[0][1] == ErrorCode.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_waits_for_more_members():
    h = Harness(delay=3000)
    a = h.join_new()
    h.clock.advance(2000)
    b = h.join_new(client="b")
    h.clock.advance(2000)  # at 3 s a newcomer had joined: wait another delay
    assert not a and not b
    h.clock.advance(2000)
    assert a and b and a[0].generation_id == b[0].generation_id == 1
    assert len(a[0].members) + len(b[0].members) == 2


def _static_stable(h: Harness):
    a = h.join(instance="i-a", client="a")
    b = h.join(instance="i-b", client="b")
    h.clock.advance(0)
    gen = a[0].generation_id
    leader = a[0].leader_id
    ids = {a[0].member_id: "i-a", b[0].member_id: "i-b"}
    for mid, inst in ids.items():
        h.sync(mid, gen, {m: m.encode() for m in ids} if mid == leader else None, instance=inst)
    assert h.group().is_(GroupState.STABLE)
    return a[0].member_id, b[0].member_id, gen, leader


def test_static_member_needs_no_member_id_and_rejoins_without_rebalance():
    h = Harness()
    a, b, gen, leader = _static_stable(h)
    # b restarts: joins with an unknown member id and the same instance id
    out = h.join(instance="i-b", client="b")
    assert out[0].error == ErrorCode.NONE
    new_b = out[0].member_id
    assert new_b != b and new_b.startswith("i-b-")
    assert out[0].generation_id == gen
    assert h.group().is_(GroupState.STABLE)  # no rebalance
    assert h.group().members[new_b].assignment == b.encode()
    # the old member id is fenced
    assert h.machine.heartbeat("g", b, "i-b", gen) == ErrorCode.FENCED_INSTANCE_ID
    assert h.machine.heartbeat("g", new_b, "i-b", gen) == ErrorCode.NONE
    assert h.sync(b, gen, instance="i-b")[0].error == ErrorCode.FENCED_INSTANCE_ID
    assert h.join(member_id=b, instance="i-b")[0].error == ErrorCode.FENCED_INSTANCE_ID
    err, res = h.machine.leave("g", [LeaveMember(b, "i-b")])
    assert res[0][1] == ErrorCode.FENCED_INSTANCE_ID


def test_static_leader_rejoin_v9_skips_assignment():
    h = Harness()
    a, b, gen, leader = _static_stable(h)
    inst = "i-a" if leader == a else "i-b"
    old = h.join(instance=inst, client="x", skip=True)[0]
    assert old.skip_assignment and old.leader_id == old.member_id
    assert len(old.members) == 2
    # before v9 the old leader id is returned so the new member does not assign
    h2 = Harness()
    a, b, gen, leader = _static_stable(h2)
    inst = "i-a" if leader == a else "i-b"
    res = h2.join(instance=inst, client="x", skip=False)[0]
    assert not res.skip_assignment and res.leader_id == leader and res.members == []


def test_static_member_fenced_while_waiting_for_join():
    h = Harness()
    a, b, gen, leader = _static_stable(h)
    waiting = h.join(member_id=leader, instance="i-a" if leader == a else "i-b")
    assert not waiting  # leader rejoin: rebalance, waiting for the other member
    inst = "i-a" if leader == a else "i-b"
    h.join(instance=inst, client="dup")  # a second instance with the same id
    assert waiting[0].error == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_kept_when_not_rejoining_and_removed_by_session():
    h = Harness()
    a, b, gen, leader = _static_stable(h)
    other = b if leader == a else a
    inst = "i-a" if leader == a else "i-b"
    out = h.join(member_id=leader, instance=inst)
    for _ in range(REBALANCE // 5000):
        h.clock.advance(5000)
        h.machine.heartbeat("g", other, "i-b" if inst == "i-a" else "i-a", gen)
    # the static member that did not rejoin stays in the group
    assert out and other in h.group().members
    # admin removal by instance id (member id empty)
    other_inst = "i-b" if inst == "i-a" else "i-a"
    err, res = h.machine.leave("g", [LeaveMember("", other_inst)])
    assert res[0][1] == ErrorCode.NONE
    assert other not in h.group().members


def test_rebalance_in_progress_cancels_waiting_syncs():
    h = Harness()
    a = h.join_new()
    b = h.join_new(client="b")
    h.clock.advance(0)
    gen = a[0].generation_id
    follower = b[0].member_id if a[0].leader_id == a[0].member_id else a[0].member_id
    waiting = h.sync(follower, gen)
    h.join_new(client="c")  # a newcomer before the leader synced
    assert waiting[0].error == ErrorCode.REBALANCE_IN_PROGRESS


def test_members_not_syncing_are_removed():
    h = Harness()
    a = h.join_new()
    b = h.join_new(client="b")
    h.clock.advance(0)
    gen = a[0].generation_id
    leader = a[0].leader_id
    follower = b[0].member_id if leader == a[0].member_id else a[0].member_id
    h.sync(leader, gen, {leader: b"1", follower: b"2"})
    for _ in range(REBALANCE // 5000):
        h.clock.advance(5000)
        for member in (leader, follower):
            h.machine.heartbeat("g", member, None, gen)
    assert follower not in h.group().members
    assert h.group().is_(GroupState.PREPARING_REBALANCE)


def test_store_failure_propagates_error():
    h = Harness()
    a = h.join_new()
    h.clock.advance(0)
    gen = a[0].generation_id
    h.fail_appends = True
    res = h.sync(a[0].member_id, gen, {a[0].member_id: b"x"})
    assert res[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.group().is_(GroupState.PREPARING_REBALANCE)


def test_group_max_size():
    h = Harness(max_size=1)
    h.join_new()
    h.clock.advance(0)
    assert h.join(client="b")[0].error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_protocol_selection_by_vote():
    h = Harness()
    a = h.join(require_known=False, protocols=[("roundrobin", SUB), ("range", SUB)])
    b = h.join(require_known=False, protocols=[("range", SUB), ("roundrobin", SUB)])
    c = h.join(require_known=False, protocols=[("roundrobin", SUB)])
    h.clock.advance(0)
    assert {r[0].protocol_name for r in (a, b, c)} == {"roundrobin"}


def test_load_group_from_record_is_stable_and_heartbeats_continue():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    _gid, records = h.appended[-1]
    value = rec.decode_group_value(records[0][1])
    h2 = Harness()
    group = h2.machine.load_group("g", value)
    h2.machine.on_group_loaded(group)
    assert group.is_(GroupState.STABLE)
    assert group.generation_id == gen and group.leader_id == leader
    assert h2.machine.heartbeat("g", follower, None, gen) == ErrorCode.NONE
    assert group.subscribed == {"t"}
    # a member that never heartbeats after the load is expired
    h2.clock.advance(SESSION + 1)
    assert leader not in group.members


@pytest.mark.parametrize("state_change", ["leave", "join"])
def test_commit_like_touch_keeps_session(state_change):
    h = Harness()
    leader, follower, gen = h.stable_pair()
    for _ in range(4):
        h.clock.advance(SESSION // 2)
        h.machine.touch(h.group(), follower)
        h.machine.heartbeat("g", leader, None, gen)
    assert follower in h.group().members


def test_new_leader_elected_when_leader_does_not_rejoin():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    h.join_new(client="third")  # a newcomer: everyone must rejoin
    out = h.join(member_id=follower)
    for _ in range(REBALANCE // 5000):
        h.clock.advance(5000)
        h.machine.heartbeat("g", leader, None, gen)  # alive, but never rejoins
    assert out and out[0].generation_id == gen + 1
    assert out[0].leader_id == follower
    assert leader not in h.group().members
    assert len(out[0].members) == 2  # the new leader gets everyone's metadata


def test_unknown_member_rejoin_in_empty_group():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    h.machine.leave("g", [LeaveMember(leader), LeaveMember(follower)])
    h.clock.advance(0)
    assert h.group().is_(GroupState.EMPTY)
    assert h.join(member_id=leader)[0].error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.machine.heartbeat("g", leader, None, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync(leader, gen)[0].error == ErrorCode.UNKNOWN_MEMBER_ID
