"""A follower append to an offline log dir marks that partition failed and keeps the replica
fetcher alive for the others on the same leader (issue 11). Kafka: AbstractFetcherThread catches
KafkaStorageException per partition (markPartitionFailed) and goes on fetching the rest.

Broker 1 of two has two log dirs; topics "a" and "b" (one partition, replicas [0, 1]) are both
led by broker 0, so one fetcher on broker 1 follows both, and their logs sit in different dirs.
Before the fix the KafkaStorageError of "a" ended that fetcher task and "b" stopped replicating."""

from __future__ import annotations

import os

from kafka import KafkaProducer

from odradek.broker.cluster.local_cluster import LocalCluster


def test_follower_append_to_a_failed_dir_keeps_the_fetcher_going(make_cluster, monkeypatch):
    one_dir = LocalCluster.data_dir

    def two_dirs_on_broker_1(self: LocalCluster, node: int) -> str:
        base = one_dir(self, node)
        return f"{base}-a,{base}-b" if node == 1 else base

    monkeypatch.setattr(LocalCluster, "data_dir", two_dirs_on_broker_1)
    cluster = make_cluster(2)
    cluster.create_topic("a", 1, 2)
    cluster.create_topic("b", 1, 2)
    assert cluster.leader("a") == cluster.leader("b") == 0

    def dirs(c: LocalCluster) -> tuple[str, str]:
        topics = c.brokers[1].topics
        return topics.get("a", 0).log.log_dir.path, topics.get("b", 0).log.log_dir.path

    dir_a, dir_b = cluster.call(dirs)
    assert dir_a != dir_b

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1)
    for topic in ("a", "b"):
        producer.send(topic, b"before").get(timeout=20)
    cluster.wait_for_replication("a")
    cluster.wait_for_replication("b")

    cluster.fail_disk(1, "EIO", dir=dir_a)
    producer.send("a", b"to the failed dir").get(timeout=20)
    cluster.wait_until(
        lambda: cluster.call(lambda c: c.brokers[1].topics.get("a", 0).offline),
        what="broker 1's replica of a-0 to go offline",
    )
    for i in range(5):
        producer.send("b", b"after %d" % i).get(timeout=20)
    producer.close()
    # before the fix: the fetcher died with the KafkaStorageError, b-0 stays at 1 on broker 1
    cluster.wait_until(
        lambda: cluster.log_end_offset(1, "b") == 6, what="broker 1 to go on replicating b-0"
    )
    assert cluster.call(lambda c: c.brokers[1].stopped.is_set()) is False
    assert os.path.isdir(dir_b)
    # the leader drops the failed replica from a-0's ISR (it no longer fetches it)
    cluster.wait_for_isr("a", members={0})
    assert cluster.isr("b") == [0, 1] or set(cluster.isr("b")) == {0, 1}
