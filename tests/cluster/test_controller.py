"""Leader elections over the in-process metadata store: offline partitions, dead ISR members,
unclean elections, controlled shutdown and ElectLeaders."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.broker.cluster.controller import PREFERRED, UNCLEAN, Controller
from odradek.broker.cluster.metadata_store import (
    BrokerRegistration,
    LocalMetadataStore,
    PartitionState,
    TopicInfo,
)
from odradek.wire.errors import ErrorCode


@pytest.fixture
def store(tmp_path: Path) -> LocalMetadataStore:
    s = LocalMetadataStore.for_cluster(str(tmp_path))
    for node in (0, 1, 2):
        s.register_broker(BrokerRegistration(node, "127.0.0.1", 9000 + node))
    s.create_topic(
        TopicInfo(
            "t",
            uuid.uuid4(),
            [
                PartitionState([0, 1, 2], 0, 0, [0, 1, 2]),
                PartitionState([1, 2, 0], 1, 0, [1, 2]),
                PartitionState([2, 0, 1], 2, 0, [2]),
            ],
        )
    )
    return s


def controller(store: LocalMetadataStore, unclean: bool = False) -> Controller:
    c = Controller(store, 0, lambda topic: unclean)
    c.observe()  # learn the registrations
    return c


def state(store: LocalMetadataStore, idx: int) -> PartitionState:
    return store.topics["t"].partitions[idx]


def test_lowest_live_broker_is_the_controller(store: LocalMetadataStore) -> None:
    assert store.controller_id() == 0
    store.unregister_broker(0)
    assert store.controller_id() == 1


def test_dead_leader_is_replaced_from_the_isr_in_assignment_order(store) -> None:
    c = controller(store)
    store.unregister_broker(0)
    c1 = Controller(store, 1, lambda t: False)
    c1.known = dict(c.known)
    c1.on_brokers_changed()
    st = state(store, 0)
    assert (st.leader, st.leader_epoch, st.isr) == (1, 1, [1, 2])
    assert state(store, 1).isr == [1, 2]  # follower 0 was not in that ISR anyway
    assert state(store, 0).partition_epoch == 1


def test_no_isr_member_left_keeps_the_partition_offline(store) -> None:
    c = controller(store)
    store.unregister_broker(2)
    c.on_brokers_changed()
    st = state(store, 2)
    assert (st.leader, st.leader_epoch, st.isr) == (2, 0, [2])  # offline: last state kept
    # it comes back: elected again in a new epoch
    store.register_broker(BrokerRegistration(2, "127.0.0.1", 9002))
    c.on_brokers_changed()
    st = state(store, 2)
    assert (st.leader, st.leader_epoch) == (2, 1)


def test_unclean_election_picks_a_live_replica_outside_the_isr(store) -> None:
    c = controller(store, unclean=True)
    store.unregister_broker(2)
    c.on_brokers_changed()
    st = state(store, 2)
    assert (st.leader, st.leader_epoch, st.isr) == (0, 1, [0])


def test_dead_follower_leaves_the_isr_without_a_new_epoch(store) -> None:
    c = controller(store)
    store.unregister_broker(2)
    c.on_brokers_changed()
    st = state(store, 0)
    assert (st.leader, st.leader_epoch, st.isr) == (0, 0, [0, 1])


def test_controlled_shutdown_moves_leadership_and_leaves_isrs(store) -> None:
    c = controller(store)
    stuck = c.controlled_shutdown(1)
    assert stuck == 0
    assert (state(store, 0).leader, state(store, 0).isr) == (0, [0, 2])
    assert (state(store, 1).leader, state(store, 1).leader_epoch, state(store, 1).isr) == (
        2,
        1,
        [2],
    )
    assert c.controlled_shutdown(2) == 2  # sole ISR member of two partitions now


def test_preferred_election(store) -> None:
    c = controller(store)
    c.controlled_shutdown(1)
    # 1 is back in the ISR of partition 1 (as after catching up), not leading it
    st = state(store, 1)
    store.update_partitions(
        [
            (
                "t",
                1,
                PartitionState(st.replicas, 2, st.leader_epoch, [2, 1]),
                st.leader_epoch,
                st.partition_epoch,
            )
        ]
    )
    results = c.elect([("t", 0), ("t", 1), ("t", 2), ("t", 9), ("nope", 0)], PREFERRED)
    assert results[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    assert results[("t", 1)][0] == ErrorCode.NONE
    assert state(store, 1).leader == 1 and state(store, 1).leader_epoch == 2
    assert results[("t", 2)][0] == ErrorCode.ELECTION_NOT_NEEDED
    assert results[("t", 9)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_preferred_leader_outside_the_isr_is_not_available(store) -> None:
    c = controller(store)
    results = c.elect([("t", 1)], PREFERRED)
    assert results[("t", 1)][0] == ErrorCode.ELECTION_NOT_NEEDED
    st = state(store, 0)
    store.update_partitions([("t", 0, PartitionState(st.replicas, 1, 1, [1, 2]), 0, 0)])
    assert c.elect([("t", 0)], PREFERRED)[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_requested_unclean_election(store) -> None:
    c = controller(store)
    assert c.elect([("t", 2)], UNCLEAN)[("t", 2)][0] == ErrorCode.ELECTION_NOT_NEEDED
    store.unregister_broker(2)  # nobody reacts: the partition has no live leader
    assert c.elect([("t", 2)], UNCLEAN)[("t", 2)][0] == ErrorCode.NONE
    assert (state(store, 2).leader, state(store, 2).isr) == (0, [0])


def test_bounced_leader_hands_over_and_leaves_the_isr(store) -> None:
    """A broker back under a new broker epoch before anyone saw it go (restarted within its
    session, perhaps after losing power) is treated as gone first, as Kafka's controller treats
    a bounced broker: another in-sync replica leads, and it leaves the ISR until caught up."""
    c = Controller(store, 2, lambda t: False)
    c.observe()
    store.register_broker(BrokerRegistration(1, "127.0.0.1", 9001))  # 1 again, a new epoch
    c.known[2] = store.broker(2).broker_epoch  # type: ignore[union-attr]
    c1 = Controller(store, 0, lambda t: False)
    c1.known = dict(c.known)
    c1.on_brokers_changed()
    st = state(store, 1)  # led by 1 with ISR [1, 2]
    assert (st.leader, st.leader_epoch, st.isr) == (2, 1, [2])
    assert state(store, 0).isr == [0, 2]  # a follower that bounced leaves the ISR too
    st = state(store, 2)  # 2 did not bounce: untouched
    assert (st.leader, st.leader_epoch, st.isr) == (2, 0, [2])


def test_bounced_last_isr_member_leads_again(store) -> None:
    c = controller(store)
    store.register_broker(BrokerRegistration(2, "127.0.0.1", 9002))  # 2 again, a new epoch
    c.on_brokers_changed()
    st = state(store, 2)  # ISR [2]: nobody else has its data
    assert (st.leader, st.leader_epoch, st.isr) == (2, 1, [2])
