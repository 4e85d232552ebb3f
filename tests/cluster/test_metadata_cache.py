"""A broker reuses each topic's encoded Metadata answer while nothing about the topic changed
(handlers/metadata.py, TopicBytesCache); an ISR change (every broker still live) and a leader
killed must show in the next answer of every broker, for the full (all topics) request and for
one naming the topic."""

from __future__ import annotations

import threading

from kafka import KafkaProducer

from odradek.testing.raw import RawClient
from odradek.wire import protocol

V = 12
MR = protocol.MetadataRequest


def partition(address: str, all_topics: bool) -> tuple[int, list[int], list[int]]:
    """(leader, ISR, offline replicas) of t-0 as the broker at `address` answers."""
    topics = None if all_topics else [MR.MetadataRequestTopic(topic_id=None, name="t")]
    req = MR(
        topics=topics,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with RawClient(address) as client:
        resp = client.request(req, V)
    (t,) = [t for t in resp.topics if t.name == "t"]
    (p,) = t.partitions
    return p.leader_id, sorted(p.isr_nodes), sorted(p.offline_replicas)


def test_metadata_answers_show_a_leader_kill_at_once(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3), "other": (2, 3)})
    old = cluster.wait_for_leader("t")
    cluster.wait_for_isr("t", size=3)
    addresses = {n: cluster.address(n) for n in cluster.running()}
    for address in addresses.values():  # every broker encodes (and keeps) its answer
        for all_topics in (True, False):
            assert partition(address, all_topics) == (old, [0, 1, 2], [])
    cluster.kill(old)
    new = cluster.wait_for_leader("t", not_on=old)
    isr = sorted(cluster.wait_for_isr("t", size=2))
    assert old not in isr
    for node, address in addresses.items():
        if node == old:
            continue
        for all_topics in (True, False):
            assert partition(address, all_topics) == (new, isr, [old])


def test_metadata_answers_show_an_isr_shrink_at_once(make_cluster) -> None:
    cluster = make_cluster(topics={"t": (1, 3)})
    leader = cluster.wait_for_leader("t")
    cluster.wait_for_isr("t", size=3)
    slow = next(n for n in range(3) if n != leader)
    addresses = [cluster.address(n) for n in range(3)]
    for address in addresses:
        for all_topics in (True, False):
            assert partition(address, all_topics) == (leader, [0, 1, 2], [])
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1, linger_ms=0)
    stop = threading.Event()

    def keep_writing() -> None:  # a moving log end: the slowed follower falls out of sync
        while not stop.is_set():
            producer.send("t", b"load")
            stop.wait(0.02)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        cluster.slow_follower(slow, 1500)
        isr = sorted(cluster.wait_for_isr("t", size=2))
        assert slow not in isr
        for address in addresses:  # the slowed broker is live: only the ISR changed
            for all_topics in (True, False):
                assert partition(address, all_topics) == (leader, isr, [])
    finally:
        stop.set()
        writer.join(10)
        producer.close()
        cluster.slow_follower(slow, 0)
