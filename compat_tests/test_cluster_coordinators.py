"""Coordinators and controlled shutdown in a replicating cluster, with real clients.

Each test starts an in-process three-broker `odradek.testing.Cluster` (the `odradek_cluster`
fixture) whose internal topics are replicated three ways, then fails a broker while clients
work:

- the group coordinator's broker is killed under a consumer group of a confluent-kafka and a
  kafka-python member: the offsets committed before the kill are there afterwards (nothing
  committed is read again, a new member resumes from them) and the group consumes everything
  produced after the kill; a commit is answered only once every in-sync replica has it, so
  killing the coordinator right after the answer loses nothing;
- the transaction coordinator's broker is killed in the middle of a transaction of a
  confluent-kafka (and a Java) transactional producer: that transaction and the next commit, an
  aborted one before the kill stays invisible, and a read_committed consumer reads exactly the
  committed records;
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

from compat_tests.group_harness import Group, assert_exactly_once, committed, produce
from compat_tests.harness import unique_name
from compat_tests.java_harness import JavaPrograms
from compat_tests.test_transactions import end_marks
from compat_tests.txn_drivers import make_driver
from odradek.coordinator.group.records import partition_for as group_partition
from odradek.coordinator.txn.config import partition_for as txn_partition
from odradek.testing import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

BROKERS = 3
PARTITIONS = 6  # group_harness's topic layout
INTERNAL_PARTITIONS = 3
WAIT_S = 30.0
CONFIG = {
    "offsets.topic.replication.factor": BROKERS,
    "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
    "transaction.state.log.replication.factor": BROKERS,
    "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
    "transaction.state.log.min.isr": 2,
    "min.insync.replicas": 2,
}
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"


def wait_for(predicate, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(0.05)


def group_coordinator(cluster: Cluster, group: str) -> int:
    """The coordinator's node id as a client finds it (DescribeGroups via FindCoordinator),
    checked against the leader of the group's `__consumer_offsets` partition."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(WAIT_S)
    leader = cluster.leader(OFFSETS_TOPIC, group_partition(group, INTERNAL_PARTITIONS))
    assert desc.coordinator.id == leader
    return leader


@pytest.fixture
def cluster(odradek_cluster) -> Cluster:
    return odradek_cluster(BROKERS, config=CONFIG)


def no_java() -> JavaPrograms:
    raise AssertionError("this test runs no Java group member")


# -- the group coordinator dies ----------------------------------------------------------------


def test_group_survives_the_kill_of_its_coordinator(cluster: Cluster, tmp_path: Path) -> None:
    topic, gid = unique_name("orders"), unique_name("group")
    cluster.create_topic(topic, PARTITIONS, BROKERS)
    group = Group(cluster, topic, gid, tmp_path, no_java)
    try:
        members = [group.start("confluent-kafka"), group.start("kafka-python")]
        group.settled(members)
        before = [f"before-{i}" for i in range(60)]
        produce(cluster, topic, before, acks="all")
        group.consumed(before)
        group.until(lambda: sum(committed(cluster, gid).values()) == 60, "commits of 60")
        at_kill = committed(cluster, gid)

        victim = group_coordinator(cluster, gid)
        cluster.kill(victim)
        cluster.wait_for_leader(OFFSETS_TOPIC, group_partition(gid, INTERNAL_PARTITIONS))
        assert committed(cluster, gid) == at_kill  # the new coordinator has every commit

        after = [f"after-{i}" for i in range(60)]
        produce(cluster, topic, after, acks="all")
        group.consumed(after)
        assert_exactly_once(group, before)  # nothing committed was read again
        group.until(lambda: sum(committed(cluster, gid).values()) == 120, "commits of 120")
        assert group_coordinator(cluster, gid) != victim
        for m in members:
            m.terminate()

        late = [f"late-{i}" for i in range(12)]
        produce(cluster, topic, late, acks="all")
        newcomer = group.start("kafka-python")
        group.consumed(late, [newcomer])
        assert sorted(newcomer.values) == sorted(late)  # resumed from the committed offsets
    finally:
        group.cleanup()


def test_commit_is_answered_once_replicated(cluster: Cluster) -> None:
    topic, gid = unique_name("ledger"), unique_name("group")
    cluster.create_topic(topic, 1, BROKERS)
    tp = TopicPartition(topic, 0)

    def commit(offset: int) -> None:
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=gid)
        try:
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
        finally:
            consumer.close()

    commit(1)  # creates __consumer_offsets and the group
    index = group_partition(gid, INTERNAL_PARTITIONS)
    cluster.wait_for_replication(OFFSETS_TOPIC, index)
    victim = cluster.leader(OFFSETS_TOPIC, index)
    end = cluster.log_end_offset(victim, OFFSETS_TOPIC, index)
    cluster.cut_off_peers(victim)  # the followers cannot fetch the next commit yet
    with ThreadPoolExecutor(1) as pool:
        answered = pool.submit(commit, 42)
        wait_for(
            lambda: cluster.log_end_offset(victim, OFFSETS_TOPIC, index) > end,
            "the commit in the coordinator's log",
        )
        cluster.heal()
        answered.result(WAIT_S)
    cluster.kill(victim)  # right after the answer: the followers must have the commit
    cluster.wait_for_leader(OFFSETS_TOPIC, index, not_on=victim)
    wait_for(lambda: committed(cluster, gid).get(0) == 42, "the commit on the new coordinator")


# -- the transaction coordinator dies ----------------------------------------------------------


@pytest.mark.parametrize(
    "client", ["confluent-kafka", pytest.param("java", marks=pytest.mark.slow)]
)
def test_transactions_survive_the_kill_of_their_coordinator(
    cluster: Cluster, client: str, request: pytest.FixtureRequest
) -> None:
    topic, tid = unique_name("payments"), unique_name("txn")
    cluster.create_topic(topic, 3, BROKERS)
    java = request.getfixturevalue("java") if client == "java" else None
    drv = make_driver(client, cluster.bootstrap, java)
    try:

        def transaction(tag: str, count: int, end: str | None) -> list[str]:
            keys = [f"{tag}-{i}" for i in range(count)]
            for i, key in enumerate(keys):
                drv(f"p send {topic} {i % 3} {key} v")
            if end:
                drv(f"p {end}")
            return keys

        drv(f"producer p {tid}")
        drv("p init")
        drv("p begin")
        committed_keys = transaction("first", 9, "commit")
        drv("p begin")
        aborted = transaction("aborted", 9, "flush")  # in the log, then aborted
        drv("p abort")
        drv("p begin")
        committed_keys += transaction("across", 6, "flush")  # sent and acknowledged

        victim = cluster.leader(TXN_TOPIC, txn_partition(tid, INTERNAL_PARTITIONS))
        cluster.kill(victim)
        committed_keys += transaction("across-late", 6, "commit")  # same transaction
        drv("p begin")
        committed_keys += transaction("after", 9, "commit")
        assert cluster.leader(TXN_TOPIC, txn_partition(tid, INTERNAL_PARTITIONS)) != victim

        end_marks(cluster.bootstrap, topic)
        records, _ = drv.consume("read_committed", topic)
        keys = [key for _p, _o, key, _v in records]
        assert sorted(keys) == sorted(committed_keys)  # each once; none of the aborted
        assert not set(keys) & set(aborted)
    finally:
        drv.close()
