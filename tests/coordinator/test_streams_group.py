"""KIP-1071 streams groups: the sticky task assignor and the group's heartbeat state machine."""

from __future__ import annotations

import uuid

from odradek.coordinator.group import streams_group as sg
from odradek.coordinator.group import streams_records as srec
from odradek.coordinator.group.streams_assignor import AssignorMember, assign, flatten
from odradek.coordinator.group.timers import ManualScheduler
from odradek.wire.errors import ErrorCode

SOURCES = {"in": (uuid.uuid4(), 4)}


def _members(*specs: tuple[str, str]) -> list[AssignorMember]:
    return [AssignorMember(mid, pid) for mid, pid in specs]


def test_active_tasks_spread_evenly_and_each_task_once() -> None:
    out = assign({"0": 4, "1": 4}, _members(("a", "p1"), ("b", "p2"), ("c", "p3")))
    tasks = [t for m in out.values() for t in flatten(m.active)]
    assert sorted(tasks) == sorted((s, p) for s in "01" for p in range(4))
    assert sorted(len(flatten(m.active)) for m in out.values()) == [2, 3, 3]
    assert all(not m.standby for m in out.values())


def test_assignment_is_sticky_when_a_member_joins() -> None:
    first = assign({"0": 6}, _members(("a", "p1"), ("b", "p2")))
    members = [
        AssignorMember("a", "p1", first["a"].active),
        AssignorMember("b", "p2", first["b"].active),
        AssignorMember("c", "p3"),
    ]
    second = assign({"0": 6}, members)
    assert {len(flatten(m.active)) for m in second.values()} == {2}
    for mid in "ab":  # the old members keep what they had, giving up only the excess
        assert flatten(second[mid].active) <= flatten(first[mid].active)


def test_standby_replicas_never_share_a_process_with_their_active_task() -> None:
    members = _members(("a1", "p1"), ("a2", "p1"), ("b", "p2"), ("c", "p3"))
    out = assign({"0": 3, "1": 3}, members, num_standby=1)
    process = {m.member_id: m.process_id for m in members}
    for task in [(s, p) for s in "01" for p in range(3)]:
        holders = [mid for mid, m in out.items() if task in flatten(m.active)]
        standbys = [mid for mid, m in out.items() if task in flatten(m.standby)]
        assert len(holders) == 1 and len(standbys) == 1, (task, holders, standbys)
        assert process[holders[0]] != process[standbys[0]]


def test_no_standby_when_there_is_one_process() -> None:
    out = assign({"0": 2}, _members(("a", "p1"), ("b", "p1")), num_standby=1)
    assert all(not m.standby for m in out.values())


TOPOLOGY = sg.Topology(
    1,
    (
        sg.Subtopology(
            "0",
            source_topics=("in",),
            repartition_sink_topics=("app-rep",),
            state_changelog_topics=(sg.TopicInfo("app-store-changelog"),),
        ),
        sg.Subtopology("1", repartition_source_topics=(sg.TopicInfo("app-rep"),)),
    ),
)


def _manager(
    topics: dict[str, tuple[uuid.UUID, int]],
) -> tuple[sg.StreamsGroupManager, ManualScheduler]:
    sched = ManualScheduler()
    return sg.StreamsGroupManager(sg.StreamsGroupConfig(), sched, lambda: topics), sched


def _join(m: sg.StreamsGroupManager, member: str, process: str) -> sg.StreamsHeartbeatResult:
    return m.heartbeat(
        sg.StreamsHeartbeatRequest(
            "app", member, 0, rebalance_timeout_ms=30000, topology=TOPOLOGY, process_id=process,
            active={}, standby={},
        )
    )  # fmt: skip


Written = list[tuple[bytes, bytes | None]]


def _recording(topics: dict[str, tuple[uuid.UUID, int]]) -> tuple[sg.StreamsGroupManager, Written]:
    """A manager whose records are kept, in the order written."""
    written: Written = []

    def append(_group_id: str, records: Written) -> ErrorCode:
        written.extend(records)
        return ErrorCode.NONE

    return sg.StreamsGroupManager(
        sg.StreamsGroupConfig(), ManualScheduler(), lambda: topics, append
    ), written


def _replayed(written: Written, topics: dict[str, tuple[uuid.UUID, int]]) -> sg.StreamsGroupManager:
    """A new coordinator's manager loaded from those records."""
    fresh = sg.StreamsGroupManager(sg.StreamsGroupConfig(), ManualScheduler(), lambda: topics)
    for key, value in written:
        skey = srec.decode_key(key)
        assert skey is not None
        fresh.replay_record(skey, value)
    fresh.on_loaded({"app"})
    return fresh


def test_internal_topics_are_requested_then_tasks_assigned() -> None:
    topics = dict(SOURCES)
    m, _ = _manager(topics)
    r = _join(m, "a", "p1")
    assert r.error == ErrorCode.NONE and r.tasks == ({}, {})
    assert [c for c, _ in r.status or []] == [sg.MISSING_INTERNAL_TOPICS]
    # the repartition topic takes its writer's source partitions, the changelog its own's
    assert {(t.name, t.partitions) for t in r.create_topics} == {
        ("app-rep", 4),
        ("app-store-changelog", 4),
    }
    assert m.groups["app"].state == sg.StreamsGroupState.NOT_READY
    for t in r.create_topics:
        topics[t.name] = (uuid.uuid4(), t.partitions)
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", r.member_epoch))
    assert r.status == [] and r.tasks is not None
    assert flatten(r.tasks[0]) == {(s, p) for s in "01" for p in range(4)}
    assert m.groups["app"].state == sg.StreamsGroupState.STABLE


def test_missing_source_topic_is_a_status() -> None:
    m, _ = _manager({})
    r = _join(m, "a", "p1")
    assert [c for c, _ in r.status or []] == [sg.MISSING_SOURCE_TOPICS]
    assert "in" in (r.status or [])[0][1]


def _ready() -> dict[str, tuple[uuid.UUID, int]]:
    return {
        **SOURCES,
        "app-rep": (uuid.uuid4(), 4),
        "app-store-changelog": (uuid.uuid4(), 4),
    }


def test_a_task_moves_only_after_its_owner_revoked_it() -> None:
    m, _ = _manager(_ready())
    a = _join(m, "a", "p1")
    assert a.tasks is not None and len(flatten(a.tasks[0])) == 8
    b = _join(m, "b", "p2")
    assert b.tasks is not None
    assert flatten(b.tasks[0]) == set()  # a still owns every task
    # a's next heartbeat revokes half, at its old epoch
    a2 = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a.member_epoch, active=a.tasks[0]))
    assert a2.member_epoch == a.member_epoch and a2.tasks is not None
    kept = flatten(a2.tasks[0])
    assert len(kept) == 4
    # a reports it gave them up: it moves to the new epoch; b then gets the released tasks
    a3 = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a2.member_epoch, active=a2.tasks[0]))
    assert a3.member_epoch > a.member_epoch
    b2 = m.heartbeat(sg.StreamsHeartbeatRequest("app", "b", b.member_epoch, active={}))
    assert b2.tasks is not None
    assert flatten(b2.tasks[0]) == {(s, p) for s in "01" for p in range(4)} - kept


def test_epoch_fencing_and_session_expiry() -> None:
    m, sched = _manager(_ready())
    a = _join(m, "a", "p1")
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a.member_epoch + 5))
    assert r.error == ErrorCode.FENCED_MEMBER_EPOCH
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "nobody", 3))
    assert r.error == ErrorCode.UNKNOWN_MEMBER_ID
    sched.advance(sg.StreamsGroupConfig().session_timeout_ms + 1)
    assert m.groups["app"].members == {}
    assert m.groups["app"].state == sg.StreamsGroupState.EMPTY
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a.member_epoch))
    assert r.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_first_heartbeat_must_carry_topology_and_process() -> None:
    m, _ = _manager(_ready())
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", 0, rebalance_timeout_ms=1000))
    assert r.error == ErrorCode.INVALID_REQUEST


def test_group_survives_a_reload_from_its_records() -> None:
    """The records a streams group writes (Kafka's keys 17, 19-23) rebuild it on a new
    coordinator: epochs, topology, members and their tasks; a deleted group leaves nothing."""
    topics = _ready()
    m, written = _recording(topics)
    a = _join(m, "a", "p1")
    b = _join(m, "b", "p2")
    assert a.tasks is not None and b.tasks is not None
    a = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a.member_epoch, active=a.tasks[0]))
    old = m.groups["app"]

    fresh = _replayed(written, topics)
    new = fresh.groups["app"]
    assert (new.group_epoch, new.assignment_epoch) == (old.group_epoch, old.assignment_epoch)
    assert new.topology == TOPOLOGY
    assert new.target == old.target
    for mid, member in old.members.items():
        loaded = new.members[mid]
        assert (loaded.process_id, loaded.member_epoch, loaded.active, loaded.revoking) == (
            member.process_id, member.member_epoch, member.active, member.revoking,
        )  # fmt: skip
    # the reloaded group goes on: a's next heartbeat at its epoch is accepted
    r = fresh.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a.member_epoch))
    assert r.error == ErrorCode.NONE

    for mid in list(old.members):
        m.remove_member(old, mid)
    m.delete("app")
    assert "app" not in _replayed(written, topics).groups


def test_a_member_that_does_not_revoke_in_time_is_removed() -> None:
    m, sched = _manager(_ready())
    a = _join(m, "a", "p1")
    assert a.tasks is not None
    _join(m, "b", "p2")
    # a is told to give up half its tasks and never confirms: its rebalance timeout fences it
    a2 = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a.member_epoch, active=a.tasks[0]))
    assert m.groups["app"].members["a"].state == sg.StreamsMemberState.UNREVOKED_TASKS
    sched.advance(20000)
    m.heartbeat(sg.StreamsHeartbeatRequest("app", "a", a2.member_epoch, active=a.tasks[0]))
    assert "a" in m.groups["app"].members  # heartbeats that still own the tasks do not re-arm it
    sched.advance(10001)
    assert "a" not in m.groups["app"].members
    b = m.heartbeat(
        sg.StreamsHeartbeatRequest("app", "b", m.groups["app"].members["b"].member_epoch)
    )
    assert b.error == ErrorCode.NONE


def _join_static(
    m: sg.StreamsGroupManager, member: str, instance: str, process: str = "p1"
) -> sg.StreamsHeartbeatResult:
    return m.heartbeat(
        sg.StreamsHeartbeatRequest(
            "app", member, 0, instance_id=instance, rebalance_timeout_ms=30000,
            topology=TOPOLOGY, process_id=process, active={}, standby={},
        )
    )  # fmt: skip


def test_static_member_takes_over_its_tasks_after_a_temporary_leave() -> None:
    """Kafka's static membership for streams groups: a member with an instance id that leaves
    with epoch -2 keeps its tasks (no new group epoch); a new member id with the same instance
    id takes them over at once; while the instance id is held, another join is refused."""
    topics = _ready()
    m, written = _recording(topics)
    a = _join_static(m, "a1", "inst-a")
    b = _join_static(m, "b1", "inst-b", "p2")
    a = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a1", a.member_epoch, active=a.tasks[0]))
    a = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a1", a.member_epoch, active=a.tasks[0]))
    b = m.heartbeat(sg.StreamsHeartbeatRequest("app", "b1", b.member_epoch, active={}))
    group = m.groups["app"]
    assert group.state == sg.StreamsGroupState.STABLE
    b_tasks = flatten(group.members["b1"].active)
    assert len(b_tasks) == 4
    epoch = group.group_epoch

    # another member id with b's instance id while b is still there: refused
    r = _join_static(m, "b2", "inst-b", "p2")
    assert r.error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert r.message == (
        "Static member b2 with instance id inst-b cannot join the group because the instance "
        "id is owned by b1 member."
    )
    # a heartbeat of a stranger under b's instance id is fenced
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "b9", 3, instance_id="inst-b"))
    assert r.error == ErrorCode.FENCED_INSTANCE_ID

    # b leaves temporarily: it keeps its tasks, the group epoch stays
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "b1", -2, instance_id="inst-b"))
    assert (r.error, r.member_epoch) == (ErrorCode.NONE, -2)
    assert group.group_epoch == epoch and flatten(group.members["b1"].active) == b_tasks
    # the instance comes back under a new member id: b's tasks at once, no rebalance
    r = _join_static(m, "b2", "inst-b", "p2")
    assert r.error == ErrorCode.NONE and r.tasks is not None
    assert flatten(r.tasks[0]) == b_tasks and r.member_epoch == group.assignment_epoch
    assert set(group.members) == {"a1", "b2"} and group.group_epoch == epoch
    assert group.static_members == {"inst-a": "a1", "inst-b": "b2"}
    # the old member id is gone for good
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "b1", r.member_epoch))
    assert r.error == ErrorCode.UNKNOWN_MEMBER_ID

    # the records rebuild the replacement on another coordinator
    loaded = _replayed(written, topics).groups["app"]
    assert set(loaded.members) == {"a1", "b2"}
    assert loaded.static_members == {"inst-a": "a1", "inst-b": "b2"}
    assert flatten(loaded.members["b2"].active) == b_tasks and "b1" not in loaded.target


def test_a_static_member_that_left_loses_its_tasks_when_its_session_expires() -> None:
    m, sched = _manager(_ready())
    a = _join_static(m, "a1", "inst-a")
    assert a.tasks is not None
    m.heartbeat(sg.StreamsHeartbeatRequest("app", "a1", -2, instance_id="inst-a"))
    sched.advance(sg.StreamsGroupConfig().session_timeout_ms + 1)
    assert m.groups["app"].members == {} and m.groups["app"].static_members == {}
    r = _join_static(m, "a2", "inst-a")
    assert r.error == ErrorCode.NONE and r.tasks is not None and len(flatten(r.tasks[0])) == 8


def test_static_leave_needs_the_instance_id_and_the_owner() -> None:
    m, _ = _manager(_ready())
    _join_static(m, "a1", "inst-a")
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "a1", -2))
    assert (r.error, r.message) == (ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "zz", -2, instance_id="inst-a"))
    assert r.error == ErrorCode.FENCED_INSTANCE_ID
    r = m.heartbeat(sg.StreamsHeartbeatRequest("app", "zz", -2, instance_id="inst-x"))
    assert (r.error, r.message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Instance id inst-x is unknown.")


def test_group_configs_set_session_heartbeat_and_standbys() -> None:
    """streams.session.timeout.ms, streams.heartbeat.interval.ms and
    streams.num.standby.replicas of the group (GROUP config resource) override the broker's."""
    m, sched = _manager(_ready())
    configs = {
        "streams.session.timeout.ms": "6000",
        "streams.heartbeat.interval.ms": "1000",
        "streams.num.standby.replicas": "1",
    }
    m.group_configs = lambda group_id: configs if group_id == "app" else {}
    a = _join(m, "a", "p1")
    b = _join(m, "b", "p2")
    assert (a.heartbeat_interval_ms, b.heartbeat_interval_ms) == (1000, 1000)
    target = m.groups["app"].target
    standbys = sorted(t for _, standby in target.values() for t in flatten(standby))
    assert standbys == sorted((s, p) for s in "01" for p in range(4))  # one per task
    sched.advance(6001)
    assert m.groups["app"].members == {}


def test_a_changed_standby_count_reassigns_at_the_next_heartbeat() -> None:
    """Kafka's LastAssignmentConfig: streams.num.standby.replicas changed for a stable group
    gives a new target (with the standbys) at the next heartbeat, under a new group epoch."""
    m, _ = _manager(_ready())
    configs: dict[str, str] = {}
    m.group_configs = lambda _group_id: configs
    a = _join(m, "a", "p1")
    b = _join(m, "b", "p2")
    group = m.groups["app"]
    assert all(not standby for _, standby in group.target.values())
    epoch = group.group_epoch
    configs["streams.num.standby.replicas"] = "1"
    m.heartbeat(sg.StreamsHeartbeatRequest("app", "b", b.member_epoch))
    assert group.group_epoch == epoch + 1 and group.assignment_epoch == epoch + 1
    standbys = sorted(t for _, standby in group.target.values() for t in flatten(standby))
    assert standbys == sorted((s, p) for s in "01" for p in range(4))
    assert a.error == ErrorCode.NONE
