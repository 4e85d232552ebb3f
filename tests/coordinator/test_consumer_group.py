"""KIP-848 consumer groups: the heartbeat state machine (epochs, reconciliation, assignors,
static members, regex subscriptions, timeouts, offset-commit checks) and its records replayed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group.assignors import MemberSpec, range_assign, uniform_assign
from odradek.coordinator.group.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    GroupState,
    HeartbeatRequest,
    MemberState,
)
from odradek.coordinator.group.timers import ManualScheduler
from odradek.wire.errors import ErrorCode

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
GROUP = "g"


class Env:
    def __init__(self, **config: object) -> None:
        self.topics: dict[str, tuple[uuid.UUID, int]] = {"t1": (T1, 6)}
        self.scheduler = ManualScheduler()
        self.records: list[tuple[bytes, bytes | None]] = []
        self.mgr = ConsumerGroupManager(
            ConsumerGroupConfig(**config),  # type: ignore[arg-type]
            self.scheduler,
            lambda: self.topics,
            self.append,
        )
        self.owned: dict[str, dict[uuid.UUID, set[int]]] = {}
        self.epochs: dict[str, int] = {}

    def append(self, _group: str, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        self.records.extend(records)
        return ErrorCode.NONE

    def join(self, member: str, topics: list[str] | None = None, **kw: object):
        result = self.mgr.heartbeat(
            HeartbeatRequest(
                GROUP,
                member,
                0,
                rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30000),  # type: ignore[arg-type]
                subscribed_topic_names=topics if topics is not None else ["t1"],
                owned=[],
                **kw,  # type: ignore[arg-type]
            )
        )
        if result.error == ErrorCode.NONE:
            self._apply(member, result)
        return result

    def beat(self, member: str, owned: dict[uuid.UUID, set[int]] | None = None, **kw: object):
        owned = self.owned.get(member, {}) if owned is None else owned
        result = self.mgr.heartbeat(
            HeartbeatRequest(
                GROUP,
                member,
                kw.pop("epoch") if "epoch" in kw else self.epochs[member],  # type: ignore[arg-type]
                owned=[(t, sorted(p)) for t, p in owned.items()],
                **kw,  # type: ignore[arg-type]
            )
        )
        if result.error == ErrorCode.NONE:
            self._apply(member, result)
        return result

    def _apply(self, member: str, result) -> None:  # type: ignore[no-untyped-def]
        self.epochs[member] = result.member_epoch
        if result.assignment is not None:
            # the client: revokes at once, takes what it is given
            self.owned[member] = {t: set(p) for t, p in result.assignment.items()}

    def settle(self, members: list[str], rounds: int = 10) -> None:
        for _ in range(rounds):
            for m in members:
                assert self.beat(m).error == ErrorCode.NONE
                self.check_exclusive()
            group = self.mgr.get(GROUP)
            assert group is not None
            if group.state == GroupState.STABLE:
                return
        raise AssertionError(f"not stable: {self.mgr.get(GROUP)}")

    def check_exclusive(self) -> None:
        """No partition is owned by two members at once (the point of reconciliation)."""
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for member, owned in self.owned.items():
            for t, parts in owned.items():
                for p in parts:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {member}"
                    seen[(t, p)] = member

    def count(self, member: str) -> int:
        return sum(len(p) for p in self.owned.get(member, {}).values())


def leading_coordinator(topics: dict[str, tuple[uuid.UUID, int]], **config: object) -> Any:
    """A GroupCoordinator of one partition, loaded and led here, over `topics`; the consumer-group
    records it writes are dropped (tests replace the other appends they need)."""
    from odradek.coordinator.group.coordinator import GroupCoordinator, GroupCoordinatorConfig

    class Part:
        is_leader = True

    coord = GroupCoordinator(
        GroupCoordinatorConfig(num_partitions=1, **config),  # type: ignore[arg-type]
        get_partition=lambda _i: Part(),
        partition_count=lambda: 1,
        scheduler=ManualScheduler(),
        topics=lambda: dict(topics),
    )
    coord.active = True
    coord.loaded.add(0)
    coord.consumer.append = lambda _g, _r: ErrorCode.NONE
    return coord


def test_first_member_gets_everything_at_epoch_one() -> None:
    env = Env()
    result = env.join("a")
    assert result.error == ErrorCode.NONE
    assert result.member_epoch == 1
    assert result.assignment == {T1: set(range(6))}
    assert result.heartbeat_interval_ms == 5000
    group = env.mgr.get(GROUP)
    assert group is not None and group.state == GroupState.STABLE
    # a plain heartbeat carries no assignment (nothing changed)
    assert env.beat("a").assignment is None


def test_a_partition_is_revoked_before_it_is_assigned_elsewhere() -> None:
    env = Env()
    env.join("a")
    joined = env.join("b")
    assert joined.member_epoch == 2
    assert joined.assignment == {}  # its partitions are still a's
    group = env.mgr.get(GROUP)
    assert group is not None and group.state == GroupState.RECONCILING
    assert group.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    # a is asked to revoke and stays at epoch 1 until it does
    revoke = env.beat("a", owned={T1: set(range(6))})
    assert revoke.member_epoch == 1
    assert revoke.assignment is not None and len(revoke.assignment[T1]) == 3
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert env.beat("b").assignment is None  # nothing released yet
    env.check_exclusive()
    env.settle(["a", "b"])
    assert env.count("a") == env.count("b") == 3
    assert env.epochs == {"a": 2, "b": 2}


def test_three_members_split_and_one_leaves() -> None:
    env = Env()
    for m in "abc":
        env.join(m)
        env.settle(list(env.epochs))
    assert sorted(env.count(m) for m in "abc") == [2, 2, 2]
    left = env.mgr.heartbeat(HeartbeatRequest(GROUP, "c", -1))
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    del env.owned["c"], env.epochs["c"]
    env.settle(["a", "b"])
    assert env.count("a") == env.count("b") == 3


def test_session_timeout_fences_and_rebalance_timeout_fences() -> None:
    env = Env(session_timeout_ms=1000)
    env.join("a")
    env.join("b")
    env.settle(["a", "b"])
    env.scheduler.advance(600)
    env.beat("a")
    env.scheduler.advance(600)  # b's session expires, a's does not
    group = env.mgr.get(GROUP)
    assert group is not None and set(group.members) == {"a"}
    assert env.beat("b").error == ErrorCode.UNKNOWN_MEMBER_ID
    env.owned.pop("b")
    env.settle(["a"])
    assert env.count("a") == 6
    # a member that does not revoke within its rebalance timeout is fenced
    env2 = Env()
    env2.join("a", rebalance_timeout_ms=500)
    env2.join("b")
    env2.beat("a", owned={T1: set(range(6))})  # told to revoke; keeps owning
    env2.scheduler.advance(300)
    env2.beat("a", owned={T1: set(range(6))})  # heartbeats do not push the deadline back
    env2.scheduler.advance(201)
    group = env2.mgr.get(GROUP)
    assert group is not None and set(group.members) == {"b"}


def test_member_epoch_checks() -> None:
    env = Env()
    env.join("a")
    assert env.beat("a", epoch=5).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert env.beat("zzz", epoch=1).error == ErrorCode.UNKNOWN_MEMBER_ID
    # offset commits: the current epoch only (OffsetCommit v9), older versions refused
    assert env.mgr.validate_offset_commit(GROUP, "a", 1, 9) is None
    assert env.mgr.validate_offset_commit(GROUP, "a", 0, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert env.mgr.validate_offset_commit(GROUP, "x", 1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert env.mgr.validate_offset_commit(GROUP, "a", 1, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert env.mgr.validate_offset_commit(GROUP, "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert env.mgr.validate_offset_commit("other", "", -1, 9) is None


def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    env = Env()
    env.join("a", instance_id="ia")
    env.join("b", instance_id="ib")
    env.settle(["a", "b"])
    group = env.mgr.get(GROUP)
    assert group is not None
    epoch = group.group_epoch
    before = env.owned["a"]
    left = env.mgr.heartbeat(HeartbeatRequest(GROUP, "a", -2, instance_id="ia"))
    assert left.member_epoch == -2
    # another member with the same instance id while a is still registered is refused
    assert env.join("a2", instance_id="ib").error == ErrorCode.UNRELEASED_INSTANCE_ID
    back = env.join("a2", instance_id="ia")
    assert back.error == ErrorCode.NONE
    assert back.assignment == before
    assert group.group_epoch == epoch  # no rebalance
    assert "a" not in group.members and group.static_members["ia"] == "a2"
    env.owned.pop("a")
    env.epochs.pop("a")
    env.settle(["a2", "b"])


def test_regex_subscription_picks_up_a_new_topic() -> None:
    env = Env()
    result = env.join("a", topics=[], subscribed_topic_regex="t.*")
    assert result.assignment == {T1: set(range(6))}
    env.topics["t2"] = (T2, 2)
    env.topics["other"] = (uuid.UUID(int=3), 1)
    got = env.beat("a")
    assert got.assignment == {T1: set(range(6)), T2: {0, 1}}
    bad = env.join("b", topics=[], subscribed_topic_regex="(")
    assert bad.error == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_assignor_choice() -> None:
    env = Env()
    assert env.join("a", server_assignor="nope").error == ErrorCode.UNSUPPORTED_ASSIGNOR
    env.join("a", server_assignor="range")
    group = env.mgr.get(GROUP)
    assert group is not None and group.assignor == "range"
    env2 = Env()
    env2.join("a")
    assert env2.mgr.get(GROUP).assignor == "uniform"  # type: ignore[union-attr]


def test_assignors_balance_and_stick() -> None:
    members = {m: MemberSpec({T1, T2}) for m in "abc"}
    parts = {T1: 4, T2: 3}
    out = uniform_assign(members, parts)
    assert sorted(sum(len(p) for p in a.values()) for a in out.values()) == [2, 2, 3]
    # a fourth member: the others keep what they can
    members = {m: MemberSpec({T1, T2}, out[m]) for m in "abc"}
    members["d"] = MemberSpec({T1, T2})
    again = uniform_assign(members, parts)
    for m in "abc":
        kept = sum(len(again[m].get(t, set()) & out[m].get(t, set())) for t in parts)
        assert kept >= 1
    assert sorted(sum(len(p) for p in a.values()) for a in again.values()) == [1, 2, 2, 2]
    ranged = range_assign({m: MemberSpec({T1}) for m in "ab"}, {T1: 5})
    assert ranged == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}}
    hetero = uniform_assign({"a": MemberSpec({T1}), "b": MemberSpec({T1, T2})}, parts)
    assert hetero["b"][T2] == {0, 1, 2}
    assert sum(len(p) for p in hetero["a"].values()) >= 2


def test_records_replay_to_the_same_state() -> None:
    env = Env()
    env.join("a", instance_id="ia", server_assignor="range")
    env.join("b")
    env.beat("a", owned={T1: set(range(6))})
    group = env.mgr.get(GROUP)
    assert group is not None
    fresh = ConsumerGroupManager(ConsumerGroupConfig(), ManualScheduler(), lambda: env.topics)
    for key, value in env.records:
        decoded = crec.decode_key(key)
        assert decoded is not None
        fresh.replay_record(decoded, value)
    fresh.on_loaded({GROUP})
    loaded = fresh.get(GROUP)
    assert loaded is not None
    assert loaded.group_epoch == group.group_epoch
    assert loaded.assignment_epoch == group.assignment_epoch
    assert loaded.target == group.target
    assert loaded.subscription_metadata == group.subscription_metadata
    assert loaded.owners == group.owners
    assert loaded.static_members == {"ia": "a"}
    assert loaded.assignor == "range"
    for member_id, m in group.members.items():
        assert loaded.members[member_id] == m
    # a member leaving is gone after replay too
    env.mgr.heartbeat(HeartbeatRequest(GROUP, "b", -1))
    again = ConsumerGroupManager(ConsumerGroupConfig(), ManualScheduler(), lambda: env.topics)
    for key, value in env.records:
        again.replay_record(crec.decode_key(key), value)  # type: ignore[arg-type]
    assert set(again.groups[GROUP].members) == {"a"}


def test_record_keys_are_kafkas() -> None:
    """Key versions 3-8 as Kafka's coordinator writes them, values version 0."""
    key, value = crec.group_metadata("g", 7)
    assert key == b"\x00\x03\x00\x01g"
    assert value == b"\x00\x00\x00\x00\x00\x07\x00"
    key, _ = crec.member_tombstones("g", "m")[0]
    assert key == b"\x00\x08\x00\x01g\x00\x01m"


@pytest.mark.parametrize("bad", [{"member_epoch": -3}, {"rebalance_timeout_ms": -1}])
def test_invalid_requests(bad: dict[str, int]) -> None:
    env = Env()
    req = HeartbeatRequest(
        GROUP, "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned=[]
    )
    for k, v in bad.items():
        setattr(req, k, v)
    assert env.mgr.heartbeat(req).error == ErrorCode.INVALID_REQUEST


def test_offset_fetch_checks_and_coordinator_wiring() -> None:
    """OffsetFetch v9 with a member epoch; commits through the coordinator are checked against
    the member epoch and stored; a classic JoinGroup for a live consumer group is refused."""
    import asyncio

    from odradek.coordinator.group.metadata import OffsetAndMetadata

    env = Env()
    env.join("a")
    assert env.mgr.validate_offset_fetch(GROUP, "a", 1) is None
    assert env.mgr.validate_offset_fetch(GROUP, "a", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert env.mgr.validate_offset_fetch(GROUP, "b", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert env.mgr.validate_offset_fetch(GROUP, None, -1) is None

    coord = leading_coordinator({"t1": (T1, 2)})
    written: list[object] = []
    coord._append = lambda group_id, records, **kw: written.append(records) or ErrorCode.NONE  # type: ignore[method-assign]
    coord.consumer.append = coord._append
    coord.machine.append = coord._append  # type: ignore[method-assign]
    joined = coord.consumer_heartbeat(
        HeartbeatRequest(
            GROUP, "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned=[]
        )
    )
    assert joined.member_epoch == 1
    om = OffsetAndMetadata(5, -1, "", 0, -1)
    assert coord.commit_offsets(GROUP, "m", None, 0, {("t1", 0): om}, 9) == {
        ("t1", 0): ErrorCode.STALE_MEMBER_EPOCH
    }
    assert coord.commit_offsets(GROUP, "m", None, 1, {("t1", 0): om}, 9) == {
        ("t1", 0): ErrorCode.NONE
    }
    error, fetched = coord.fetch_offsets(GROUP, None, False)
    assert error == ErrorCode.NONE and [(f.topic, f.partition, f.offset) for f in fetched] == [
        ("t1", 0, 5)
    ]
    listed = coord.list_groups([], [])[1]
    assert listed == [(GROUP, "consumer", "Stable", "consumer")]
    assert coord.list_groups([], ["classic"])[1] == []
    # a classic JoinGroup joins the consumer group as a classic member (KIP-848 migration):
    # a member id first, then a subscription it can read, of the consumer protocol type
    result = asyncio.run(
        coord.join_group(
            GROUP, "", None, True, False, "c", "h", 1000, 6000, "consumer", [("range", b"")]
        )
    )
    assert result.error == ErrorCode.MEMBER_ID_REQUIRED and result.member_id
    for protocol_type, metadata in (("consumer", b""), ("connect", b"\x00\x00\x00\x00\x00\x00")):
        result = asyncio.run(
            coord.join_group(
                GROUP,
                "x",
                None,
                True,
                False,
                "c",
                "h",
                1000,
                6000,
                protocol_type,
                [("range", metadata)],
            )
        )
        assert result.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_only_changes_are_written_and_a_static_replacement_replays() -> None:
    env = Env()
    env.join("a", instance_id="ia")
    env.join("b")
    env.settle(["a", "b"])
    before = len(env.records)
    env.beat("a")
    env.beat("b")
    assert len(env.records) == before  # plain heartbeats write nothing
    env.mgr.heartbeat(HeartbeatRequest(GROUP, "a", -2, instance_id="ia"))
    env.join("a2", instance_id="ia")
    fresh = ConsumerGroupManager(ConsumerGroupConfig(), ManualScheduler(), lambda: env.topics)
    for key, value in env.records:
        fresh.replay_record(crec.decode_key(key), value)  # type: ignore[arg-type]
    fresh.on_loaded({GROUP})
    loaded = fresh.groups[GROUP]
    group = env.mgr.get(GROUP)
    assert group is not None
    assert set(loaded.members) == {"a2", "b"} == set(group.members)
    assert loaded.static_members == {"ia": "a2"}
    assert loaded.target == group.target
    assert loaded.members["a2"] == group.members["a2"]


def test_delete_groups_and_offsets_of_a_consumer_group() -> None:
    from odradek.coordinator.group.metadata import OffsetAndMetadata

    coord = leading_coordinator({"t1": (T1, 2), "t2": (T2, 1)})
    coord.machine.append = lambda _g, _r, **_kw: ErrorCode.NONE  # type: ignore[method-assign]
    coord.consumer_heartbeat(
        HeartbeatRequest(
            GROUP, "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned=[]
        )
    )
    om = OffsetAndMetadata(5, -1, "", 0, -1)
    offsets = {("t1", 0): om, ("t2", 0): om}
    assert set(coord.commit_offsets(GROUP, "m", None, 1, offsets, 9).values()) == {ErrorCode.NONE}
    error, results = coord.delete_offsets(GROUP, [("t1", 0), ("t2", 0)])
    assert error == ErrorCode.NONE
    assert results == {
        ("t1", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("t2", 0): ErrorCode.NONE,
    }
    assert coord.delete_groups([GROUP]) == {GROUP: ErrorCode.NON_EMPTY_GROUP}
    coord.consumer_heartbeat(HeartbeatRequest(GROUP, "m", -1))
    assert coord.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
    assert coord.consumer.get(GROUP) is None and coord.machine.get(GROUP) is None


def test_transactional_commit_checks_the_member_epoch() -> None:
    from odradek.coordinator.group.metadata import OffsetAndMetadata

    coord = leading_coordinator({"t1": (T1, 2)})
    coord._append = lambda _g, _r, **_kw: ErrorCode.NONE  # type: ignore[method-assign]
    coord.consumer_heartbeat(
        HeartbeatRequest(
            GROUP, "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned=[]
        )
    )
    om = {("t1", 0): OffsetAndMetadata(5, -1, "", 0, -1)}
    assert coord.txn_offset_commit(GROUP, 7, 0, "m", None, 0, om) == {
        ("t1", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert coord.txn_offset_commit(GROUP, 7, 0, "x", None, 1, om) == {
        ("t1", 0): ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert coord.txn_offset_commit(GROUP, 7, 0, "m", None, 1, om) == {("t1", 0): ErrorCode.NONE}


def test_coordinator_counts_consumer_groups_and_their_rebalances() -> None:
    coord = leading_coordinator({"t1": (T1, 2)})
    assert (coord.group_count, coord.rebalances) == (0, 0)
    for member in ("m1", "m2"):
        coord.consumer_heartbeat(
            HeartbeatRequest(
                GROUP, member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned=[]
            )
        )
    assert (coord.group_count, coord.rebalances) == (1, 2)


@pytest.mark.parametrize(
    ("policy", "upgrade", "downgrade"),
    [("disabled", False, False), ("upgrade", True, False), ("bidirectional", True, True)],
)
def test_migration_policy(policy: str, upgrade: bool, downgrade: bool) -> None:
    """group.consumer.migration.policy: an empty classic group taken over by a consumer-protocol
    member (upgrade), an empty consumer group by a classic member (downgrade)."""
    from odradek.coordinator.group.metadata import OffsetAndMetadata

    coord = leading_coordinator(
        {"t1": (T1, 2)}, consumer=ConsumerGroupConfig(migration_policy=policy)
    )
    coord._append = lambda _g, _r, **_kw: ErrorCode.NONE  # type: ignore[method-assign]
    coord.machine.append = lambda _g, _r, **_kw: ErrorCode.NONE  # type: ignore[method-assign]
    # an empty classic group (committed offsets only)
    om = {("t1", 0): OffsetAndMetadata(5, -1, "", 0, -1)}
    assert coord.commit_offsets("old", "", None, -1, om, 9) == {("t1", 0): ErrorCode.NONE}

    def join(group: str, member: str) -> ErrorCode:
        return coord.consumer_heartbeat(
            HeartbeatRequest(
                group, member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned=[]
            )
        ).error

    assert join("old", "m") == (ErrorCode.NONE if upgrade else ErrorCode.GROUP_ID_NOT_FOUND)
    # an empty consumer group, then a classic JoinGroup
    assert join("new", "m") == ErrorCode.NONE
    coord.consumer_heartbeat(HeartbeatRequest("new", "m", -1))
    # (JoinGroup's first check; the join itself waits for the rebalance, not run here)
    allowed = coord._classic_allowed("new")
    if downgrade:
        assert allowed is None
        assert coord.consumer.get("new") is None
    else:
        assert allowed == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
