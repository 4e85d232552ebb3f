"""Structured Streaming: page views per minute per user, read from odradek with Spark's "kafka".

    python -m spark_examples.page_views --bootstrap localhost:9092 --topic page-views

`spark.readStream.format("kafka")` subscribes to the topic; the event time is the Kafka record
timestamp; a one-minute tumbling window with a two-minute watermark counts views per user (the
record key). Each micro-batch prints the changed counts to the console (update mode) until
Ctrl-C. `--once` processes what is in the topic now (trigger availableNow) and stops;
`--table NAME` keeps the complete result in an in-memory table `NAME` instead, printed at the
end and queryable with `spark.table(NAME)` while the session lives.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_examples.session import base_parser, build_session, kafka_options, run_main

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

WINDOW = "1 minute"
WATERMARK = "2 minutes"


def read_stream(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    *,
    starting: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    extra: dict[str, str] | None = None,
) -> DataFrame:
    """The topic as a streaming DataFrame with Kafka's columns (key, value, topic, partition,
    offset, timestamp, timestampType)."""
    options = kafka_options(bootstrap, subscribe=topic, startingOffsets=starting, **(extra or {}))
    if max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    return spark.readStream.format("kafka").options(**options).load()


def views_per_minute(kafka_rows: DataFrame, *, watermark: str | None = WATERMARK) -> DataFrame:
    """(minute, user, views) from rows with Kafka's columns; works on batch and streaming data."""
    from pyspark.sql import functions as F

    events = kafka_rows.select(F.col("key").cast("string").alias("user"), "timestamp")
    if watermark is not None:
        events = events.withWatermark("timestamp", watermark)
    return (
        events.groupBy(F.window("timestamp", WINDOW).alias("window"), "user")
        .count()
        .select(F.col("window.start").alias("minute"), "user", F.col("count").alias("views"))
    )


def start(
    counts: DataFrame,
    *,
    table: str | None = None,
    once: bool = False,
    checkpoint: str | None = None,
) -> StreamingQuery:
    """Console in update mode, or the complete result in memory table `table`."""
    writer = counts.writeStream
    if table is not None:
        writer = writer.format("memory").queryName(table).outputMode("complete")
    else:
        writer = writer.format("console").outputMode("update").option("truncate", "false")
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", checkpoint)
    writer = (
        writer.trigger(availableNow=True) if once else writer.trigger(processingTime="5 seconds")
    )
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--once", action="store_true", help="process what is there, then stop")
    parser.add_argument("--table", default=None, help="keep results in this in-memory table")
    parser.add_argument("--checkpoint", default=None, help="checkpoint directory")
    args = parser.parse_args(argv)

    spark = build_session("odradek-page-views")
    try:
        counts = views_per_minute(read_stream(spark, args.bootstrap, args.topic))
        query = start(counts, table=args.table, once=args.once, checkpoint=args.checkpoint)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        if args.table is not None:
            spark.table(args.table).orderBy("minute", "user").show(1000, truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
