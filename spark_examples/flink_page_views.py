"""Page views per minute per user with PyFlink and Flink's stock Kafka connector.

A Flink SQL job (Table API, no Python UDFs, so it runs entirely in Flink's JVM): a Kafka
source table over the page-view topic with the record timestamp as event time, a one-minute
TUMBLE window counting views per user, and a Kafka sink table keyed by user with JSON values
`{"user": ..., "window_start": "2026-01-01T10:00:00", "window_end": ..., "views": n}` (UTC).

    python -m spark_examples.flink_page_views --bootstrap localhost:9092 \
        --source page-views --sink flink-views-per-minute

By default the source is bounded (`scan.bounded.mode=latest-offset`): the job reads what is in
the topic when it starts, closes every window at the end of input and exits. `--unbounded`
keeps it running on new records until interrupted.

Jars: the `apache-flink` 2.2.1 wheel brings Flink itself (pyflink/lib/flink-dist-2.2.1.jar and
the table planner) but not the Kafka connector. As a Flink user adds it, the job gives Flink the
connector's jars from Maven Central as `pipeline.jars`: `org.apache.flink:flink-connector-kafka:
5.0.0-2.2` (the release for Flink 2.2) with what it depends on (kafka-clients 4.2.0, ...), which
scripts/setup.sh fetches into .cache/flink-kafka-5.0.0-2.2/lib (spark_examples/maven/flink-2.2/
pom.xml). `--jars DIR` or `ODRADEK_FLINK_JARS=DIR` names another directory of them. Nothing is
downloaded at run time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from spark_examples.session import ConnectorJarsError, base_parser, run_main

JOB_TIMEOUT_S = 240
JARS_ENV = "ODRADEK_FLINK_JARS"
CONNECTOR = "flink-connector-kafka"
CONNECTOR_VERSION = "5.0.0-2.2"
# Where scripts/setup.sh puts the connector and its dependencies (spark_examples/maven/flink-2.2)
DEFAULT_JARS_DIR = (
    Path(__file__).resolve().parents[1] / ".cache" / f"flink-kafka-{CONNECTOR_VERSION}" / "lib"
)


def connector_jars(
    directory: str | None = None, env: Mapping[str, str] | None = None
) -> list[Path]:
    """The jars of `directory` (else $ODRADEK_FLINK_JARS, else setup.sh's Maven-fetched set):
    flink-connector-kafka and kafka-clients must be there; ConnectorJarsError says what lacks."""
    env = os.environ if env is None else env
    where = Path(directory or env.get(JARS_ENV) or DEFAULT_JARS_DIR)
    jars = sorted(where.glob("*.jar")) if where.is_dir() else []
    missing = [
        name
        for name in (CONNECTOR, "kafka-clients")
        if not any(j.name.startswith(f"{name}-") for j in jars)
    ]
    if missing:
        raise ConnectorJarsError(
            f"Flink's Kafka connector jars are missing from {where} ({', '.join(missing)}): run "
            f"scripts/setup.sh (Maven: org.apache.flink:{CONNECTOR}:{CONNECTOR_VERSION}), or "
            f"set {JARS_ENV} to a directory with them"
        )
    return jars


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def source_ddl(bootstrap: str, topic: str, *, bounded: bool = True) -> str:
    bounded_opt = ",\n  'scan.bounded.mode' = 'latest-offset'" if bounded else ""
    return f"""
CREATE TABLE page_views (
  `user` STRING,
  page STRING,
  seq BIGINT,
  event_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = {_quote(topic)},
  'properties.bootstrap.servers' = {_quote(bootstrap)},
  'scan.startup.mode' = 'earliest-offset'{bounded_opt},
  'format' = 'json',
  'json.fail-on-missing-field' = 'false'
)"""


def sink_ddl(bootstrap: str, topic: str) -> str:
    return f"""
CREATE TABLE views_per_minute (
  `user` STRING,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  `views` BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = {_quote(topic)},
  'properties.bootstrap.servers' = {_quote(bootstrap)},
  'key.format' = 'raw',
  'key.fields' = 'user',
  'value.format' = 'json',
  'value.fields-include' = 'ALL',
  'value.json.timestamp-format.standard' = 'ISO-8601',
  'sink.delivery-guarantee' = 'at-least-once'
)"""


INSERT_SQL = """
INSERT INTO views_per_minute
SELECT `user`, window_start, window_end, COUNT(*) AS `views`
FROM TABLE(TUMBLE(TABLE page_views, DESCRIPTOR(event_time), INTERVAL '1' MINUTE))
GROUP BY `user`, window_start, window_end"""


def run(
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    *,
    bounded: bool = True,
    timeout_s: float | None = JOB_TIMEOUT_S,
    jars: Sequence[Path] = (),
) -> None:
    """Submit the job to a local Flink mini-cluster and wait for it (bounded: until it ends)."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    jars = list(jars) or connector_jars()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    # pipeline.jars: file URLs, `;`-separated, as Flink's docs have PyFlink users add connectors
    config.set("pipeline.jars", ";".join(j.resolve().as_uri() for j in jars))
    config.set("parallelism.default", "1")
    config.set("table.local-time-zone", "UTC")
    config.set("pipeline.name", f"odradek page views {source_topic} -> {sink_topic}")
    env.execute_sql(source_ddl(bootstrap, source_topic, bounded=bounded))
    env.execute_sql(sink_ddl(bootstrap, sink_topic))
    result = env.execute_sql(INSERT_SQL)
    if timeout_s is None:
        result.wait()
        return
    # TableResult.await(timeout) returns once the job has ended (a failed job raises) and throws
    # java.util.concurrent.TimeoutException when it is still running.
    try:
        result.wait(int(timeout_s * 1000))
    except Exception as exc:
        if "TimeoutException" not in str(exc):
            raise
        client = result.get_job_client()
        if client is not None:
            client.cancel().result()
        raise TimeoutError(f"Flink job still running after {timeout_s}s; cancelled") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", default="page-views", help="input topic")
    parser.add_argument("--sink", default="flink-views-per-minute", help="output topic")
    parser.add_argument("--unbounded", action="store_true", help="keep running on new records")
    parser.add_argument(
        "--jars",
        help=f"directory with {CONNECTOR} and kafka-clients (default: ${JARS_ENV} or "
        "what scripts/setup.sh fetched from Maven Central)",
    )
    args = parser.parse_args(argv)
    jars = connector_jars(args.jars)
    run(
        args.bootstrap,
        args.source,
        args.sink,
        bounded=not args.unbounded,
        timeout_s=None if args.unbounded else JOB_TIMEOUT_S,
        jars=jars,
    )
    print(f"flink job done: {args.source} -> {args.sink}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(lambda: main()))
