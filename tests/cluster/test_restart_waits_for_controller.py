"""A restarted broker leads nothing until the controller has answered its new registration, as
Kafka's broker waits for the LeaderAndIsr the controller sends on a broker's startup: what the
store says it led was decided before the restart (with ZooKeeper the controller may react late,
e.g. while it is cut off), and leading in that old epoch let a log that lost its unflushed tail
serve produce and fetch as leader."""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.cluster.local_cluster import LocalCluster
from odradek.broker.partitions.partition import Partition


def _partition(c: LocalCluster, node: int, topic: str, idx: int) -> Partition | None:
    broker = c.brokers[node]
    assert broker is not None
    return broker.topics.partitions.get((topic, idx))


def test_restarted_last_isr_member_waits_for_the_controller_then_leads(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("t", 3, 1)  # one replica each: its broker is the last ISR member
    idx = next(i for i in range(3) if cluster.partition("t", i).leader == 2)
    cluster.kill(2)
    before = cluster.partition("t", idx)
    assert (before.leader, before.isr) == (2, [2])  # offline, its last state kept

    deferred: list[Callable[[], None]] = []

    def hold_controller(c: LocalCluster) -> None:
        broker = c.brokers[0]
        assert broker is not None and broker.replication is not None
        ctl = broker.replication.controller
        assert ctl.active
        deferred.append(ctl.on_brokers_changed)
        ctl.on_brokers_changed = lambda: None  # type: ignore[method-assign]

    cluster.call(hold_controller)
    cluster.start_broker(2)

    def role(c: LocalCluster) -> tuple[bool, int]:
        part = _partition(c, 2, "t", idx)
        assert part is not None
        return part.is_leader, part.leader_epoch

    # the controller has not reacted: broker 2 must not lead in its old epoch
    assert cluster.call(role) == (False, before.leader_epoch)

    def release(c: LocalCluster) -> None:
        broker = c.brokers[0]
        assert broker is not None and broker.replication is not None
        ctl = broker.replication.controller
        ctl.on_brokers_changed = deferred[0]  # type: ignore[method-assign]
        ctl.on_brokers_changed()

    cluster.call(release)
    # the controller elects it again (nobody else has the data), in a new epoch
    after = cluster.partition("t", idx)
    assert (after.leader, after.leader_epoch) == (2, before.leader_epoch + 1)
    cluster.wait_until(
        lambda: cluster.call(role) == (True, before.leader_epoch + 1),
        10,
        "broker 2 to lead in the new epoch",
    )
