"""Kafka-to-Kafka ETL with a checkpoint: stop it, start it again, nothing lost or repeated.

    python -m spark_examples.etl --bootstrap localhost:9092 --source page-views \
        --sink page-views-clean --checkpoint /tmp/odradek-etl-checkpoint

Reads page views with `spark.readStream.format("kafka")`, drops the ones for `/page/3` (say,
a health check), and writes the rest with `writeStream.format("kafka")` as JSON enriched with
the minute and the source coordinates, keyed by user, with a `source` header
("topic/partition/offset"). By default it runs with trigger availableNow: it processes what the
topic holds when it starts, in micro-batches of at most `--max-offsets` records, and stops.
Run it again later with the same `--checkpoint` and it carries on from where it stopped: the
checkpoint holds the offsets of every planned batch and a batch is committed only after its
output was written, so output records are neither lost nor repeated across a clean stop.
(Spark's Kafka sink is at-least-once: a crash in the middle of a batch rewrites that batch.)
`--forever` keeps running, a micro-batch every 5 seconds, until Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_examples.page_views import read_stream
from spark_examples.session import base_parser, build_session, kafka_options, run_main

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

VIEW_SCHEMA = "seq LONG, user STRING, page STRING, ts LONG"
DROPPED_PAGE = "/page/3"


def transform(kafka_rows: DataFrame) -> DataFrame:
    """Kafka rows of page views -> (key, value, headers) rows for the Kafka sink."""
    from pyspark.sql import functions as F

    view = F.from_json(F.col("value").cast("string"), VIEW_SCHEMA)
    source = F.concat_ws(
        "/", "topic", F.col("partition").cast("string"), F.col("offset").cast("string")
    )
    return (
        kafka_rows.select(view.alias("v"), "topic", "partition", "offset", source.alias("source"))
        .where(F.col("v.page") != F.lit(DROPPED_PAGE))
        .select(
            F.col("v.user").alias("key"),
            F.to_json(
                F.struct(
                    F.col("v.seq").alias("seq"),
                    F.col("v.user").alias("user"),
                    F.col("v.page").alias("page"),
                    F.col("v.ts").alias("ts"),
                    (F.floor(F.col("v.ts") / 60_000) * 60_000).alias("minute"),
                    F.col("partition").alias("source_partition"),
                    F.col("offset").alias("source_offset"),
                )
            ).alias("value"),
            F.array(
                F.struct(
                    F.lit("source").alias("key"), F.col("source").cast("binary").alias("value")
                )
            ).alias("headers"),
        )
    )


def start(
    rows: DataFrame,
    bootstrap: str,
    sink_topic: str,
    checkpoint: str,
    *,
    forever: bool = False,
) -> StreamingQuery:
    writer = (
        rows.writeStream.format("kafka")
        .options(**kafka_options(bootstrap, topic=sink_topic))
        .option("checkpointLocation", checkpoint)
        .queryName(f"etl-{sink_topic}")
    )
    writer = (
        writer.trigger(processingTime="5 seconds") if forever else writer.trigger(availableNow=True)
    )
    return writer.start()


def run_once(
    spark,  # noqa: ANN001 - a SparkSession
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    *,
    max_offsets: int = 100,
    timeout_s: float = 180,
) -> StreamingQuery:
    """Process what `source_topic` holds now (availableNow) and wait for the query to stop."""
    rows = transform(
        read_stream(spark, bootstrap, source_topic, max_offsets_per_trigger=max_offsets)
    )
    query = start(rows, bootstrap, sink_topic, checkpoint)
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise TimeoutError(f"ETL {source_topic} -> {sink_topic} still running after {timeout_s}s")
    if query.exception() is not None:
        raise RuntimeError(f"ETL query failed: {query.exception()}")
    return query


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", default="page-views", help="input topic")
    parser.add_argument("--sink", default="page-views-clean", help="output topic")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it!)")
    parser.add_argument("--max-offsets", type=int, default=100, help="records per micro-batch")
    parser.add_argument("--forever", action="store_true", help="keep running until Ctrl-C")
    args = parser.parse_args(argv)

    spark = build_session("odradek-etl")
    try:
        if not args.forever:
            query = run_once(
                spark, args.bootstrap, args.source, args.sink, args.checkpoint,
                max_offsets=args.max_offsets,
            )  # fmt: skip
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            print(f"ETL {args.source} -> {args.sink}: {rows} input rows this run")
            return 0
        rows_in = read_stream(
            spark, args.bootstrap, args.source, max_offsets_per_trigger=args.max_offsets
        )
        query = start(transform(rows_in), args.bootstrap, args.sink, args.checkpoint, forever=True)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
