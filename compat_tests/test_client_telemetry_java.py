"""KIP-714 with the Java client (kafka-clients 3.9.1): a producer whose client id a ClientMetrics
subscription matches pushes its metrics (compressed as it negotiates), and they appear on the
broker's /metrics labelled with its client id and the client instance id it was assigned."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from compat_tests.java_harness import JavaPrograms
from odradek.testing import Broker

pytestmark = pytest.mark.compat

REPO = Path(__file__).resolve().parents[1]


def test_java_producer_pushes_metrics(java: JavaPrograms) -> None:
    with Broker(topics={"t": 1}, config={"metrics.listen": "127.0.0.1:0"}) as broker:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": broker.bootstrap}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek",
                "client-metrics",
                "--alter",
                "--name",
                "java",
                "--metrics",
                "org.apache.kafka.producer.",
                "--interval",
                "500",
                "--match",
                "client_id=java-.*,client_software_name=apache-kafka-java",
            ],
            check=True,
            capture_output=True,
            timeout=60,
            env=env,
        )
        rc, out, err = java.run("TelemetryPush", broker.bootstrap, "t", "java-app", "2500")
        assert rc == 0, err
        instance = next(
            line.split()[1] for line in out.splitlines() if line.startswith("INSTANCE ")
        )
        port = broker.server.metrics.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        labelled = set()
        for family in text_string_to_metric_families(text):
            if family.name.startswith("odradek_client_producer_"):
                for s in family.samples:
                    labelled.add((s.labels.get("client_id"), s.labels.get("client_instance_id")))
        assert labelled, "no Java client metrics on /metrics"
        assert {cid for cid, _ in labelled} == {"java-app"}
        # the instance id the client was given (Java prints Kafka's base64 form) labels them
        (iid,) = {i for _, i in labelled}
        assert iid == str(uuid.UUID(bytes=base64.urlsafe_b64decode(instance + "==")))
