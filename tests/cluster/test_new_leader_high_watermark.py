"""A new leader that has not learned the high watermark yet does not serve an end offset below
what the previous leader served (issue 11, chaos finding 2): a client's ListOffsets LATEST (and
a timestamp lookup finding nothing below the high watermark) answers OFFSET_NOT_AVAILABLE,
retriable, until the followers' fetches move the high watermark past the start offset of the
leader's epoch. Kafka: Partition.fetchOffsetForTimestamp / ReplicaManager.fetchOffset.

The lagging state is made deterministic: the follower about to lead is cut off from its peers
(so nothing teaches it the high watermark) and its high watermark is set back to 0, what a
broker restarted after kill -9 reads from a stale high-watermark checkpoint."""

from __future__ import annotations

import time

from kafka import KafkaProducer

from compat_tests import harness
from odradek.testing.raw import RawClient
from odradek.wire.errors import ErrorCode

LATEST = -1


def list_offset(address: str, topic: str, timestamp: int) -> tuple[int, int]:
    with RawClient(address) as client:
        return harness.list_offset(client, topic, 0, timestamp)


def test_new_leader_refuses_end_offsets_until_it_learns_the_high_watermark(make_cluster):
    cluster = make_cluster(3)
    cluster.create_topic("t", 1, 3)
    old = cluster.leader("t")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(10):
        producer.send("t", b"v%d" % i, partition=0, timestamp_ms=1_000 + i).get(timeout=20)
    producer.close()
    cluster.wait_for_replication("t")
    assert list_offset(cluster.address(old), "t", LATEST) == (ErrorCode.NONE, 10)

    # the follower controlled shutdown will hand leadership to: the first other ISR member
    new = next(r for r in cluster.partition("t").isr if r != old)
    cluster.cut_off_peers(new)

    def forget_high_watermark(c) -> None:
        c.brokers[new].topics.get("t", 0).high_watermark = 0

    cluster.call(forget_high_watermark)
    cluster.stop_broker(old)
    assert cluster.wait_for_leader("t", 0, not_on=old) == new
    assert cluster.high_watermark(new, "t") == 0
    # before the fix: (NONE, 0), the end of the partition moving back from 10
    assert list_offset(cluster.address(new), "t", LATEST)[0] == ErrorCode.OFFSET_NOT_AVAILABLE
    assert list_offset(cluster.address(new), "t", 1_005)[0] == ErrorCode.OFFSET_NOT_AVAILABLE

    cluster.cut_off_peers(new, cut=False)  # the other follower fetches: the HW moves on
    deadline = time.monotonic() + 20
    while list_offset(cluster.address(new), "t", LATEST) != (ErrorCode.NONE, 10):
        assert time.monotonic() < deadline, "the new leader never served its end offset"
        time.sleep(0.05)
    assert list_offset(cluster.address(new), "t", 1_005) == (ErrorCode.NONE, 5)
