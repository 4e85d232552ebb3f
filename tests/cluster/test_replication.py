"""Replication in an in-process cluster, driven by real clients: replicated produce and consume,
leader failover under continuous idempotent acks=all production, ISR shrink and expand,
NOT_ENOUGH_REPLICAS, follower truncation after a leader change, controlled shutdown, restarts,
unclean elections and the fault hooks."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
from kafka.errors import NotEnoughReplicasAfterAppendError, NotEnoughReplicasError

from odradek.testing import Cluster
from odradek.testing.polling import poll_until


def consume(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0
) -> dict[int, list[bytes]]:
    """Every record of `topic` from the beginning, per partition (no consumer group)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while sum(map(len, out.values())) < expected and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=300).items():
                out[tp.partition] += [m.value for m in msgs]
        for tp, msgs in consumer.poll(timeout_ms=300).items():  # nothing beyond expected
            out[tp.partition] += [m.value for m in msgs]
        return out
    finally:
        consumer.close()


def segment_bytes(cluster: Cluster, node: int, topic: str, index: int = 0) -> bytes:
    directory = Path(cluster.data_dir) / f"broker-{node}" / f"{topic}-{index}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


class Background:
    """A confluent-kafka idempotent acks=all producer running in a thread; keeps every
    acknowledged (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 60000,
                "retry.backoff.ms": 50,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.topic = topic
        self.partitions = partitions
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(
                self.topic,
                value=b"m%07d" % i,
                partition=i % self.partitions,
                on_delivery=self._delivered,
            )
            i += 1
            self.producer.poll(0)
            if i % 20 == 0:
                self._stop.wait(0.005)
        self.producer.flush(60)

    def __enter__(self) -> Background:
        self._thread.start()
        return self

    def wait_acked(self, count: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} acknowledged"
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)


def check_exactly_once_in_order(bg: Background, cluster: Cluster) -> None:
    assert bg.errors == []
    got = consume(cluster.bootstrap, bg.topic, bg.partitions, len(bg.acked))
    for p in range(bg.partitions):
        acked = [v for part, _, v in sorted(bg.acked) if part == p]
        assert got[p] == sorted(got[p]), "records out of order"
        assert len(set(got[p])) == len(got[p]), "a record is there twice"
        assert set(acked) <= set(got[p]), f"{len(set(acked) - set(got[p]))} acked records lost"


# -- replicated produce and consume ------------------------------------------------------------


def test_replicated_produce_consume_and_metadata(make_cluster) -> None:
    cluster = make_cluster(topics={"orders": (3, 3)})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        (desc,) = admin.describe_topics(["orders"])
        parts = sorted(desc["partitions"], key=lambda p: p["partition_index"])
        assert sorted(p["leader_id"] for p in parts) == [0, 1, 2]  # leaders balanced
        for p in parts:
            assert sorted(p["replica_nodes"]) == [0, 1, 2]
            assert sorted(p["isr_nodes"]) == [0, 1, 2]
            assert p["offline_replicas"] == []
        assert len(admin.describe_cluster()["brokers"]) == 3
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    futures = [producer.send("orders", b"v%d" % i, partition=i % 3) for i in range(300)]
    producer.flush()
    assert all(f.get(10).offset >= 0 for f in futures)
    producer.close()
    got = consume(cluster.bootstrap, "orders", 3, 300)
    for p in range(3):
        assert got[p] == [b"v%d" % i for i in range(p, 300, 3)]
        cluster.wait_for_replication("orders", p)
        assert {cluster.log_end_offset(n, "orders", p) for n in range(3)} == {100}
        assert segment_bytes(cluster, 0, "orders", p) == segment_bytes(cluster, 1, "orders", p)


def test_replication_factor_defaults_and_internal_topics(make_cluster) -> None:
    cluster = make_cluster(brokers=2)
    consumer = KafkaConsumer(
        "auto", bootstrap_servers=cluster.bootstrap, group_id="g", auto_offset_reset="earliest"
    )
    try:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        producer.send("auto", b"x").get(10)  # auto-created: default.replication.factor
        producer.close()
        records = poll_until(consumer, bool, 15)
        assert [r.value for r in records] == [b"x"], f"assigned {consumer.assignment()}"
        consumer.commit()
    finally:
        consumer.close()
    assert len(cluster.partition("auto").replicas) == 2
    assert len(cluster.partition("__consumer_offsets", 0).replicas) == 2


# -- failover ----------------------------------------------------------------------------------


def test_leader_kill_during_idempotent_acks_all_produce_loses_nothing(make_cluster) -> None:
    cluster = make_cluster(topics={"orders": (2, 3)}, config={"min.insync.replicas": "2"})
    with Background(cluster.bootstrap, "orders", 2) as bg:
        bg.wait_acked(2000)
        victim = cluster.leader("orders", 0)
        cluster.kill(victim)
        new = cluster.wait_for_leader("orders", 0, not_on=victim)
        assert new != victim and victim not in cluster.isr("orders", 0)
        assert cluster.partition("orders", 0).leader_epoch >= 1
        bg.wait_acked(len(bg.acked) + 2000)
        cluster.restart(victim)  # comes back, truncates what diverged, catches up
        cluster.wait_for_isr("orders", 0, size=3)
        cluster.wait_for_isr("orders", 1, size=3)
        bg.wait_acked(len(bg.acked) + 1000)
    check_exactly_once_in_order(bg, cluster)
    for p in (0, 1):
        cluster.wait_for_replication("orders", p)


def test_metadata_shows_offline_replicas_after_a_kill(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)})
    cluster.kill(2)
    cluster.wait_for_isr("t", 0, size=2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        (desc,) = admin.describe_topics(["t"])
        (p,) = desc["partitions"]
        assert p["offline_replicas"] == [2]
        assert 2 not in p["isr_nodes"]
        assert sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) == [0, 1]
    finally:
        admin.close()


def test_controller_failover_elects_leaders(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (3, 3)})
    cluster.kill(0)  # the controller itself
    for p in range(3):
        assert cluster.wait_for_leader("t", p, not_on=0) in (1, 2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for p in range(3):
        producer.send("t", b"after", partition=p).get(10)
    producer.close()


# -- ISR shrink and expand, min.insync.replicas ------------------------------------------------


def test_slow_follower_leaves_the_isr_and_returns(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)}, config={"min.insync.replicas": "3"})
    leader = cluster.leader("t")
    slow = next(n for n in range(3) if n != leader)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1, linger_ms=0)
    strict = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=0)
    stop = threading.Event()

    def keep_writing() -> None:  # a moving log end: a slow follower is then out of sync
        while not stop.is_set():
            producer.send("t", b"load")
            stop.wait(0.02)

    def send_in_sync(value: bytes) -> None:
        """acks=all once the whole ISR is back; under load (fast failover timings) a healthy
        follower may lag out for a moment, so a refusal then is retried after the ISR refills."""
        for attempt in range(5):
            assert sorted(cluster.wait_for_isr("t", size=3)) == [0, 1, 2]
            try:
                strict.send("t", value).get(10)
                return
            except NotEnoughReplicasError:
                if attempt == 4:
                    raise

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        send_in_sync(b"all-in-sync")
        cluster.slow_follower(slow, 1500)
        assert slow not in cluster.wait_for_isr("t", size=2)
        with pytest.raises(NotEnoughReplicasError):
            strict.send("t", b"refused").get(10)
        cluster.slow_follower(slow, 0)
        send_in_sync(b"accepted again")
    finally:
        stop.set()
        writer.join(10)
        producer.close()
        strict.close()
    values = consume(cluster.bootstrap, "t", 1, 1)[0]
    assert b"refused" not in values and b"accepted again" in values


def test_isr_shrinking_during_an_acks_all_wait(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)}, config={"min.insync.replicas": "3"})
    leader = cluster.leader("t")
    follower = next(n for n in range(3) if n != leader)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", retries=0, request_timeout_ms=15000
    )
    try:
        producer.send("t", b"first").get(10)
        cluster.cut_off_peers(follower)  # stays registered: only the lag detects it
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            producer.send("t", b"appended, not safe enough").get(15)
        assert follower not in cluster.isr("t")
        with pytest.raises(NotEnoughReplicasError):
            producer.send("t", b"refused").get(10)
        cluster.heal()
        cluster.wait_for_isr("t", size=3)
        producer.send("t", b"last").get(10)
    finally:
        producer.close()


# -- truncation, restarts, controlled shutdown -------------------------------------------------


def test_follower_truncates_what_a_deposed_leader_never_replicated(make_cluster) -> None:
    # a long lag: the cut-off leader stays in the ISR, so a follower can take over cleanly
    cluster = make_cluster(topics={"t": (1, 3)}, config={"replica.lag.time.max.ms": "60000"})
    old = cluster.leader("t")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(10):
        producer.send("t", b"acked-%d" % i).get(10)
    producer.close()
    cluster.wait_for_replication("t")
    cluster.cut_off_peers(old)
    lonely = KafkaProducer(bootstrap_servers=cluster.address(old), acks=1)
    for i in range(5):
        lonely.send("t", b"diverged-%d" % i).get(10)  # on the old leader only
    lonely.close()
    assert cluster.log_end_offset(old, "t") == 15
    cluster.kill(old)
    new = cluster.wait_for_leader("t", not_on=old)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(7):
        producer.send("t", b"new-%d" % i).get(10)
    producer.close()
    cluster.heal()
    cluster.restart(old)
    cluster.wait_for_isr("t", size=3)
    cluster.wait_for_replication("t")
    assert cluster.log_end_offset(old, "t") == 17
    assert segment_bytes(cluster, old, "t") == segment_bytes(cluster, new, "t")
    values = consume(cluster.bootstrap, "t", 1, 17)[0]
    assert values == [b"acked-%d" % i for i in range(10)] + [b"new-%d" % i for i in range(7)]


def test_controlled_shutdown_then_preferred_election(make_cluster) -> None:
    cluster = make_cluster(topics={"orders": (3, 3)}, config={"min.insync.replicas": "2"})
    with Background(cluster.bootstrap, "orders", 3) as bg:
        bg.wait_acked(1000)
        cluster.stop_broker(0)
        for p in range(3):  # moved before the broker went away, no waiting for a timeout
            st = cluster.partition("orders", p)
            assert st.leader != 0 and 0 not in st.isr
        bg.wait_acked(len(bg.acked) + 1000)
        cluster.start_broker(0)
        for p in range(3):
            cluster.wait_for_isr("orders", p, size=3)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.elect_leaders(0, {"orders": [0, 1, 2]})
        finally:
            admin.close()
        assert [cluster.leader("orders", p) for p in range(3)] == [0, 1, 2]
        bg.wait_acked(len(bg.acked) + 1000)
    check_exactly_once_in_order(bg, cluster)


def test_unclean_leader_election_is_off_by_default_and_can_be_enabled(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 2)})
    leader = cluster.leader("t")
    follower = 1 - leader
    cluster.cut_off_peers(follower)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1)
    producer.send("t", b"only on the leader").get(10)  # the follower now lags behind
    producer.close()
    cluster.wait_for_isr("t", members={leader})
    cluster.kill(leader)
    time.sleep(0.3)  # give a (wrong) election the chance to happen
    assert cluster.leader("t") == leader  # offline: no ISR member is alive
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        (desc,) = admin.describe_topics(["t"])
        assert desc["partitions"][0]["leader_id"] == -1
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    "t",
                    configs={"unclean.leader.election.enable": "true"},
                )
            ]
        )
    finally:
        admin.close()
    assert cluster.wait_for_leader("t", not_on=leader) == follower
    cluster.heal()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    producer.send("t", b"after").get(10)
    producer.close()


# -- fault hooks -------------------------------------------------------------------------------


def test_a_broker_cut_off_from_clients_still_replicates(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)})
    leader = cluster.leader("t")
    cut = next(n for n in range(3) if n != leader)
    cluster.cut_off_clients(cut)
    host, port = cluster.address(cut).split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.settimeout(5)
        assert sock.recv(1) == b""  # closed at once
    producer = KafkaProducer(bootstrap_servers=cluster.address(leader), acks="all")
    for i in range(20):
        producer.send("t", b"%d" % i).get(10)
    producer.close()
    assert sorted(cluster.isr("t")) == [0, 1, 2]
    cluster.wait_for_replication("t")
    assert cluster.log_end_offset(cut, "t") == 20


def test_injected_produce_errors_on_one_broker(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)})
    cluster.fail(cluster.leader("t"), "produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    with Background(cluster.bootstrap, "t", 1) as bg:
        bg.wait_acked(300)
    check_exactly_once_in_order(bg, cluster)


# -- topic changes made through one broker reach the others -----------------------------------


def test_topic_changes_reach_every_broker(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)})
    admin = KafkaAdminClient(bootstrap_servers=cluster.address(1))
    try:
        admin.create_partitions({"t": NewPartitions(3)})
        cluster.wait_until(
            lambda: all(cluster.log_end_offset(n, "t", 2) == 0 for n in range(3)),
            what="the new partition on every broker",
        )
        admin.delete_topics(["t"])
        cluster.wait_until(
            lambda: (
                not any((Path(cluster.data_dir) / f"broker-{n}" / "t-0").exists() for n in range(3))
            ),
            what="the topic's logs gone from every broker",
        )
    finally:
        admin.close()
    cluster.create_topic("t", 1, 3)  # the same name again: a new topic
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    producer.send("t", b"new").get(10)
    producer.close()
    assert consume(cluster.bootstrap, "t", 1, 1)[0] == [b"new"]


def test_whole_cluster_restarts_with_its_data(tmp_path: Path) -> None:
    config = {"replica.lag.time.max.ms": "1000", "replica.fetch.wait.max.ms": "100"}
    with Cluster(3, topics={"t": (3, 3)}, config=config, data_dir=str(tmp_path)) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(30):
            producer.send("t", b"%d" % i, partition=i % 3).get(10)
        producer.close()
    with Cluster(3, config=config, data_dir=str(tmp_path)) as cluster:
        for p in range(3):
            cluster.wait_for_leader("t", p)
            cluster.wait_for_isr("t", p, size=3)
        got = consume(cluster.bootstrap, "t", 3, 30)
        assert got == {p: [b"%d" % i for i in range(p, 30, 3)] for p in range(3)}
