"""Partition reassignment (KIP-455) on a three-broker cluster, driven by kafka-python's admin
client: data moves to the new replicas through replication while a producer and a consumer
run, the old replicas are dropped (and their copies deleted), leadership follows, and a
cancellation puts the original replicas back."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from odradek.testing import Cluster

DEADLINE_S = 60.0


class Producing(threading.Thread):
    """acks=all production of numbered values to `topic` until stopped; keeps the acked ones."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap, acks="all", retries=20, linger_ms=5
        )
        self.topic = topic
        self.acked: set[bytes] = set()
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            futures = []
            for _ in range(20):
                value = b"v%d" % n
                n += 1
                futures.append((value, self.producer.send(self.topic, value, partition=n % 2)))
            for value, fut in futures:
                try:
                    fut.get(timeout=DEADLINE_S)
                    self.acked.add(value)
                except Exception as exc:  # a record not acked may be lost; only count it
                    self.errors.append(exc)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} records acked"
            time.sleep(0.02)

    def finish(self) -> set[bytes]:
        self.stop.set()
        self.join(DEADLINE_S)
        self.producer.close()
        return set(self.acked)


class Consuming(threading.Thread):
    def __init__(self, cluster: Cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap,
            group_id="movers",
            auto_offset_reset="earliest",
        )
        self.seen: set[bytes] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            # one long poll until the group has assigned (kafka-python 3.0.12 loses a join round
            # that a poll ends in: odradek.testing.polling), short ones after, to stop promptly
            wait_ms = 100 if self.consumer.assignment() else int(DEADLINE_S * 1000)
            for msgs in self.consumer.poll(timeout_ms=wait_ms).values():
                self.seen.update(m.value for m in msgs)

    def until(self, wanted: set[bytes]) -> set[bytes]:
        deadline = time.monotonic() + DEADLINE_S
        while not wanted <= self.seen and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stop.set()
        self.join(DEADLINE_S)
        self.consumer.close()
        return set(self.seen)


def wait_done(cluster: Cluster, admin: KafkaAdminClient, topic: str, targets: dict) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        ongoing = admin.list_partition_reassignments()
        states = {p: cluster.partition(topic, p) for p in targets}
        if not ongoing and all(states[p].replicas == t for p, t in targets.items()):
            return
        assert time.monotonic() < deadline, f"reassignment still going: {ongoing} {states}"
        time.sleep(0.05)


@pytest.mark.usefixtures("kafka_python_metadata_refresh")
def test_reassignment_moves_data_while_producing_and_consuming(make_cluster) -> None:
    cluster = make_cluster(3, topics={"moves": (2, 2)})
    assert cluster.partition("moves", 0).replicas == [0, 1]
    assert cluster.partition("moves", 1).replicas == [1, 2]
    for p in (0, 1):  # both replicas of each partition fetching before acks=all writes
        cluster.wait_for_isr("moves", p, members=set(cluster.partition("moves", p).replicas))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    producing = Producing(cluster, "moves")
    consuming = Consuming(cluster, "moves")
    producing.start()
    consuming.start()
    try:
        producing.wait_for(200)
        # partition 0 leaves broker 0, its leader; partition 1 moves from 1 to 0 and grows
        targets = {0: [2, 1], 1: [0, 2, 1]}
        result = admin.alter_partition_reassignments(
            {TopicPartition("moves", p): t for p, t in targets.items()}
        )
        assert result == {TopicPartition("moves", 0): None, TopicPartition("moves", 1): None}
        wait_done(cluster, admin, "moves", targets)
        moved_at = len(producing.acked)
        producing.wait_for(moved_at + 200)
    finally:
        # stop and close every client even after a failure: a client left running keeps
        # logging connection errors into the tests that follow
        acked = producing.finish()
        seen = consuming.until(acked)
        admin.close()
    assert acked - seen == set(), f"{len(acked - seen)} acked records never consumed"

    p0, p1 = cluster.partition("moves", 0), cluster.partition("moves", 1)
    assert (p0.replicas, p0.adding_replicas, p0.removing_replicas) == ([2, 1], [], [])
    assert p0.leader in (1, 2) and set(p0.isr) <= {1, 2}
    assert p1.replicas == [0, 2, 1]
    for p, st in ((0, p0), (1, p1)):
        cluster.wait_for_isr("moves", p, members=set(st.replicas))
        cluster.wait_for_replication("moves", p)
    # every new replica holds the whole log, from offset 0
    assert cluster.log_end_offset(2, "moves", 0) == cluster.log_end_offset(1, "moves", 0) > 0
    assert cluster.log_end_offset(0, "moves", 1) == cluster.log_end_offset(2, "moves", 1) > 0
    # the removed replica is gone from broker 0, with its files
    assert cluster.log_end_offset(0, "moves", 0) == -1
    assert not (Path(cluster.data_dir) / "broker-0" / "moves-0").exists()
    every = consume_all(cluster, "moves")
    assert acked <= every


def consume_all(cluster: Cluster, topic: str) -> set[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    out: set[bytes] = set()
    deadline = time.monotonic() + DEADLINE_S
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=200).values():
            out.update(m.value for m in msgs)
    consumer.close()
    return out


def test_cancel_and_errors(make_cluster) -> None:
    cluster = make_cluster(3, topics={"stay": (1, 2)})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    tp = TopicPartition("stay", 0)
    # broker 2 cannot catch up while cut off from its peers: the reassignment stays pending
    cluster.cut_off_peers(2)
    assert admin.alter_partition_reassignments({tp: [0, 1, 2]}) == {tp: None}
    listed = admin.list_partition_reassignments()
    assert listed == {tp: {"replicas": [0, 1, 2], "adding_replicas": [2], "removing_replicas": []}}
    assert admin.list_partition_reassignments([TopicPartition("stay", 5)]) == {}
    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    assert admin.list_partition_reassignments() == {}
    st = cluster.partition("stay", 0)
    assert (st.replicas, st.adding_replicas) == ([0, 1], [])
    cluster.heal()
    assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
    assert admin.alter_partition_reassignments({tp: [0, 7]}) == {
        tp: InvalidReplicationAssignmentError
    }
    assert admin.alter_partition_reassignments({TopicPartition("nope", 0): [0]}) == {
        TopicPartition("nope", 0): UnknownTopicOrPartitionError
    }
    admin.close()


def test_manual_assignment_in_create_topics_and_partitions(make_cluster) -> None:
    cluster = make_cluster(3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    # not what odradek would place ([0, 1], [1, 2]): honoured as asked, the first replica leads
    (created,) = admin.create_topics({"placed": {"assignments": {0: [2, 0], 1: [1, 2]}}})["topics"]
    assert created["error_code"] == 0
    admin.create_partitions({"placed": {"count": 3, "assignments": [[0, 1]]}})
    wanted = {0: [2, 0], 1: [1, 2], 2: [0, 1]}
    for p, replicas in wanted.items():
        cluster.wait_for_leader("placed", p)
        st = cluster.partition("placed", p)
        assert (st.replicas, st.leader) == (replicas, replicas[0])
    (described,) = admin.describe_topics(["placed"])
    assert {p["partition_index"]: p["replica_nodes"] for p in described["partitions"]} == wanted
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for p in wanted:
        producer.send("placed", b"x%d" % p, partition=p).get(timeout=DEADLINE_S)
    producer.close()
    for p, replicas in wanted.items():
        cluster.wait_for_replication("placed", p)
        assert [cluster.log_end_offset(n, "placed", p) for n in range(3)] == [
            1 if n in replicas else -1 for n in range(3)
        ]
    admin.close()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory):
    zookeeper_mod = pytest.importorskip("odradek.testing.zookeeper")
    if zookeeper_mod.zookeeper_jar() is None:
        pytest.skip("no ZooKeeper jar here (scripts/setup.sh installs it)")
    with zookeeper_mod.ZooKeeperServer(str(tmp_path_factory.mktemp("zk"))) as server:
        yield server


def test_reassignment_with_zookeeper_brokers(zookeeper) -> None:
    """Brokers in ZooKeeper mode: the topic node carries the assignment (and, during the move,
    adding_replicas / removing_replicas) as Kafka writes it."""
    from kazoo.client import KazooClient

    from odradek.testing import Broker
    from odradek.testing.cluster import FAST_FAILOVER

    connect = zookeeper.connect("/reassign-test")
    config = {**FAST_FAILOVER, "zookeeper.connect": connect}
    with (
        Broker(config={**config, "broker.id": "0"}) as b0,
        Broker(config={**config, "broker.id": "1"}),
        Broker(config={**config, "broker.id": "2"}),
    ):
        admin = KafkaAdminClient(bootstrap_servers=b0.bootstrap)
        deadline = time.monotonic() + DEADLINE_S
        while len(admin.describe_cluster()["brokers"]) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # broker 1 leads, broker 0 (the first registered) is the controller
        admin.create_topics({"z": {"assignments": {0: [1, 0]}}})
        producer = KafkaProducer(bootstrap_servers=b0.bootstrap, acks="all")
        for i in range(30):
            producer.send("z", b"%d" % i, partition=0)
        producer.flush()
        producer.close()
        tp = TopicPartition("z", 0)
        assert admin.alter_partition_reassignments({tp: [2, 0]}) == {tp: None}
        deadline = time.monotonic() + DEADLINE_S
        while True:
            (described,) = admin.describe_topics(["z"])
            replicas = described["partitions"][0]["replica_nodes"]
            if not admin.list_partition_reassignments() and replicas == [2, 0]:
                break
            assert time.monotonic() < deadline, replicas
            time.sleep(0.05)
        consumer = KafkaConsumer(bootstrap_servers=b0.bootstrap, auto_offset_reset="earliest")
        consumer.assign([tp])
        got: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 30 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=200).values():
                got += [m.value for m in msgs]
        consumer.close()
        assert got == [b"%d" % i for i in range(30)]
        admin.close()
        zk = KazooClient(hosts=connect)
        zk.start(timeout=10)
        try:
            doc = json.loads(zk.get("/brokers/topics/z")[0])
            state = json.loads(zk.get("/brokers/topics/z/partitions/0/state")[0])
        finally:
            zk.stop()
            zk.close()
        assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == (
            {"0": [2, 0]},
            {},
            {},
        )
        assert state["leader"] == 2 and sorted(state["isr"]) == [0, 2]

        # Kafka's ZooKeeper-era tool writes /admin/reassign_partitions: the controller starts
        # the moves and removes the node once they are done
        zk = KazooClient(hosts=connect)
        zk.start(timeout=10)
        try:
            move = {"topic": "z", "partition": 0, "replicas": [1, 2]}
            request = {"version": 1, "partitions": [move]}
            zk.create("/admin/reassign_partitions", json.dumps(request).encode(), makepath=True)
            deadline = time.monotonic() + DEADLINE_S
            while zk.exists("/admin/reassign_partitions"):
                assert time.monotonic() < deadline, zk.get("/brokers/topics/z")
                time.sleep(0.05)
            doc = json.loads(zk.get("/brokers/topics/z")[0])
        finally:
            zk.stop()
            zk.close()
        assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == (
            {"0": [1, 2]},
            {},
            {},
        )
        admin = KafkaAdminClient(bootstrap_servers=b0.bootstrap)
        (described,) = admin.describe_topics(["z"])
        assert described["partitions"][0]["replica_nodes"] == [1, 2]
        admin.close()


def test_a_replica_moved_away_while_its_broker_was_down_is_deleted_at_restart(
    make_cluster,
) -> None:
    cluster = make_cluster(3, topics={"s": (1, 2)})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for _ in range(10):
        producer.send("s", b"x", partition=0)
    producer.flush()
    producer.close()
    cluster.kill(0)
    cluster.wait_for_leader("s", 0, not_on=0)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    tp = TopicPartition("s", 0)
    assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
    wait_done(cluster, admin, "s", {0: [2, 1]})
    admin.close()
    stray = Path(cluster.data_dir) / "broker-0" / "s-0"
    assert stray.exists()
    cluster.restart(0)
    deadline = time.monotonic() + DEADLINE_S
    while stray.exists():
        assert time.monotonic() < deadline, "the stray copy on broker 0 was kept"
        time.sleep(0.05)
    cluster.wait_for_replication("s", 0)
    assert cluster.log_end_offset(2, "s", 0) == 10
