"""KIP-848 online upgrade and downgrade of a live classic group, confluent-kafka on `odradek serve`:
two classic consumers share a topic, one is restarted with `group.protocol=consumer`; the group
becomes a consumer group keeping the other as a classic member (it rebalances through
JoinGroup/SyncGroup inside the consumer group), when the consumer-protocol member
leaves, the group is classic again and the classic member continues alone; every record is
consumed and the committed offsets never move back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.group_harness import (
    PARTITIONS,
    BackgroundProducer,
    Group,
    committed,
    create_topic,
)
from compat_tests.harness import BrokerProcess, unique_name, wait_for
from compat_tests.test_kip848 import BROKER_CONFIG, SETTLE_S, describe


@pytest.fixture
def group(fresh_broker: Any, tmp_path: Path) -> Iterator[Group]:
    broker: BrokerProcess = fresh_broker(BROKER_CONFIG)
    topic = unique_name("migrate")
    create_topic(broker, topic)
    g = Group(broker, topic, topic + "-g", tmp_path, lambda: None)
    yield g
    g.cleanup()


def test_a_live_classic_group_is_upgraded_by_a_consumer_protocol_member(group: Group) -> None:
    broker = group.broker
    producer = BackgroundProducer(broker, group.topic, "mig")
    backwards: list[str] = []
    stop = threading.Event()
    last: dict[int, int] = {}

    def watch_commits() -> None:
        while not stop.is_set():
            try:
                now = committed(broker, group.group)
            except Exception:  # the coordinator may be briefly unavailable: look again
                now = {}
            for p, o in now.items():
                if o < last.get(p, -1):
                    backwards.append(f"partition {p}: {last[p]} -> {o}")
                last[p] = max(o, last.get(p, -1))
            stop.wait(0.2)

    watcher = threading.Thread(target=watch_commits, daemon=True)
    watcher.start()
    try:
        a = group.start("confluent-kafka")
        b = group.start("confluent-kafka")
        group.settled([a, b])
        b.terminate()  # restarted with the consumer protocol
        group.settled([a])
        c = group.start("confluent-kafka", protocol="consumer")
        group.settled([a, c])
        g = describe(broker, group.group)
        assert g.error_code == 0 and len(g.members) == 2
        # v1 of ConsumerGroupDescribe tells the member types apart (KIP-1099): 0 classic
        assert sorted(m.member_type for m in g.members) == [0, 1]
        owned = sorted(
            (t.topic_name, p)
            for m in g.members
            for t in m.assignment.topic_partitions
            for p in t.partitions
        )
        assert owned == [(group.topic, p) for p in range(PARTITIONS)]
        # downgrade: the consumer-protocol member leaves, the group is classic again and the
        # classic member takes every partition
        c.terminate()
        group.settled([a])
        wait_for(
            lambda: describe(broker, group.group).error_code != 0,
            SETTLE_S,
            message="the group to be classic again",
        )
        d = group.start("confluent-kafka")  # and classic members join it as before
        group.settled([a, d])
    finally:
        values = producer.stop()
    assert len(values) > 20
    group.consumed(values, timeout=SETTLE_S)
    wait_for(
        lambda: sum(committed(broker, group.group).values()) >= len(values),
        SETTLE_S,
        message=f"commits to cover {len(values)} records",
    )
    stop.set()
    watcher.join(5)
    assert not backwards, backwards
    assert not [m for m in group.members if m.saw("error")], group.state()
