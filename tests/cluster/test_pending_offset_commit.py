"""An offset commit, and a group's assignment, are visible only once the ISR holds them (issue
11, chaos finding, seed 125).

The coordinator used to put an OffsetCommit into its cache as soon as it was in the leader's
log, and OffsetFetch answered from that cache while the handler still waited for the followers:
a client could read offset 23, the leader died before replicating it, and the new coordinator
answered 20 - the committed offset moved back. As Kafka (GroupMetadata.pendingOffsetCommits,
materialised in onOffsetCommitAppend), the commit stays pending until replicated: OffsetFetch
answers the previous offset meanwhile, and require_stable (v7+) UNSTABLE_OFFSET_COMMIT.

Deterministic: the coordinator is cut off from its peers (the followers cannot fetch the commit)
and followers stay in the ISR for a minute, so the commit's wait cannot end during the test."""

from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer.group import OffsetFetchRequest, SyncGroupRequest

from compat_tests.harness import find_coordinator, offset_commit_request
from compat_tests.test_internal_topics_hostile import join
from odradek.coordinator.group.records import partition_for
from odradek.testing.raw import RawClient
from odradek.wire.errors import ErrorCode

OFFSETS = "__consumer_offsets"
CONFIG = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 1,
    "replica.lag.time.max.ms": 60_000,  # the cut-off followers stay in the ISR
    "offsets.commit.timeout.ms": 60_000,
}
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)


def fetch(cluster, node: int, group: str, require_stable: bool = False) -> tuple[int, int]:
    """(error, offset) of t-0 from `node`, once it coordinates the group."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    req = OffsetFetchRequest(
        group_id=group, topics=[T(name="t", partition_indexes=[0])], require_stable=require_stable
    )
    out: list[tuple[int, int]] = []

    def answered() -> bool:
        with RawClient(cluster.address(node)) as client:
            resp = client.request(req, 7)
        if resp.error_code in RETRIABLE:
            return False
        assert resp.error_code == ErrorCode.NONE, resp
        (part,) = resp.topics[0].partitions
        out.append((part.error_code, part.committed_offset))
        return True

    cluster.wait_until(answered, what=f"OffsetFetch from broker {node}")
    return out[-1]


def commit(cluster, node: int, group: str, offset: int) -> int:
    with RawClient(cluster.address(node)) as client:
        (part,) = (
            client.request(offset_commit_request(group, "t", {0: offset}), 7).topics[0].partitions
        )
    return part.error_code


def test_an_unreplicated_commit_is_never_seen_and_never_moves_back(make_cluster):
    cluster = make_cluster(3, config=CONFIG)
    cluster.create_topic("t", 1, 1)
    group = "seed-125"
    with RawClient(cluster.address(0)) as client:
        find_coordinator(client, group, 0)
    index = partition_for(group, 1)
    cluster.wait_for_isr(OFFSETS, index, size=3)
    victim = cluster.wait_for_leader(OFFSETS, index)

    # a replicated commit is answered and visible
    assert commit(cluster, victim, group, 20) == ErrorCode.NONE
    assert fetch(cluster, victim, group) == (ErrorCode.NONE, 20)
    assert fetch(cluster, victim, group, require_stable=True) == (ErrorCode.NONE, 20)

    cluster.wait_for_replication(OFFSETS, index)
    end = cluster.log_end_offset(victim, OFFSETS, index)
    cluster.cut_off_peers(victim)
    pending = RawClient(cluster.address(victim))
    try:
        _cid, data = pending.encode(offset_commit_request(group, "t", {0: 23}), 7)
        pending.send(data)  # its answer waits for followers that cannot fetch
        cluster.wait_until(
            lambda: cluster.log_end_offset(victim, OFFSETS, index) > end,
            what="the commit of 23 in the coordinator's log",
        )
        # before the fix: (NONE, 23), an offset the next coordinator does not have
        assert fetch(cluster, victim, group) == (ErrorCode.NONE, 20)
        error, _ = fetch(cluster, victim, group, require_stable=True)
        assert error == ErrorCode.UNSTABLE_OFFSET_COMMIT

        cluster.kill(victim)
    finally:
        pending.close()
    successor = cluster.wait_for_leader(OFFSETS, index, not_on=victim)
    assert fetch(cluster, successor, group) == (ErrorCode.NONE, 20)
    assert fetch(cluster, successor, group, require_stable=True) == (ErrorCode.NONE, 20)


def describe(cluster, node: int, group: str) -> tuple[str, list[bytes]]:
    """(state, member assignments) of `group` as DescribeGroups on `node` answers it."""
    with RawClient(cluster.address(node)) as client:
        (described,) = client.request(DescribeGroupsRequest(groups=[group]), 0).groups
    assert described.error_code == ErrorCode.NONE, described
    return described.group_state, [bytes(m.member_assignment) for m in described.members]


def test_an_unreplicated_assignment_is_never_handed_out(make_cluster):
    """As Kafka's storeGroup callback: the group stays CompletingRebalance, and no member is
    given its assignment, until the leader's SyncGroup record is replicated; the coordinator
    dies before that, so what any member saw is what its successor has."""
    cluster = make_cluster(3, config=CONFIG)
    group = "sync-unreplicated"
    with RawClient(cluster.address(0)) as client:
        find_coordinator(client, group, 0)
    index = partition_for(group, 1)
    cluster.wait_for_isr(OFFSETS, index, size=3)
    victim = cluster.wait_for_leader(OFFSETS, index)
    with RawClient(cluster.address(victim)) as client:
        member, generation = join(client, group)
    cluster.wait_for_replication(OFFSETS, index)
    end = cluster.log_end_offset(victim, OFFSETS, index)

    cluster.cut_off_peers(victim)
    pending = RawClient(cluster.address(victim))
    try:
        A = SyncGroupRequest.SyncGroupRequestAssignment
        req = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            assignments=[A(member_id=member, assignment=b"assigned")],
        )
        _cid, data = pending.encode(req, 2)
        pending.send(data)  # its answer waits for followers that cannot fetch
        cluster.wait_until(
            lambda: cluster.log_end_offset(victim, OFFSETS, index) > end,
            what="the group's assignment record in the coordinator's log",
        )
        # before the fix: ("Stable", [b"assigned"]), served before any follower had it
        assert describe(cluster, victim, group) == ("CompletingRebalance", [b""])
        cluster.kill(victim)
    finally:
        pending.close()
    successor = cluster.wait_for_leader(OFFSETS, index, not_on=victim)
    cluster.wait_until(
        lambda: describe(cluster, successor, group)[0] in ("Dead", "Empty"),
        what="the successor's view of the group",
    )
