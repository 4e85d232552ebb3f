"""Two cooperative-sticky consumers whose subscribed topic is deleted while they rebalance.

Kafka's classic group coordinator knows nothing of topics: the consumers learn of the deletion
from Metadata (the topic is gone, UNKNOWN_TOPIC_OR_PARTITION), the leader rejoins because its
subscription's metadata changed, a JoinGroup from the leader of a Stable group starts a new
generation, and the next assignment covers only what still exists. With librdkafka's
cooperative-sticky assignor that takes a generation or two (KIP-429: revoke, then assign), so the
group settles well within a session timeout after the consumers see the new metadata.

Here the rebalance that adds the second member is held (SyncGroup delayed) while the first of
the two subscribed topics is deleted; the second topic keeps the group busy. The group must
become Stable with both members and the remaining topic's partitions each owned once, within
two session timeouts (a bound to wait for, not a timing claim). The consumers refresh metadata
every second (librdkafka's default is five minutes, which a test cannot wait for).
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from compat_tests.harness import unique_name
from odradek.testing import Broker

pytestmark = pytest.mark.compat

PARTITIONS = 4
SESSION_MS = 6000
HOLD_MS = 2000


def consumer(bootstrap: str, group: str, name: str, topics: list[str]) -> ck.Consumer:
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": SESSION_MS,
            "topic.metadata.refresh.interval.ms": 1000,
            "enable.auto.commit": False,
        }
    )
    c.subscribe(topics)
    return c


def owned(c: ck.Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def describe(admin: AdminClient, group: str) -> tuple[str, list[set[tuple[str, int]]]]:
    """The group's state and each member's assignment, as the coordinator describes them."""
    desc = admin.describe_consumer_groups([group])[group].result(10)
    members = [
        {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} for m in desc.members
    ]
    return desc.state.name, members


def test_group_settles_when_a_subscribed_topic_is_deleted_mid_rebalance() -> None:
    config = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
    gone, stays, group = unique_name("gone"), unique_name("stays"), unique_name("group")
    with Broker(topics={gone: PARTITIONS, stays: PARTITIONS}, config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        everything = {(t, p) for t in (gone, stays) for p in range(PARTITIONS)}
        c1 = consumer(broker.bootstrap, group, "c1", [gone, stays])
        consumers = [c1]
        try:
            deadline = time.monotonic() + 30
            while owned(c1) != everything:
                assert time.monotonic() < deadline, f"c1 owns {sorted(owned(c1))}"
                c1.poll(0.1)

            held = broker.call(lambda s: s.faults.injected)
            broker.delay("sync_group", HOLD_MS, count=2)
            c2 = consumer(broker.bootstrap, group, "c2", [gone, stays])
            consumers.append(c2)
            while broker.call(lambda s: s.faults.injected) == held:  # a SyncGroup is held
                assert time.monotonic() < deadline, "the second member's rebalance never began"
                c1.poll(0.05)
                c2.poll(0.05)
            admin.delete_topics([gone])[gone].result(10)

            wanted = {(stays, p) for p in range(PARTITIONS)}
            deadline = time.monotonic() + 2 * SESSION_MS / 1000
            while True:
                for c in consumers:
                    c.poll(0.1)
                a1, a2 = owned(c1), owned(c2)
                state, members = describe(admin, group)
                settled = (
                    state == "STABLE"
                    and len(members) == 2
                    and all(members)
                    and sorted(members, key=sorted) == sorted([a1, a2], key=sorted)
                    and a1 | a2 == wanted
                    and not a1 & a2
                )
                if settled:
                    break
                assert time.monotonic() < deadline, (
                    f"not settled: group {state} members {members}, "
                    f"c1 {sorted(a1)}, c2 {sorted(a2)}"
                )
        finally:
            for c in consumers:
                c.close()
