"""Writing to odradek from Spark: `df.write.format("kafka")` and `writeStream.format("kafka")`.

    # batch: N rows routed to two topics by a "topic" column, with keys, headers, partitions
    python -m spark_examples.write_back --bootstrap localhost:9092 batch \
        --topics orders-eu,orders-us --count 20

    # streaming: JSON files landing in a directory -> a topic (trigger availableNow)
    python -m spark_examples.write_back --bootstrap localhost:9092 stream \
        --input-dir /tmp/odradek-orders --topic orders --checkpoint /tmp/odradek-orders-ckpt

The batch job builds a DataFrame with Spark's Kafka sink columns: `topic` (so each row picks
its topic), `key`, `value`, `headers` (array of key/value structs) and `partition`. The
streaming job reads `{"id": .., "region": .., "amount": ..}` JSON lines from `--input-dir`
and writes one record per line, keyed by id, to `--topic`; run it again with the same
checkpoint after more files arrive and it writes only the new lines.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_examples.session import base_parser, build_session, kafka_options, run_main

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

ORDER_SCHEMA = "id LONG, region STRING, amount DOUBLE"


def order(i: int, regions: Sequence[str]) -> dict[str, object]:
    return {"id": i, "region": regions[i % len(regions)], "amount": round(10 + i * 1.25, 2)}


def batch_frame(spark: SparkSession, topics: Sequence[str], count: int) -> DataFrame:
    """`count` orders as Kafka sink rows: order i goes to topics[i % len(topics)], partition 0."""
    from pyspark.sql import functions as F

    rows = [(topics[i % len(topics)], json.dumps(order(i, ["eu", "us"]))) for i in range(count)]
    df = spark.createDataFrame(rows, "topic STRING, json STRING")
    parsed = F.from_json("json", ORDER_SCHEMA)
    return df.select(
        "topic",
        parsed["id"].cast("string").alias("key"),
        F.col("json").alias("value"),
        F.array(
            F.struct(
                F.lit("producer").alias("key"), F.lit("spark-batch").cast("binary").alias("value")
            ),
            F.struct(F.lit("region").alias("key"), parsed["region"].cast("binary").alias("value")),
        ).alias("headers"),
        F.lit(0).cast("int").alias("partition"),
    )


def write_batch(df: DataFrame, bootstrap: str) -> None:
    df.write.format("kafka").options(**kafka_options(bootstrap)).save()


def stream_frame(spark: SparkSession, input_dir: str) -> DataFrame:
    """JSON order lines from files in `input_dir`, as Kafka sink rows (key, value)."""
    from pyspark.sql import functions as F

    orders = spark.readStream.schema(ORDER_SCHEMA).json(input_dir)
    return orders.select(
        F.col("id").cast("string").alias("key"),
        F.to_json(F.struct("id", "region", "amount")).alias("value"),
    )


def start_stream(rows: DataFrame, bootstrap: str, topic: str, checkpoint: str) -> StreamingQuery:
    return (
        rows.writeStream.format("kafka")
        .options(**kafka_options(bootstrap, topic=topic))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def run_stream(
    spark: SparkSession,
    bootstrap: str,
    input_dir: str,
    topic: str,
    checkpoint: str,
    timeout_s: int = 180,
) -> StreamingQuery:
    query = start_stream(stream_frame(spark, input_dir), bootstrap, topic, checkpoint)
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise TimeoutError(f"stream {input_dir} -> {topic} still running after {timeout_s}s")
    if query.exception() is not None:
        raise RuntimeError(f"stream query failed: {query.exception()}")
    return query


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    batch = sub.add_parser("batch", help="df.write.format('kafka')")
    batch.add_argument("--topics", default="orders-eu,orders-us", help="comma-separated")
    batch.add_argument("--count", type=int, default=20)
    stream = sub.add_parser("stream", help="writeStream.format('kafka') from JSON files")
    stream.add_argument("--input-dir", required=True)
    stream.add_argument("--topic", default="orders")
    stream.add_argument("--checkpoint", required=True)
    args = parser.parse_args(argv)

    spark = build_session("odradek-write-back")
    try:
        if args.mode == "batch":
            topics = [t for t in args.topics.split(",") if t]
            write_batch(batch_frame(spark, topics, args.count), args.bootstrap)
            print(f"wrote {args.count} records to {', '.join(topics)}")
        else:
            query = run_stream(spark, args.bootstrap, args.input_dir, args.topic, args.checkpoint)
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            print(f"wrote {rows} records to {args.topic}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
