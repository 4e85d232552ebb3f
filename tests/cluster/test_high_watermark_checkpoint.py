"""High watermarks reach disk every replica.high.watermark.checkpoint.interval.ms (Kafka: 5000 ms
by default; it was a 60 s constant), so a broker restarted after kill -9 starts from a high
watermark no older than that interval (issue 11).

The restarted follower is cut off from its peers before it starts, so the only high watermark
it can have is the one it read from its checkpoint file."""

from __future__ import annotations

import os

from kafka import KafkaProducer

from odradek.log.checkpoints import HIGH_WATERMARK, read_checkpoint

RECORDS = 10


def test_killed_follower_restarts_with_a_recent_high_watermark(make_cluster):
    cluster = make_cluster(3, config={"replica.high.watermark.checkpoint.interval.ms": "50"})
    cluster.create_topic("t", 1, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(RECORDS):
        producer.send("t", b"v%d" % i, partition=0).get(timeout=20)
    producer.close()
    cluster.wait_for_replication("t")
    follower = next(r for r in cluster.partition("t").replicas if r != cluster.leader("t"))
    cluster.wait_until(
        lambda: cluster.high_watermark(follower, "t") == RECORDS, what="the follower's HW"
    )
    checkpoint = os.path.join(cluster.call(lambda c: c.data_dir(follower)), HIGH_WATERMARK)
    # before the fix: nothing written for 60 s
    cluster.wait_until(
        lambda: read_checkpoint(checkpoint).get(("t", 0)) == RECORDS,
        timeout=10,
        what="the high watermark in the checkpoint file",
    )

    cluster.kill(follower)
    cluster.cut_off_peers(follower)  # nothing but the checkpoint can tell it the HW
    cluster.start_broker(follower)
    assert cluster.high_watermark(follower, "t") == RECORDS
    cluster.heal()
