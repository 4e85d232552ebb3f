"""Every Spark example end to end against a real odradek broker, through Spark's stock Kafka
connector; output records are read back with confluent-kafka and checked one by one.

Needs the connector (spark_examples/session.py): by coordinates from the local Maven repository
scripts/setup.sh fills (.cache/m2), or ODRADEK_SPARK_JARS, or ODRADEK_SPARK_ONLINE=1; without
any of them every test here is skipped with the reason. Spark's access pattern is
still exercised without the jars by compat_tests/test_spark_access_pattern.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference.kafka_ref import KafkaReference
from spark_examples import (
    batch_offsets,
    etl,
    generate,
    kafka_io,
    page_views,
    read_committed,
    session,
    write_back,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REASON = session.unavailable_reason()
pytestmark = [pytest.mark.spark, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
REPO_ROOT = Path(__file__).resolve().parents[2]
QUERY_TIMEOUT_S = 180
# scripts/setup.sh's jars of spark_examples/maven/spark-*/pom.xml, with their SHA256SUMS
SETUP_JARS_DIR = REPO_ROOT / ".cache" / f"spark-kafka-{session.spark_version()}" / "lib"


def _acked_by_partition(acks: list[kafka_io.Record]) -> dict[int, list[kafka_io.Record]]:
    parts: dict[int, list[kafka_io.Record]] = {}
    for r in acks:
        parts.setdefault(r.partition, []).append(r)
    return {p: sorted(rs, key=lambda r: r.offset) for p, rs in parts.items()}


def _rows(df) -> set[tuple[int, int, bytes, bytes]]:  # noqa: ANN001 - a DataFrame
    return {(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in df.collect()}


def test_page_views_per_minute_streaming(
    spark_kafka: SparkSession, target: BrokerProcess | KafkaReference, topic_name: str
) -> None:
    """Structured Streaming on odradek and on Kafka 4.4 (`target`): the same counts."""
    views = generate.page_views(150)
    generate.produce_page_views(target.bootstrap, topic_name, views, partitions=3)
    table = topic_name.replace("-", "_")
    counts = page_views.views_per_minute(
        page_views.read_stream(spark_kafka, target.bootstrap, topic_name)
    )
    query = page_views.start(counts, table=table, once=True)
    assert query.awaitTermination(QUERY_TIMEOUT_S), "page views query did not finish"
    assert query.exception() is None
    rows = spark_kafka.sql(f"SELECT unix_millis(minute) AS m, user, views FROM {table}").collect()
    assert {(r.m, r.user): r.views for r in rows} == generate.views_per_minute(views)


def test_etl_restarted_midway_loses_and_repeats_nothing(
    spark_kafka: SparkSession, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    checkpoint = str(tmp_path / "checkpoint")
    start = generate.default_start()
    first = generate.page_views(90, start=start)
    second = generate.page_views(60, start=start, first_seq=90)
    generate.produce_page_views(broker.bootstrap, source, first, partitions=3)
    kafka_io.create_topic(broker.bootstrap, sink, 2)

    run = etl.run_once(spark_kafka, broker.bootstrap, source, sink, checkpoint, max_offsets=25)
    assert len([p for p in run.recentProgress if p["numInputRows"] > 0]) >= 3  # several batches
    kept_first = [v for v in first if v.page != etl.DROPPED_PAGE]
    out = kafka_io.read_all(broker.bootstrap, sink, expected=len(kept_first))
    assert sorted(json.loads(r.value)["seq"] for r in out) == [v.seq for v in kept_first]

    # The job is stopped; more views arrive; the same checkpoint carries on from there.
    generate.produce_page_views(broker.bootstrap, source, second, partitions=3)
    etl.run_once(spark_kafka, broker.bootstrap, source, sink, checkpoint, max_offsets=25)
    # And once more with nothing new: no output at all.
    idle = etl.run_once(spark_kafka, broker.bootstrap, source, sink, checkpoint, max_offsets=25)
    assert sum(p["numInputRows"] for p in idle.recentProgress) == 0

    kept = [v for v in first + second if v.page != etl.DROPPED_PAGE]
    out = kafka_io.read_all(broker.bootstrap, sink, expected=len(kept))
    seqs = [json.loads(r.value)["seq"] for r in out]
    assert len(seqs) == len(set(seqs)), "duplicated output records"
    assert sorted(seqs) == [v.seq for v in kept], "lost output records"
    by_seq = {v.seq: v for v in kept}
    for r in out:
        value = json.loads(r.value)
        view = by_seq[value["seq"]]
        assert r.key == view.key()
        assert (value["user"], value["page"], value["ts"]) == (view.user, view.page, view.ts)
        assert value["source_partition"] == view.partition(3)
        source_header = dict(r.headers)["source"]
        assert (
            source_header
            == f"{source}/{value['source_partition']}/{value['source_offset']}".encode()
        )


def test_batch_read_with_offsets_as_json(
    spark_kafka: SparkSession, broker: BrokerProcess, topic_name: str
) -> None:
    views = generate.page_views(60)
    acks = generate.produce_page_views(broker.bootstrap, topic_name, views, partitions=3)
    parts = _acked_by_partition(acks)
    starting = {0: 2, 1: batch_offsets.EARLIEST, 2: 5}
    ending = {0: 9, 1: batch_offsets.LATEST, 2: 6}
    df = batch_offsets.read_offsets(
        spark_kafka,
        broker.bootstrap,
        topic_name,
        batch_offsets.offsets_json(topic_name, starting),
        batch_offsets.offsets_json(topic_name, ending),
    )
    want = {
        (r.partition, r.offset, r.key, r.value)
        for r in acks
        if (r.partition == 0 and 2 <= r.offset < 9)
        or r.partition == 1
        or (r.partition == 2 and r.offset == 5)
    }
    assert _rows(df) == want
    assert len(want) == 7 + len(parts[1]) + 1


def test_batch_read_by_timestamp(
    spark_kafka: SparkSession, broker: BrokerProcess, topic_name: str
) -> None:
    views = generate.page_views(60)
    acks = generate.produce_page_views(broker.bootstrap, topic_name, views, partitions=3)
    parts = _acked_by_partition(acks)
    # Partition 0: a middle slice. 1: from its 4th record to past its end. 2: after its end.
    starting = {0: parts[0][3].timestamp, 1: parts[1][3].timestamp, 2: parts[2][-1].timestamp + 1}
    ending = {0: parts[0][10].timestamp, 1: parts[1][-1].timestamp + 60_000, 2: 2**62}
    df = batch_offsets.read_timestamps(spark_kafka, broker.bootstrap, topic_name, starting, ending)
    want = {
        (r.partition, r.offset, r.key, r.value)
        for r in acks
        if starting[r.partition] <= r.timestamp < ending[r.partition]
    }
    assert len(want) == 7 + len(parts[1]) - 3
    assert _rows(df) == want


def test_read_committed_from_a_transactional_producer(
    spark_kafka: SparkSession, broker: BrokerProcess, topic_name: str
) -> None:
    txns = generate.payments(committed=3, aborted=2, per_txn=4)
    generate.produce_payments(broker.bootstrap, topic_name, txns, f"{topic_name}-txn")
    committed = [p.value().decode() for t in txns for p in t if p.committed]
    everything = [p.value().decode() for t in txns for p in t]

    got = read_committed.values(
        read_committed.read_batch(spark_kafka, broker.bootstrap, topic_name)
    )
    assert got == committed
    got_all = read_committed.values(
        read_committed.read_batch(spark_kafka, broker.bootstrap, topic_name, "read_uncommitted")
    )
    assert got_all == everything
    table = topic_name.replace("-", "_")
    streamed = read_committed.read_streaming(spark_kafka, broker.bootstrap, topic_name, table)
    assert read_committed.values(streamed) == committed


def test_write_batch_routes_rows_to_topics(
    spark_kafka: SparkSession, broker: BrokerProcess, topic_name: str
) -> None:
    topics = [f"{topic_name}-eu", f"{topic_name}-us"]
    for t in topics:
        kafka_io.create_topic(broker.bootstrap, t, 2)
    write_back.write_batch(write_back.batch_frame(spark_kafka, topics, 20), broker.bootstrap)
    for index, topic in enumerate(topics):
        records = kafka_io.read_all(broker.bootstrap, topic, expected=10)
        ids = [i for i in range(20) if i % 2 == index]
        assert sorted(int(r.key) for r in records) == ids
        for r in records:
            value = json.loads(r.value)
            assert value == write_back.order(int(r.key), ["eu", "us"])
            assert r.partition == 0
            assert list(r.headers) == [
                ("producer", b"spark-batch"),
                ("region", value["region"].encode()),
            ]


def test_write_stream_from_files_restarts_without_repeats(
    spark_kafka: SparkSession, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    input_dir, checkpoint = tmp_path / "orders", str(tmp_path / "checkpoint")
    input_dir.mkdir()
    kafka_io.create_topic(broker.bootstrap, topic_name, 1)
    orders = [write_back.order(i, ["eu", "us"]) for i in range(12)]
    (input_dir / "1.json").write_text("".join(json.dumps(o) + "\n" for o in orders[:8]))
    write_back.run_stream(spark_kafka, broker.bootstrap, str(input_dir), topic_name, checkpoint)
    (input_dir / "2.json").write_text("".join(json.dumps(o) + "\n" for o in orders[8:]))
    write_back.run_stream(spark_kafka, broker.bootstrap, str(input_dir), topic_name, checkpoint)
    records = kafka_io.read_all(broker.bootstrap, topic_name, expected=12)
    assert sorted(int(r.key) for r in records) == list(range(12))
    assert sorted((json.loads(r.value) for r in records), key=lambda o: o["id"]) == orders


@pytest.mark.parametrize("jars", ["coordinates", "ODRADEK_SPARK_JARS"])
def test_batch_offsets_command_as_in_readme(
    broker: BrokerProcess, topic_name: str, jars: str
) -> None:
    """The README's command line, in a fresh process (its own JVM and jar resolution): as the
    run resolves the connector, and with ODRADEK_SPARK_JARS naming the jars setup.sh fetched
    (the offline path: spark.jars, hashes checked)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    if jars == session.JARS_ENV:
        if not SETUP_JARS_DIR.is_dir():
            pytest.skip(f"no {SETUP_JARS_DIR}: run scripts/setup.sh")
        env = {k: v for k, v in env.items() if not k.startswith("ODRADEK_SPARK_")}
        env[session.JARS_ENV] = str(SETUP_JARS_DIR)
        origin = f"{session.JARS_ENV}: spark-sql-kafka"
    else:
        env.pop(session.JARS_ENV, None)
        if not (env.get(session.REPOSITORIES_ENV) or env.get(session.ONLINE_ENV) == "1"):
            pytest.skip("no Maven repository with the connector: run scripts/setup.sh (.cache/m2)")
        origin = f"maven: spark.jars.packages={','.join(session.maven_coordinates())}\n"
    views = generate.page_views(30)
    acks = generate.produce_page_views(broker.bootstrap, topic_name, views, partitions=3)
    proc = subprocess.run(
        [
            sys.executable, "-m", "spark_examples.batch_offsets",
            "--bootstrap", broker.bootstrap, "--topic", topic_name,
            "--from-ms", str(views[10].ts), "--until-ms", str(views[20].ts),
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert f"Spark Kafka connector from {origin}" in proc.stderr, proc.stderr[-5000:]
    for r in acks:  # values are unique (they carry the view's seq)
        shown = r.value.decode() in proc.stdout
        assert shown == (views[10].ts <= r.timestamp < views[20].ts), (r, proc.stdout)
