"""The Java AdminClient (kafka-clients 3.9) moves a partition between odradek brokers with
alterPartitionReassignments and follows it with listPartitionReassignments (KIP-455)."""

from __future__ import annotations

from kafka import KafkaProducer

from compat_tests.java_harness import JavaPrograms
from odradek.testing import Cluster
from odradek.testing.cluster import FAST_FAILOVER


def test_java_admin_reassigns_a_partition(java: JavaPrograms, tmp_path) -> None:
    with Cluster(3, topics={"j": (1, 2)}, config=FAST_FAILOVER, data_dir=str(tmp_path)) as cluster:
        assert cluster.partition("j", 0).replicas == [0, 1]
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(20):
            producer.send("j", b"%d" % i)
        producer.flush()
        producer.close()
        rc, out, err = java.run("Reassign", cluster.bootstrap, "j", "2,1", timeout=90)
        assert rc == 0, (out, err)
        lines = out.splitlines()
        assert lines[-1] == "DONE 2,1 2" or lines[-1] == "DONE 2,1 1", lines
        for line in lines[:-1]:  # any move listed while it ran is Kafka's shape of this one
            assert line == "LISTED j-0 [2, 1, 0] [2] [0]", lines
        cluster.wait_for_replication("j", 0)
        assert cluster.log_end_offset(2, "j", 0) == 20
        assert cluster.log_end_offset(0, "j", 0) == -1
