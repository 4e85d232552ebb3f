"""KIP-848 consumer groups (`group.protocol=consumer`) with confluent-kafka against `odradek serve`.

Members are processes (compat_tests/group_member.py with --group-protocol consumer; Kafka's
Java 3.9.1 consumer through GroupMember.java, marked slow), as in test_groups.py. Covered: two
then three members splitting partitions, members joining and leaving
(and one killed) under load with every record consumed and committed offsets never moving
backwards, static membership (a restarted static member gets its partitions back without a new
group epoch), a regex subscription picking up a new topic, the group's state surviving a broker
restart and the kill of its coordinator on a three-broker cluster, classic and consumer
groups side by side in `odradek groups list/describe`, and the
ConsumerGroupDescribe / ListGroups / ApiVersions answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.group_harness import (
    PARTITIONS,
    BackgroundProducer,
    CommitWatcher,
    Group,
    committed,
    create_topic,
    produce,
)
from compat_tests.harness import BrokerProcess, create_topics, unique_name, wait_for
from compat_tests.java_harness import JavaError
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

REPO = Path(__file__).resolve().parents[1]
SESSION_MS = 6000
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "500",
}
SETTLE_S = 45.0


@pytest.fixture
def kbroker(fresh_broker: Any) -> BrokerProcess:
    broker: BrokerProcess = fresh_broker(BROKER_CONFIG)
    return broker


def _java(request: pytest.FixtureRequest) -> Any:
    try:
        return request.getfixturevalue("java")
    except JavaError as exc:
        pytest.skip(f"no Java toolchain: {exc}")


@pytest.fixture
def group(
    kbroker: BrokerProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Group]:
    topic = unique_name("kip848")
    create_topic(kbroker, topic)
    g = Group(kbroker, topic, topic + "-g", tmp_path, lambda: _java(request))
    yield g
    g.cleanup()


def start(group: Group, **kw: Any) -> Any:
    return group.start("confluent-kafka", protocol="consumer", **kw)


def describe(
    broker: Any, group_id: str, address: Callable[[], str] | None = None, version: int = 1
) -> Any:
    """ConsumerGroupDescribe (69) of one group, waiting out a loading coordinator (`address`:
    where the coordinator is, when it is not the one broker)."""
    result: list[Any] = []

    def ask() -> bool:
        with RawClient(address() if address else broker.bootstrap) as raw:
            resp = raw.request(
                protocol.ConsumerGroupDescribeRequest(
                    group_ids=[group_id], include_authorized_operations=False
                ),
                version,
            )
        (g,) = resp.groups
        if g.error_code in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
        ):
            return False
        result.append(g)
        return True

    wait_for(ask, 30, message=f"ConsumerGroupDescribe of {group_id}")
    return result[-1]


def cli(broker: BrokerProcess, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        env={**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": broker.bootstrap},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_two_then_three_members_split_partitions(group: Group, kbroker: BrokerProcess) -> None:
    a = start(group, assignor="uniform")
    group.settled([a])
    b = start(group, assignor="range")
    group.settled([a, b])
    c = start(group)
    group.settled([a, b, c])
    assert sorted(len(m.assignment) for m in (a, b, c)) == [2, 2, 2]
    values = [f"split-{i}" for i in range(60)]
    produce(kbroker, group.topic, values)
    group.consumed(values)

    def stable() -> bool:
        return describe(kbroker, group.group).group_state == "Stable"

    wait_for(stable, SETTLE_S, message="the group to be Stable")
    g = describe(kbroker, group.group)
    assert g.error_code == 0 and len(g.members) == 3
    assert g.group_epoch == g.assignment_epoch >= 3
    owned = [
        (t.topic_name, p)
        for m in g.members
        for t in m.assignment.topic_partitions
        for p in t.partitions
    ]
    assert sorted(owned) == [(group.topic, p) for p in range(PARTITIONS)]
    assert {m.member_epoch for m in g.members} == {g.group_epoch}
    assert {m.member_type for m in g.members} == {1}  # consumer members (v1, KIP-1099)
    assert len(describe(kbroker, group.group, version=0).members) == 3
    assert {m.client_id for m in g.members} == {
        "confluent-kafka-1",
        "confluent-kafka-2",
        "confluent-kafka-3",
    }
    # one member asks for uniform, two for range: the most used choice wins
    assert g.assignor_name == "range"


def test_join_and_leave_under_load(group: Group, kbroker: BrokerProcess) -> None:
    """Every record consumed while members come and go; committed offsets never move back."""
    producer = BackgroundProducer(kbroker, group.topic, "load")
    watcher = CommitWatcher(kbroker, group.group)
    try:
        a = start(group)
        b = start(group)
        group.settled([a, b])
        c = start(group)
        group.settled([a, b, c])
        a.terminate()  # a clean leave: its partitions move at once
        group.settled([b, c])
        b.kill()  # a crash: its partitions move after the session timeout
        group.settled([c])
        d = start(group)
        group.settled([c, d])
    finally:
        values = producer.stop()
    assert len(values) > 50
    watcher.check(group, values)


def test_static_member_comes_back_without_a_rebalance(group: Group, kbroker: BrokerProcess) -> None:
    a = start(group, instance_id="static-a")
    b = start(group, instance_id="static-b")
    group.settled([a, b])
    wait_for(
        lambda: describe(kbroker, group.group).group_state == "Stable",
        SETTLE_S,
        message="a Stable group",
    )
    before = describe(kbroker, group.group)
    had = a.assignment
    a.terminate()  # a static member leaves with epoch -2: its partitions wait for it
    during = describe(kbroker, group.group)
    assert during.group_epoch == before.group_epoch
    assert len(during.members) == 2
    again = start(group, instance_id="static-a")
    group.settled([again, b])
    assert again.assignment == had
    after = describe(kbroker, group.group)
    assert after.group_epoch == before.group_epoch
    assert {m.instance_id for m in after.members} == {"static-a", "static-b"}


def test_regex_subscription_picks_up_a_new_topic(kbroker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    prefix = unique_name("rx")
    create_topics(kbroker.bootstrap, prefix + "-one", partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": kbroker.bootstrap,
            "group.id": prefix + "-g",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    producer = Producer({"bootstrap.servers": kbroker.bootstrap})
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        seen: set[tuple[str, bytes]] = set()

        def got(topic: str, value: bytes) -> bool:
            for m in consumer.consume(num_messages=100, timeout=0.2):
                if not m.error():
                    seen.add((m.topic(), m.value()))
            return (topic, value) in seen

        producer.produce(prefix + "-one", b"first")
        producer.flush(10)
        wait_for(lambda: got(prefix + "-one", b"first"), SETTLE_S, message="the first topic")
        create_topics(kbroker.bootstrap, prefix + "-two", partitions=1)
        producer.produce(prefix + "-two", b"second")
        producer.flush(10)
        wait_for(lambda: got(prefix + "-two", b"second"), SETTLE_S, message="the new topic")
        g = describe(kbroker, prefix + "-g")
        topics = {t.topic_name for m in g.members for t in m.assignment.topic_partitions}
        assert topics == {prefix + "-one", prefix + "-two"}
        # librdkafka sends the pattern itself (SubscribedTopicRegex, v1): the broker resolves it
        [member] = g.members
        assert member.subscribed_topic_regex is not None
        assert prefix in member.subscribed_topic_regex
    finally:
        consumer.close()


def test_group_state_survives_a_restart(group: Group, kbroker: BrokerProcess) -> None:
    a = start(group)
    b = start(group)
    c = start(group)
    group.settled([a, b, c])
    c.terminate()
    group.settled([a, b])
    wait_for(
        lambda: describe(kbroker, group.group).group_state == "Stable",
        SETTLE_S,
        message="a Stable group",
    )
    before = describe(kbroker, group.group)
    assert before.group_epoch >= 4  # three joins and a leave
    kbroker.restart()
    after = describe(kbroker, group.group)
    # loaded from __consumer_offsets: a group rebuilt from scratch would start at epoch 1
    assert after.group_epoch >= before.group_epoch
    assert {m.member_id for m in before.members} <= {m.member_id for m in after.members}
    values = [f"after-restart-{i}" for i in range(30)]
    produce(kbroker, group.topic, values)
    group.consumed(values, members=[a, b])


def test_classic_and_consumer_groups_side_by_side(
    group: Group, kbroker: BrokerProcess, tmp_path: Path
) -> None:
    new = start(group)
    classic_group = Group(kbroker, group.topic, group.group + "-classic", tmp_path, group.java)
    try:
        old = classic_group.start("kafka-python")
        group.settled([new])
        classic_group.settled([old])
        listed = json.loads(cli(kbroker, "groups", "list", "--json"))
        types = {g["group"]: g["type"] for g in listed}
        assert types[group.group] == "consumer"
        assert types[classic_group.group] == "classic"
        desc = json.loads(cli(kbroker, "groups", "describe", group.group, "--json"))
        assert desc["type"] == "consumer"
        [member] = desc["members"]
        assert len(member["assignment"]) == PARTITIONS
        text = cli(kbroker, "groups", "describe", group.group)
        assert "Type: consumer" in text
        # confluent-kafka's admin client: ListGroups' types, ConsumerGroupDescribe for the new
        from confluent_kafka import ConsumerGroupType
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
        listed_ck = {g.group_id: g.type for g in admin.list_consumer_groups().result(30).valid}
        assert listed_ck[group.group] == ConsumerGroupType.CONSUMER
        assert listed_ck[classic_group.group] == ConsumerGroupType.CLASSIC
        described = admin.describe_consumer_groups([group.group])[group.group].result(30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.partition_assignor == "range"  # Group.start asks for range
        [ck_member] = described.members
        assert len(ck_member.assignment.topic_partitions) == PARTITIONS
        # a consumer-protocol member joining the live classic group converts it (KIP-848
        # online upgrade, compat_tests/reference/test_kip848_migration.py): the classic member stays
        with RawClient(kbroker.bootstrap) as raw:
            resp = raw.request(
                protocol.ConsumerGroupHeartbeatRequest(
                    group_id=classic_group.group,
                    member_id="",
                    member_epoch=0,
                    rebalance_timeout_ms=30000,
                    subscribed_topic_names=[group.topic],
                    topic_partitions=[],
                ),
                1,
            )
        assert resp.error_code == ErrorCode.NONE
        converted = describe(kbroker, classic_group.group)
        assert sorted(m.member_type for m in converted.members) == [0, 1]
    finally:
        classic_group.cleanup()


def test_an_empty_classic_group_is_taken_over_and_back(
    group: Group, kbroker: BrokerProcess
) -> None:
    """group.consumer.migration.policy=bidirectional: the committed offsets carry over."""
    first = [f"one-{i}" for i in range(30)]
    produce(kbroker, group.topic, first)
    old = group.start("kafka-python")
    group.consumed(first, members=[old])
    wait_for(
        lambda: sum(committed(kbroker, group.group).values()) >= 30,
        SETTLE_S,
        message="the classic member's commits",
    )
    old.terminate()
    second = [f"two-{i}" for i in range(30)]
    produce(kbroker, group.topic, second)
    new = start(group)
    group.consumed(second, members=[new])
    assert not set(first) & set(new.values), "the consumer member re-read committed records"
    wait_for(
        lambda: sum(committed(kbroker, group.group).values()) >= 60,
        SETTLE_S,
        message="the consumer member's commits",
    )
    new.terminate()
    third = [f"three-{i}" for i in range(30)]
    produce(kbroker, group.topic, third)
    back = group.start("kafka-python")
    group.consumed(third, members=[back])
    assert not (set(first) | set(second)) & set(back.values)


def test_api_versions_advertise_group_version(kbroker: BrokerProcess) -> None:
    with RawClient(kbroker.bootstrap) as raw:
        resp = raw.request(
            protocol.ApiVersionsRequest(client_software_name="test", client_software_version="1"),
            4,
        )
        old = raw.request(
            protocol.ApiVersionsRequest(client_software_name="test", client_software_version="1"),
            3,
        )
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[68] == (0, 1) and keys[69] == (0, 1)
    assert [
        (f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features
    ] == [
        ("group.version", 1, 1),
        ("streams.version", 1, 1),
        ("transaction.version", 2, 2),
    ]  # as a new Kafka 4.x cluster
    assert [(f.name, f.min_version, f.max_version) for f in resp.supported_features] == [
        ("group.version", 0, 1),
        ("streams.version", 0, 1),
        ("transaction.version", 0, 2),
    ]
    assert not old.supported_features  # a range from 0 is left out below v4, as Kafka does
    assert old.finalized_features


@pytest.mark.slow
def test_java_consumers_split_and_hand_over(group: Group, kbroker: BrokerProcess) -> None:
    """Kafka's Java 3.9.1 consumer with group.protocol=consumer beside a confluent-kafka one."""
    a = group.start("java", protocol="consumer", assignor="uniform")
    group.settled([a])
    b = group.start("java", protocol="consumer")
    group.settled([a, b])
    c = start(group)
    group.settled([a, b, c])
    clients = sorted(m.client_id for m in describe(kbroker, group.group).members)
    assert clients == ["confluent-kafka-3", "java-group-member", "java-group-member"]
    values = [f"java-{i}" for i in range(60)]
    produce(kbroker, group.topic, values)
    group.consumed(values)
    a.terminate()
    group.settled([b, c])
    more = [f"java-more-{i}" for i in range(30)]
    produce(kbroker, group.topic, more)
    group.consumed(more, members=[b, c])
    assert not [m for m in group.members if m.saw("error")], group.state()


@pytest.mark.cluster
def test_group_survives_the_kill_of_its_coordinator(odradek_cluster: Any, tmp_path: Path) -> None:
    """Three brokers, __consumer_offsets replicated three ways: the new coordinator loads the
    group (its epochs and members) from the replicated records; nothing committed is read again."""
    from odradek.coordinator.group.records import partition_for

    cluster = odradek_cluster(
        3,
        config={
            **BROKER_CONFIG,
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": 3,
            "min.insync.replicas": 2,
        },
    )
    topic, gid = unique_name("kip848-cluster"), unique_name("kip848-cluster-g")
    cluster.create_topic(topic, PARTITIONS, 3)
    offsets_partition = partition_for(gid, 3)

    def coordinator() -> str:
        return str(cluster.address(cluster.leader("__consumer_offsets", offsets_partition)))

    group = Group(cluster, topic, gid, tmp_path, lambda: pytest.fail("no Java here"))
    try:
        members = [start(group), start(group)]
        group.settled(members)
        before = [f"before-{i}" for i in range(60)]
        produce(cluster, topic, before, acks="all")
        group.consumed(before)
        group.until(lambda: sum(committed(cluster, gid).values()) == 60, "commits of 60")
        at_kill = describe(cluster, gid, coordinator)
        assert at_kill.group_epoch >= 2

        victim = cluster.leader("__consumer_offsets", offsets_partition)
        cluster.kill(victim)
        cluster.wait_for_leader("__consumer_offsets", offsets_partition, not_on=victim)
        loaded = describe(cluster, gid, coordinator)
        assert loaded.group_epoch >= at_kill.group_epoch
        assert {m.member_id for m in at_kill.members} <= {m.member_id for m in loaded.members}

        after = [f"after-{i}" for i in range(60)]
        produce(cluster, topic, after, acks="all")
        group.consumed(after)
        group.until(lambda: sum(committed(cluster, gid).values()) == 120, "commits of 120")
        seen = [v for m in group.members for v in m.values]
        assert sorted(v for v in seen if v.startswith("before-")) == sorted(before)
    finally:
        group.cleanup()


def test_read_process_write_with_a_consumer_protocol_group(kbroker: BrokerProcess) -> None:
    """send_offsets_to_transaction with a KIP-848 member's group metadata (its member epoch):
    the offsets commit with the transaction."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    src, dst = unique_name("kip848-in"), unique_name("kip848-out")
    create_topics(kbroker.bootstrap, src, dst, partitions=2)
    plain = Producer({"bootstrap.servers": kbroker.bootstrap})
    for i in range(20):
        plain.produce(src, value=b"%d" % i, partition=i % 2)
    plain.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": kbroker.bootstrap,
            "group.id": src + "-g",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    txn = Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": src + "-t"})
    try:
        consumer.subscribe([src])
        txn.init_transactions(30)
        done: list[bytes] = []

        def step() -> bool:
            msgs = [m for m in consumer.consume(20, 0.2) if not m.error()]
            if msgs:
                txn.begin_transaction()
                for m in msgs:
                    txn.produce(dst, m.value(), partition=m.partition())
                offsets = [TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in msgs]
                txn.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
                txn.commit_transaction(30)
                done.extend(m.value() for m in msgs)
            return len(done) >= 20

        wait_for(step, SETTLE_S, interval=0, message="20 records processed")
        assert sorted(done, key=int) == [b"%d" % i for i in range(20)]
        got = consumer.committed([TopicPartition(src, 0), TopicPartition(src, 1)], 10)
        assert [(t.partition, t.offset) for t in got] == [(0, 10), (1, 10)]
    finally:
        consumer.close()
