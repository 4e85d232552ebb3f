"""KIP-848 online upgrade and downgrade of a live classic group with real clients, each scenario
run on odradek and on Apache Kafka 4.4 (so a failure is ours, not the test's).

Members are processes (compat_tests/group_member.py, compat_tests/java/GroupMember.java):
classic ones (confluent-kafka and kafka-python, range assignor) and consumer-protocol ones
(`group.protocol=consumer`: confluent-kafka, and kafka-clients 4.4 in the upgrade case). Both
brokers run short group timeouts (3 s sessions, 500 ms consumer heartbeats; Kafka's own floors
lowered for that: conftest.KAFKA_FAST_GROUPS), a module-scoped odradek and the session's Kafka
node with those floors, shared with test_streams.

- upgrade, then downgrade on leave: a consumer-protocol member joining a live classic group
  converts it (the classic member rebalances inside the consumer group); DescribeGroups answers
  the mixed group as Kafka 4.x does (GROUP_ID_NOT_FOUND from v6, Dead); when the member
  leaves, the group is classic again and classic members join it as before; every record is
  consumed and committed offsets never move back.
- fencing: a classic member killed inside the consumer group is removed after its own session
  timeout; the last consumer-protocol member killed is fenced by its session timeout and the
  group is downgraded, its classic member taking every partition.
- static replacement: a classic member starting with the instance id of the killed static
  consumer-protocol member replaces it and downgrades the group at once.
- classic members' rebalance timeouts, with two hand-driven classic members (raw requests: no
  client library can be made to heartbeat without rejoining): told to rejoin, one never does
  JoinGroup, the other rejoins and never does SyncGroup; both keep heartbeating, both are fenced
  once their 2 s rebalance timeout passes and the consumer-protocol member takes everything.
- a consumer-protocol member (hand-driven too) that keeps heartbeating but never gives up the
  partitions a new classic member needs is fenced by its 2 s rebalance timeout: as the last
  consumer-protocol member, the group is downgraded and the classic members share everything.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.group_harness import (
    PARTITIONS,
    BackgroundProducer,
    CommitWatcher,
    Group,
    create_topic,
)
from compat_tests.harness import BrokerProcess, unique_name, wait_for
from compat_tests.java_harness import JavaPrograms, kafka_lib_classpath
from compat_tests.reference.conftest import KAFKA_FAST_GROUPS, ODRADEK_OVERRIDES, ReferencePool
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.test_kip848 import SETTLE_S, describe
from odradek.coordinator.group.assignment import encode_subscription
from odradek.coordinator.group.migration import encode_assignment
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

SESSION_MS = int(KAFKA_FAST_GROUPS["group.consumer.session.timeout.ms"])


@pytest.fixture(scope="module")
def mig_odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("odradek-mig"), overrides={**ODRADEK_OVERRIDES, **KAFKA_FAST_GROUPS}
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def mig_kafka(reference_pool: ReferencePool) -> Iterator[KafkaReference]:
    """The session's Kafka 4.4 node with short group floors (shared with test_streams)."""
    yield reference_pool.get("4.4", overrides=KAFKA_FAST_GROUPS)


@pytest.fixture(scope="module")
def java44(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    """compat_tests/java/GroupMember.java on kafka-clients 4.4 (its AsyncKafkaConsumer)."""
    return JavaPrograms(tmp_path_factory.mktemp("java44"), kafka_lib_classpath("4.4.0"))


@pytest.fixture(params=["odradek", "kafka"])
def group(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Group]:
    broker = request.getfixturevalue(f"mig_{request.param}")
    topic = unique_name("migrate")
    create_topic(broker, topic)
    g = Group(broker, topic, topic + "-g", tmp_path, lambda: request.getfixturevalue("java44"))
    yield g
    g.cleanup()


def start(
    group: Group,
    protocol: str = "classic",
    instance_id: str | None = None,
    client: str = "confluent-kafka",
) -> Any:
    return group.start(client, protocol=protocol, session_ms=SESSION_MS, instance_id=instance_id)


def describe_groups(group: Group, version: int) -> tuple[int, str, str, int]:
    """DescribeGroups (15): (error, state, protocol type, members) of the group."""
    with RawClient(group.broker.bootstrap) as raw:
        request = protocol.DescribeGroupsRequest(
            groups=[group.group], include_authorized_operations=False
        )
        resp = raw.request(request, version)
    (g,) = resp.groups
    return g.error_code, g.group_state, g.protocol_type, len(g.members)


def is_classic(group: Group) -> bool:
    """ConsumerGroupDescribe no longer finds it (GROUP_ID_NOT_FOUND): a classic group."""
    return describe(group.broker, group.group).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def member_types(group: Group) -> list[int]:
    """ConsumerGroupDescribe v1's member types (KIP-1099): 0 classic, 1 consumer."""
    g = describe(group.broker, group.group)
    assert g.error_code == 0, g
    return sorted(m.member_type for m in g.members)


def test_a_live_classic_group_is_upgraded_then_downgraded_on_leave(group: Group) -> None:
    broker = group.broker
    producer = BackgroundProducer(broker, group.topic, "mig")
    watcher = CommitWatcher(broker, group.group)
    try:
        a = start(group)
        b = start(group)
        group.settled([a, b])
        b.terminate()  # restarted with the consumer protocol, on kafka-clients 4.4
        group.settled([a])
        c = start(group, "consumer", client="java")
        group.settled([a, c])
        assert member_types(group) == [0, 1]
        g = describe(broker, group.group)
        owned = sorted(
            (t.topic_name, p)
            for m in g.members
            for t in m.assignment.topic_partitions
            for p in t.partitions
        )
        assert owned == [(group.topic, p) for p in range(PARTITIONS)]
        # DescribeGroups describes classic groups only: a mixed one is not found (v6), Dead
        assert describe_groups(group, 6)[:2] == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
        assert describe_groups(group, 5) == (0, "Dead", "", 0)
        # downgrade: the consumer-protocol member leaves, the group is classic again and the
        # classic member takes every partition
        c.terminate()
        group.settled([a])
        wait_for(lambda: is_classic(group), SETTLE_S, message="the group to be classic again")
        d = start(group)  # and classic members join it as before
        group.settled([a, d])
        wait_for(
            lambda: describe_groups(group, 6) == (0, "Stable", "consumer", 2),
            SETTLE_S,
            message="DescribeGroups to show the classic group",
        )
    finally:
        values = producer.stop()
    assert len(values) > 20
    watcher.check(group, values)


def test_killed_members_are_fenced_and_the_last_consumer_member_downgrades(group: Group) -> None:
    a = start(group)
    b = start(group, client="kafka-python")
    group.settled([a, b])
    c = start(group, "consumer")
    group.settled([a, b, c])
    assert member_types(group) == [0, 0, 1]
    # a classic member crashes: its own session timeout removes it from the consumer group
    b.kill()
    group.settled([a, c])
    assert member_types(group) == [0, 1]
    # the consumer-protocol member crashes: fenced by its session, the group becomes classic
    c.kill()
    group.settled([a])
    wait_for(lambda: is_classic(group), SETTLE_S, message="the group to be classic again")
    wait_for(
        lambda: describe_groups(group, 6) == (0, "Stable", "consumer", 1),
        SETTLE_S,
        message="DescribeGroups to show the classic group",
    )
    assert not a.saw("error"), group.state()


def test_a_classic_static_member_replacing_the_consumer_member_downgrades(group: Group) -> None:
    a = start(group, client="kafka-python")
    group.settled([a])
    c = start(group, "consumer", instance_id="inst-c")
    group.settled([a, c])
    assert member_types(group) == [0, 1]
    c.kill()  # no leave: its static membership stays for the session timeout
    d = start(group, instance_id="inst-c")  # a classic consumer with the same instance id
    wait_for(lambda: is_classic(group), SETTLE_S, message="the group to be classic again")
    group.settled([a, d])
    assert not a.saw("error") and not d.saw("error"), group.state()


NOT_READY = (
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
)


class RawClassicMember:
    """A classic consumer driven request by request (JoinGroup v5, SyncGroup v3, Heartbeat v3)
    with a 3 s session and a 2 s rebalance timeout."""

    def __init__(self, group: Group) -> None:
        self.group = group
        self.raw = RawClient(group.broker.bootstrap)
        self.member_id = ""
        self.generation = -1

    def join(self) -> int:
        P = protocol.JoinGroupRequest.JoinGroupRequestProtocol
        deadline = time.monotonic() + SETTLE_S
        # FindCoordinator (one broker: it is the coordinator) creates __consumer_offsets
        wait_for(
            lambda: (
                self.raw.request(
                    protocol.FindCoordinatorRequest(key=self.group.group, key_type=0), 1
                ).error_code
                == ErrorCode.NONE
            ),
            SETTLE_S,
            interval=0.1,
            message="the group coordinator",
        )
        while True:  # a new member first gets its id (MEMBER_ID_REQUIRED, KIP-394)
            resp = self.raw.request(
                protocol.JoinGroupRequest(
                    group_id=self.group.group,
                    session_timeout_ms=SESSION_MS,
                    rebalance_timeout_ms=2000,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=[P(name="range", metadata=encode_subscription([self.group.topic]))],
                ),
                5,
            )
            if resp.error_code in NOT_READY and time.monotonic() < deadline:
                time.sleep(0.1)  # the offsets topic is being created: ask again
                continue
            self.member_id = resp.member_id
            if resp.error_code != ErrorCode.MEMBER_ID_REQUIRED:
                break
        self.generation = resp.generation_id
        return int(resp.error_code)

    def sync(self, partitions: list[int]) -> int:
        A = protocol.SyncGroupRequest.SyncGroupRequestAssignment
        assignment = encode_assignment({self.group.topic: partitions}, 0)
        leader = [A(member_id=self.member_id, assignment=assignment)] if partitions else []
        resp = self.raw.request(
            protocol.SyncGroupRequest(
                group_id=self.group.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=leader,
            ),
            3,
        )
        return int(resp.error_code)

    def heartbeat(self) -> int:
        resp = self.raw.request(
            protocol.HeartbeatRequest(
                group_id=self.group.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
            ),
            3,
        )
        return int(resp.error_code)


def test_classic_members_that_do_not_rejoin_or_sync_in_time_are_fenced(group: Group) -> None:
    stalling = RawClassicMember(group)  # the classic group's only member, then told to rejoin
    syncless = RawClassicMember(group)
    try:
        assert stalling.join() == ErrorCode.NONE
        assert stalling.sync(list(range(PARTITIONS))) == ErrorCode.NONE
        c = start(group, "consumer")  # upgrades the group
        wait_for(
            lambda: stalling.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS,
            SETTLE_S,
            interval=0.5,
            message="the classic member to be told to rejoin",
        )
        assert syncless.join() == ErrorCode.NONE  # a second classic member, never syncing
        assert member_types(group) == [0, 0, 1]
        fenced: dict[str, float] = {}
        deadline = time.monotonic() + SETTLE_S
        while len(fenced) < 2 and time.monotonic() < deadline:
            for name, member in (("stalling", stalling), ("syncless", syncless)):
                if name not in fenced:
                    error = member.heartbeat()  # within the session: only the timeouts fence
                    if error == ErrorCode.UNKNOWN_MEMBER_ID:
                        fenced[name] = time.monotonic()
                    else:
                        assert error in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS), error
            time.sleep(0.5)
        assert sorted(fenced) == ["stalling", "syncless"], fenced
        group.settled([c])
        assert member_types(group) == [1]
    finally:
        stalling.raw.close()
        syncless.raw.close()


def test_a_consumer_member_not_revoking_in_time_is_fenced_and_downgrades(group: Group) -> None:
    a = start(group)
    group.settled([a])
    member_id, epoch = str(uuid.uuid4()), 0
    owned: dict[uuid.UUID, list[int]] = {}
    T = protocol.ConsumerGroupHeartbeatRequest.TopicPartitions

    def heartbeat(raw: RawClient) -> int:
        nonlocal epoch, owned
        resp = raw.request(
            protocol.ConsumerGroupHeartbeatRequest(
                group_id=group.group,
                member_id=member_id,
                member_epoch=epoch,
                rebalance_timeout_ms=2000,
                subscribed_topic_names=[group.topic],
                topic_partitions=[T(topic_id=t, partitions=ps) for t, ps in owned.items()],
            ),
            1,
        )
        if resp.error_code == ErrorCode.NONE:
            epoch = resp.member_epoch
            # it keeps reporting every partition it was ever given: it never revokes
            for t in resp.assignment.topic_partitions if resp.assignment is not None else []:
                owned[t.topic_id] = sorted(set(owned.get(t.topic_id, [])) | set(t.partitions))
        return int(resp.error_code)

    with RawClient(group.broker.bootstrap) as raw:
        assert heartbeat(raw) == ErrorCode.NONE  # upgrades the group
        assert member_types(group) == [0, 1]
        deadline = time.monotonic() + SETTLE_S
        while not owned and time.monotonic() < deadline:  # the classic member releases some
            assert heartbeat(raw) == ErrorCode.NONE
            time.sleep(0.3)
        assert owned, "no partition for the consumer-protocol member"
        d = start(group)  # needs some of them: the hand-driven member never lets go
        errors: list[int] = []
        while time.monotonic() < deadline:
            error = heartbeat(raw)
            if error != ErrorCode.NONE:
                errors.append(error)
                break
            time.sleep(0.3)
        # fenced, and the group is classic now: not a consumer group any more
        assert errors == [ErrorCode.GROUP_ID_NOT_FOUND], errors
    wait_for(lambda: is_classic(group), SETTLE_S, message="the group to be classic again")
    group.settled([a, d])
    assert not a.saw("error") and not d.saw("error"), group.state()
