"""On a three-broker cluster: DescribeQuorum names the controller as the one voter and the other
brokers as observers; `odradek log-dirs` reports every broker's replicas (issue 15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kafka import KafkaAdminClient


def test_quorum_and_log_dirs_of_every_broker(make_cluster):
    cluster = make_cluster(3, topics={"spread": (3, 2)})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        q = admin.describe_metadata_quorum()
    finally:
        admin.close()
    part = q["topics"][0]["partitions"][0]
    voters = [v["replica_id"] for v in part["current_voters"]]
    observers = sorted(o["replica_id"] for o in part["observers"])
    assert voters == [part["leader_id"]]
    assert sorted(voters + observers) == [0, 1, 2]
    assert [n["node_id"] for n in q["nodes"]] == voters

    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "log-dirs", "--json", "--topic-list", "spread"],
        env={**os.environ, "ODRADEK_BOOTSTRAP": cluster.bootstrap},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert sorted(b["broker"] for b in doc["brokers"]) == [0, 1, 2]
    replicas = sorted(
        p["partition"] for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"]
    )
    assert replicas == sorted(["spread-0", "spread-1", "spread-2"] * 2)  # two replicas each
