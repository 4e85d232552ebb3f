"""A controller that becomes active sees the restarts its predecessor left unanswered, as
Kafka's onControllerFailover reads every registration and partition state: a leader registered
again (kill -9 or power loss, then a restart) after its partition's state was written must not
go on leading in that state's epoch, or the restarted broker waits for ever for an election (it
leads only in a newer epoch) and its replicas never get back in sync."""

from __future__ import annotations

import itertools
import uuid

import pytest

from odradek.broker.cluster.controller import Controller
from odradek.broker.cluster.metadata_store import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    TopicInfo,
)
from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore
from odradek.testing.zookeeper import ZooKeeperServer
from tests.cluster.zk_helpers import SESSION_MS, eventually, run

_chroots = itertools.count()


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect(f"/failover-test-{next(_chroots)}")


def _store(connect: str, node: int) -> ZooKeeperMetadataStore:
    return ZooKeeperMetadataStore(connect, node, session_timeout_ms=SESSION_MS)


def _control(store: ZooKeeperMetadataStore, node: int) -> Controller:
    """A controller on `store` that reacts to registrations, as the broker's replica manager
    runs it."""
    ctl = Controller(store, node, lambda topic: False)

    def on_change(change: MetadataChange) -> None:
        if change.kind == "broker":
            ctl.on_brokers_changed()

    store.subscribe(on_change)
    return ctl


def test_new_controller_elects_again_what_a_restarted_broker_led(connect: str) -> None:
    async def body() -> None:
        s0, s1, s2 = _store(connect, 0), _store(connect, 1), _store(connect, 2)
        restarted: ZooKeeperMetadataStore | None = None
        try:
            s0.subscribe(lambda change: None)  # the controller, cut off: it answers nothing
            _control(s1, 1)
            s2.subscribe(lambda change: None)
            for node, store in enumerate((s0, s1, s2)):
                store.register_broker(BrokerRegistration(node, "127.0.0.1", 9001 + node))
            await eventually(lambda: s1.live_brokers() == [0, 1, 2])
            assert s1.controller_id() == 0
            s0.create_topic(
                TopicInfo("t", uuid.uuid4(), [PartitionState([2, 1, 0], 2, 0, [2, 1, 0])], {})
            )
            await eventually(lambda: "t" in s1.topics)

            # broker 2, the leader, is killed and restarts under a new registration while
            # broker 0 is still the controller (and does not react)
            old_epoch = s1.broker(2).broker_epoch
            s2.close()
            await eventually(lambda: s1.live_brokers() == [0, 1])
            restarted = _store(connect, 2)
            await eventually(lambda: "t" in restarted.topics)
            _control(restarted, 2).observe()  # as a starting broker, before it registers
            restarted.register_broker(BrokerRegistration(2, "127.0.0.1", 9003))
            await eventually(
                lambda: s1.broker(2) is not None and s1.broker(2).broker_epoch != old_epoch
            )
            assert s1.topics["t"].partitions[0].leader == 2

            # broker 0 goes: broker 1 or 2 takes over and must treat broker 2 as bounced
            s0.close()
            await eventually(lambda: s1.live_brokers() == [1, 2])
            await eventually(lambda: s1.controller_id() in (1, 2))
            await eventually(lambda: 0 not in s1.topics["t"].partitions[0].isr)
            st = s1.topics["t"].partitions[0]
            assert (st.leader, st.leader_epoch, st.isr) == (1, 1, [1])
        finally:
            for store in (s0, s1, s2, restarted):
                if store is not None:
                    store.close()

    run(body)
