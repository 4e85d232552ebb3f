"""Batch reads of a topic range with `spark.read.format("kafka")`: by offsets or by timestamps.

    # offsets as JSON, per partition (-2 = earliest in startingOffsets, -1 = latest in ending)
    python -m spark_examples.batch_offsets --bootstrap localhost:9092 --topic page-views \
        --starting '{"page-views": {"0": 5, "1": -2, "2": 0}}' \
        --ending '{"page-views": {"0": 20, "1": -1, "2": 10}}'

    # by timestamp (epoch ms) for every partition: records with from <= timestamp < until
    python -m spark_examples.batch_offsets --bootstrap localhost:9092 --topic page-views \
        --from-ms 1767261600000 --until-ms 1767261900000

Offsets go to Spark as `startingOffsets` / `endingOffsets`; timestamps as
`startingOffsetsByTimestamp` / `endingOffsetsByTimestamp`, JSON maps from partition to
timestamp, which Spark turns into offsets with the admin client's ListOffsets by timestamp
(the first offset whose timestamp is at or after the one given; the ending one is exclusive).
Prints partition, offset, timestamp, key and value of every record in the range.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from spark_examples import kafka_io
from spark_examples.session import base_parser, build_session, kafka_options, run_main

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EARLIEST = -2
LATEST = -1


def offsets_json(topic: str, by_partition: Mapping[int, int]) -> str:
    """Spark's per-partition JSON: {"topic": {"0": value, ...}} (offsets or timestamps)."""
    return json.dumps({topic: {str(p): int(v) for p, v in sorted(by_partition.items())}})


def read_offsets(
    spark: SparkSession, bootstrap: str, topic: str, starting: str, ending: str
) -> DataFrame:
    """Records of `topic` between the JSON `starting` (inclusive) and `ending` (exclusive)."""
    options = kafka_options(
        bootstrap, subscribe=topic, startingOffsets=starting, endingOffsets=ending
    )
    return spark.read.format("kafka").options(**options).load()


def read_timestamps(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    starting: Mapping[int, int],
    ending: Mapping[int, int],
) -> DataFrame:
    """Records with starting[p] <= timestamp < ending[p] in each partition p (timestamps
    increasing within a partition). A start after a partition's last record reads nothing
    there (strategy "latest"); an end after it reads to the end."""
    options = kafka_options(
        bootstrap,
        subscribe=topic,
        startingOffsetsByTimestamp=offsets_json(topic, starting),
        endingOffsetsByTimestamp=offsets_json(topic, ending),
        startingOffsetsByTimestampStrategy="latest",
    )
    return spark.read.format("kafka").options(**options).load()


def readable(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
    ).orderBy("partition", "offset")


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--starting", help="startingOffsets JSON")
    parser.add_argument("--ending", help="endingOffsets JSON")
    parser.add_argument("--from-ms", type=int, help="first timestamp, every partition")
    parser.add_argument("--until-ms", type=int, help="end timestamp (exclusive), every partition")
    args = parser.parse_args(argv)
    by_offsets = args.starting is not None or args.ending is not None
    by_time = args.from_ms is not None or args.until_ms is not None
    if by_offsets == by_time:
        parser.error("give --starting/--ending, or --from-ms/--until-ms")

    spark = build_session("odradek-batch-offsets")
    try:
        if by_offsets:
            df = read_offsets(
                spark, args.bootstrap, args.topic, args.starting or "earliest",
                args.ending or "latest",
            )  # fmt: skip
        else:
            parts = kafka_io.partitions(args.bootstrap, args.topic)
            start = {p: args.from_ms if args.from_ms is not None else 0 for p in parts}
            end = {p: args.until_ms if args.until_ms is not None else 2**62 for p in parts}
            df = read_timestamps(spark, args.bootstrap, args.topic, start, end)
        rows = readable(df)
        rows.show(max(rows.count(), 1), truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
