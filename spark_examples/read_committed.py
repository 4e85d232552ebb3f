"""Reading a transactional producer's topic with `kafka.isolation.level=read_committed`.

    python -m spark_examples.generate --bootstrap localhost:9092 transactions --topic payments
    python -m spark_examples.read_committed --bootstrap localhost:9092 --topic payments

The generator commits some transactions and aborts others (after their records reached the
log). With `kafka.isolation.level=read_committed` Spark's consumers fetch only up to the last
stable offset and drop aborted records; Spark steps over the offsets they and the transaction
markers occupy. `--isolation read_uncommitted` shows every record, aborted ones included.
`--stream` reads the same way with `spark.readStream` (trigger availableNow) into a memory
table instead of `spark.read`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_examples.page_views import read_stream
from spark_examples.session import base_parser, build_session, kafka_options, run_main

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def read_batch(
    spark: SparkSession, bootstrap: str, topic: str, isolation: str = "read_committed"
) -> DataFrame:
    options = kafka_options(
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        endingOffsets="latest",
        **{"kafka.isolation.level": isolation},
    )
    return spark.read.format("kafka").options(**options).load()


def read_streaming(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    table: str,
    isolation: str = "read_committed",
    timeout_s: int = 180,
) -> DataFrame:
    """The same through readStream (availableNow) into memory table `table`; returns it."""
    rows = read_stream(spark, bootstrap, topic, extra={"kafka.isolation.level": isolation})
    query = (
        rows.select("partition", "offset", "key", "value")
        .writeStream.format("memory")
        .queryName(table)
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise TimeoutError(f"read_committed stream on {topic} still running after {timeout_s}s")
    return spark.table(table)


def values(df: DataFrame) -> list[str]:
    """The record values as strings, in (partition, offset) order."""
    return [
        r.v
        for r in df.orderBy("partition", "offset")
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--topic", default="payments")
    parser.add_argument("--isolation", choices=ISOLATION_LEVELS, default="read_committed")
    parser.add_argument("--stream", action="store_true", help="use readStream (availableNow)")
    args = parser.parse_args(argv)

    spark = build_session("odradek-read-committed")
    try:
        if args.stream:
            df = read_streaming(spark, args.bootstrap, args.topic, "payments_seen", args.isolation)
        else:
            df = read_batch(spark, args.bootstrap, args.topic, args.isolation)
        seen = values(df)
        for value in seen:
            print(value)
        print(f"{len(seen)} records with {args.isolation}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
