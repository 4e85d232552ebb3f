"""The examples' Spark transformations and query plumbing, on local data in Kafka's row shape.

These need pyspark but not the Kafka connector jars, so they run everywhere the `pipelines`
extra is installed: the same functions the Kafka tests (test_spark_kafka.py) drive end to end
get Kafka-shaped rows from a DataFrame or a parquet file stream here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_examples import etl, generate, page_views, read_committed, write_back

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

KAFKA_ROW = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset LONG, "
    "timestamp TIMESTAMP, timestampType INT"
)


def kafka_rows(spark: SparkSession, views: Sequence[generate.PageView], topic: str) -> DataFrame:
    """The views as Spark's Kafka source would show them: 3 partitions, offsets from 0."""
    next_offset = [0, 0, 0]
    rows = []
    for v in views:
        p = v.partition(3)
        ts = datetime.fromtimestamp(v.ts / 1000, tz=UTC)
        rows.append((v.key(), v.value(), topic, p, next_offset[p], ts, 0))
        next_offset[p] += 1
    return spark.createDataFrame(rows, KAFKA_ROW)


def minute_counts(df: DataFrame) -> dict[tuple[int, str], int]:
    from pyspark.sql import functions as F

    rows = df.select(F.unix_millis("minute").alias("m"), "user", "views").collect()
    return {(r.m, r.user): r.views for r in rows}


def test_views_per_minute_batch(spark: SparkSession) -> None:
    views = generate.page_views(100)
    got = minute_counts(page_views.views_per_minute(kafka_rows(spark, views, "pv")))
    assert got == generate.views_per_minute(views)


def test_views_per_minute_streaming_to_memory_table(spark: SparkSession, tmp_path: Path) -> None:
    views = generate.page_views(80)
    kafka_rows(spark, views[:50], "pv").write.parquet(str(tmp_path / "in" / "a"))
    stream = spark.readStream.schema(KAFKA_ROW).parquet(str(tmp_path / "in" / "*"))
    query = page_views.start(
        page_views.views_per_minute(stream),
        table="local_views_per_minute",
        once=True,
        checkpoint=str(tmp_path / "ckpt"),
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert minute_counts(spark.table("local_views_per_minute")) == generate.views_per_minute(
        views[:50]
    )


def test_etl_transform(spark: SparkSession) -> None:
    views = generate.page_views(40)
    out = etl.transform(kafka_rows(spark, views, "src")).collect()
    kept = [v for v in views if v.page != etl.DROPPED_PAGE]
    assert len(out) == len(kept) < len(views)
    by_seq = {json.loads(r.value)["seq"]: r for r in out}
    assert sorted(by_seq) == [v.seq for v in kept]
    for v in kept:
        row = by_seq[v.seq]
        value = json.loads(row.value)
        assert row.key == v.user
        assert value["user"] == v.user and value["page"] == v.page and value["ts"] == v.ts
        assert value["minute"] == v.ts // 60_000 * 60_000
        assert value["source_partition"] == v.partition(3)
        header = row.headers[0]
        assert header.key == "source"
        assert bytes(header.value).decode() == f"src/{v.partition(3)}/{value['source_offset']}"


def test_write_back_batch_frame_has_kafka_sink_columns(spark: SparkSession) -> None:
    df = write_back.batch_frame(spark, ["t-a", "t-b"], 6)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {
        "topic": "string",
        "key": "string",
        "value": "string",
        "headers": "array<struct<key:string,value:binary>>",
        "partition": "int",
    }
    rows = df.collect()
    assert [r.topic for r in rows] == ["t-a", "t-b"] * 3
    assert [json.loads(r.value)["id"] for r in rows] == list(range(6))
    assert [(h.key, bytes(h.value)) for h in rows[1].headers] == [
        ("producer", b"spark-batch"),
        ("region", b"us"),
    ]


def test_write_back_stream_frame_reads_new_files_only(spark: SparkSession, tmp_path: Path) -> None:
    input_dir = tmp_path / "orders"
    input_dir.mkdir()
    out_dir = tmp_path / "out"

    def run() -> int:
        # A file sink stands in for Kafka here: like the Kafka sink it resumes from a checkpoint.
        query = (
            write_back.stream_frame(spark, str(input_dir))
            .writeStream.format("parquet")
            .option("path", str(out_dir))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None
        return sum(p["numInputRows"] for p in query.recentProgress)

    lines = [json.dumps(write_back.order(i, ["eu", "us"])) for i in range(5)]
    (input_dir / "1.json").write_text("\n".join(lines) + "\n")
    assert run() == 5
    lines = [json.dumps(write_back.order(i, ["eu", "us"])) for i in range(5, 8)]
    (input_dir / "2.json").write_text("\n".join(lines) + "\n")
    assert run() == 3
    rows = spark.read.parquet(str(out_dir)).collect()
    assert sorted(int(r.key) for r in rows) == list(range(8))
    assert json.loads(rows[0].value).keys() == {"id", "region", "amount"}


def test_read_committed_values_in_log_order(spark: SparkSession) -> None:
    rows = [(b"k", b"b", "t", 0, 1), (b"k", b"a", "t", 0, 0), (b"k", b"c", "t", 1, 0)]
    df = spark.createDataFrame(
        rows, "key BINARY, value BINARY, topic STRING, partition INT, offset LONG"
    )
    assert read_committed.values(df) == ["a", "b", "c"]
