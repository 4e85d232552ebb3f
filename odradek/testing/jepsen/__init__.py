"""Jepsen's Kafka "queue" workload and its checkers, for odradek or any Kafka deployment.

    from odradek.testing.jepsen import check
    report = check(history)              # a finished odradek.testing.jepsen.history.History
    assert report.valid, report.anomalies

Modules: `history` (the operations recorded), `checker` (lost writes, duplicates, inconsistent
offsets, poll skips, non-monotonic sends and polls, aborted and uncommitted reads, committed
offsets and high watermarks going back), `elle` (G0 / G1c / G2 dependency cycles), `workload`
(the clients over confluent-kafka), `javaclient` (the same processes over Apache Kafka's Java
client, one JVM per run), `hosts` (brokers and ZooKeeper in network namespaces with
real network faults), `deployment` (what the nemesis needs of a cluster on hosts: odradek's, or
Kafka's KRaft nodes in compat_tests/reference/kafka_hosts.py), `runner` (one seed).
`python -m bench.jepsen --seeds N` soaks (`--broker kafka`: the same seeds on Apache Kafka).
"""

from odradek.testing.jepsen.checker import KAFKA_GUARANTEES, Anomaly, Report, check

__all__ = ["KAFKA_GUARANTEES", "Anomaly", "Report", "check"]
