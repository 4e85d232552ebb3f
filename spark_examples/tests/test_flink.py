"""The PyFlink job (spark_examples/flink_page_views.py) against a real odradek broker.

Flink's stock Kafka connector (flink-connector-kafka 5.0.0-2.2 with kafka-clients 4.2.0, from
Maven Central as pipeline.jars: scripts/setup.sh fetches them) reads the page views and writes
per-minute counts back; the counts are read with confluent-kafka and compared with what the
generator's data must give. The job runs as the README's command, in its own process (its own
JVM), and is marked `compat`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference.kafka_ref import KafkaReference
from spark_examples import flink_page_views, generate, kafka_io
from spark_examples.session import ConnectorJarsError

pytestmark = pytest.mark.compat
pytest.importorskip("pyflink.table", reason="apache-flink is not installed (the `pipelines` extra)")

REPO_ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 270


def _epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp() * 1000)


def test_flink_page_views_per_minute(
    target: BrokerProcess | KafkaReference, topic_name: str
) -> None:
    """On odradek and on Kafka 4.4 (`target`): the same per-minute counts."""
    try:
        flink_page_views.connector_jars()
    except ConnectorJarsError as exc:  # setup.sh not run, or ODRADEK_PIPELINES=0
        pytest.skip(str(exc))
    source, sink = f"{topic_name}-views", f"{topic_name}-per-minute"
    views = generate.page_views(150)
    generate.produce_page_views(target.bootstrap, source, views, partitions=3)
    kafka_io.create_topic(target.bootstrap, sink, 1)

    proc = subprocess.run(
        [
            sys.executable, "-m", "spark_examples.flink_page_views",
            "--bootstrap", target.bootstrap, "--source", source, "--sink", sink,
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"{proc.stdout[-3000:]}\n{proc.stderr[-8000:]}\n{target.log_tail()}"
    )

    want = generate.views_per_minute(views)
    records = kafka_io.read_all(target.bootstrap, sink, expected=len(want))
    got: dict[tuple[int, str], int] = {}
    for r in records:
        value = json.loads(r.value)
        assert r.key == value["user"].encode()
        start, end = _epoch_ms(value["window_start"]), _epoch_ms(value["window_end"])
        assert end - start == generate.MINUTE_MS
        key = (start, value["user"])
        assert key not in got, f"window {key} emitted twice"
        got[key] = value["views"]
    assert got == want


def test_flink_without_the_connector_jars_says_so_in_one_line(tmp_path: Path) -> None:
    """`--jars` naming a directory without flink-connector-kafka: one line naming the Maven
    coordinates and ODRADEK_FLINK_JARS, exit status 2 (before any JVM starts)."""
    proc = subprocess.run(
        [sys.executable, "-m", "spark_examples.flink_page_views", "--jars", str(tmp_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "org.apache.flink:flink-connector-kafka:5.0.0-2.2" in lines[0]
    assert "ODRADEK_FLINK_JARS" in lines[0]
