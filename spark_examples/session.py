"""The SparkSession every example uses, and where Spark's Kafka connector jars come from.

Spark's Kafka source and sink (`spark-sql-kafka-0-10`, Spark's stock "kafka" format) are not in
the pyspark wheel. They come from one of two places, in this order:

1. `ODRADEK_SPARK_JARS=/some/dir` (offline): the jars in that directory, given to Spark as
   `spark.jars`. It must hold, for pyspark 4.0.x with Scala 2.13 (versions as in Spark's POM):

       spark-sql-kafka-0-10_2.13-<spark version>.jar
       spark-token-provider-kafka-0-10_2.13-<spark version>.jar
       kafka-clients-3.9.x.jar      (optional: else the kafka-clients 3.9.1 jar shipped in
                                     shigawire-apache-flink-libraries, a test dependency)
       commons-pool2-2.12.x.jar

   lz4-java, snappy-java, zstd-jni and slf4j, which kafka-clients needs, are already in pyspark.
2. Otherwise Maven coordinates in `spark.jars.packages`
   (`org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`); Spark's Ivy fetches it and
   its dependencies above from Maven Central, or from the repositories listed in
   `ODRADEK_SPARK_REPOSITORIES` (comma-separated URLs, passed as `spark.jars.repositories`).

Tests cannot know whether Maven Central answers without asking it, so they use the jars only
from `ODRADEK_SPARK_JARS`, or by coordinates when `ODRADEK_SPARK_ONLINE=1`; otherwise they skip
and say why (`unavailable_reason`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, files, version
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_ENV = "ODRADEK_SPARK_JARS"
ONLINE_ENV = "ODRADEK_SPARK_ONLINE"
REPOSITORIES_ENV = "ODRADEK_SPARK_REPOSITORIES"
SCALA_BINARY = "2.13"
# What spark-sql-kafka-0-10 4.0.x depends on; any patch release of these lines works.
KAFKA_CLIENTS_LINE = "3.9"
COMMONS_POOL2_LINE = "2.12"
FLINK_LIBS_WHEEL = "shigawire-apache-flink-libraries"

# Small, quick local runs: few shuffle partitions (the default of 200 makes every windowed
# aggregation write 200 state stores per micro-batch), no UI, UTC windows.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.adaptive.enabled": "false",
}


class ConnectorJarsError(RuntimeError):
    """ODRADEK_SPARK_JARS names a directory that lacks a jar the Kafka connector needs."""


def spark_version() -> str:
    """The installed pyspark version (without importing pyspark and starting anything)."""
    try:
        return version("pyspark")
    except PackageNotFoundError as exc:
        raise ConnectorJarsError(
            "pyspark is not installed: pip install -e '.[pipelines]' (scripts/setup.sh does)"
        ) from exc


def maven_coordinates(spark: str | None = None) -> list[str]:
    """The `spark.jars.packages` entries: the connector; Ivy adds its dependencies."""
    spark = spark or spark_version()
    return [f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{spark}"]


def required_jars(spark: str | None = None) -> dict[str, re.Pattern[str]]:
    """File-name patterns of the jars a directory must hold, by artifact."""
    spark = re.escape(spark or spark_version())
    scala = re.escape(SCALA_BINARY)
    # Maven names files <artifact>-<version>.jar; Spark's Ivy cache (~/.ivy2.5.2/jars) puts
    # "<group>_" in front, so a directory of either kind works.
    group = r"(?:[A-Za-z0-9.]+_)?"
    return {
        "spark-sql-kafka-0-10": re.compile(rf"{group}spark-sql-kafka-0-10_{scala}-{spark}\.jar"),
        "spark-token-provider-kafka-0-10": re.compile(
            rf"{group}spark-token-provider-kafka-0-10_{scala}-{spark}\.jar"
        ),
        "kafka-clients": re.compile(
            rf"{group}kafka-clients-{re.escape(KAFKA_CLIENTS_LINE)}\.\d+\.jar"
        ),
        "commons-pool2": re.compile(
            rf"{group}commons-pool2-{re.escape(COMMONS_POOL2_LINE)}\.\d+\.jar"
        ),
    }


def _bundled_kafka_clients() -> Path | None:
    """kafka-clients 3.9.1 from the shigawire-apache-flink-libraries wheel, if installed."""
    try:
        entries = files(FLINK_LIBS_WHEEL) or []
    except PackageNotFoundError:
        return None
    for entry in entries:
        if entry.as_posix() == "pyflink/lib/kafka-clients.jar":
            path = Path(str(entry.locate())).resolve()
            return path if path.is_file() else None
    return None


@dataclass(frozen=True, slots=True)
class ConnectorJars:
    """How this run gets the Kafka connector: local jar files, or Maven coordinates."""

    origin: str  # "ODRADEK_SPARK_JARS" or "maven"
    jars: tuple[Path, ...] = ()
    packages: tuple[str, ...] = ()
    repositories: tuple[str, ...] = field(default=())

    def spark_conf(self) -> dict[str, str]:
        conf: dict[str, str] = {}
        if self.jars:
            conf["spark.jars"] = ",".join(str(j) for j in self.jars)
        if self.packages:
            conf["spark.jars.packages"] = ",".join(self.packages)
        if self.repositories:
            conf["spark.jars.repositories"] = ",".join(self.repositories)
        return conf

    def describe(self) -> str:
        if self.jars:
            return f"{self.origin}: " + ", ".join(j.name for j in self.jars)
        return f"{self.origin}: spark.jars.packages={','.join(self.packages)}"


def jars_from_dir(directory: Path, spark: str | None = None) -> tuple[Path, ...]:
    """The connector jars in `directory`, in a fixed order; ConnectorJarsError names any missing."""
    if not directory.is_dir():
        raise ConnectorJarsError(f"{JARS_ENV}={directory} is not a directory")
    names = sorted(p.name for p in directory.iterdir() if p.suffix == ".jar")
    chosen: list[Path] = []
    missing: list[str] = []
    for artifact, pattern in required_jars(spark).items():
        matches = [n for n in names if pattern.fullmatch(n)]
        if matches:
            chosen.append(directory / matches[-1])
        elif artifact == "kafka-clients" and (bundled := _bundled_kafka_clients()):
            chosen.append(bundled)
        else:
            missing.append(f"{artifact} (a file matching {pattern.pattern})")
    if missing:
        raise ConnectorJarsError(f"{JARS_ENV}={directory} lacks: " + "; ".join(missing))
    return tuple(chosen)


def find_connector_jars(env: Mapping[str, str] | None = None) -> ConnectorJars:
    """The jars named by ODRADEK_SPARK_JARS when set, else the Maven coordinates."""
    env = os.environ if env is None else env
    if env.get(JARS_ENV):
        return ConnectorJars(JARS_ENV, jars=jars_from_dir(Path(env[JARS_ENV])))
    repos = tuple(r for r in env.get(REPOSITORIES_ENV, "").split(",") if r)
    return ConnectorJars("maven", packages=tuple(maven_coordinates()), repositories=repos)


def unavailable_reason(env: Mapping[str, str] | None = None) -> str | None:
    """Why a test cannot run the Spark Kafka connector here, or None when it can."""
    env = os.environ if env is None else env
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install -e '.[pipelines]')"
    if env.get(JARS_ENV):
        try:
            find_connector_jars(env)
        except ConnectorJarsError as exc:
            return str(exc)
        return None
    if env.get(ONLINE_ENV) == "1":
        return None
    coords = ", ".join(maven_coordinates())
    return (
        f"Spark Kafka connector jars not available: {JARS_ENV} is unset and {ONLINE_ENV}=1 is not "
        f"set (no Maven access assumed). Set {JARS_ENV} to a directory with "
        f"spark-sql-kafka-0-10_{SCALA_BINARY}-{spark_version()}.jar, "
        f"spark-token-provider-kafka-0-10_{SCALA_BINARY}-{spark_version()}.jar, "
        f"commons-pool2-{COMMONS_POOL2_LINE}.x.jar (kafka-clients-{KAFKA_CLIENTS_LINE}.x.jar "
        f"optional), or {ONLINE_ENV}=1 to fetch {coords}"
    )


def build_session(
    app_name: str,
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    jars: ConnectorJars | None = None,
    with_kafka: bool = True,
) -> SparkSession:
    """A local SparkSession with the Kafka connector on its classpath (unless with_kafka=False).

    Spark reads spark.jars / spark.jars.packages only when its JVM starts: an active session
    started without them is reused as it is, so build the session before anything else.
    """
    from pyspark.sql import SparkSession

    settings = dict(DEFAULT_CONF)
    if with_kafka:
        jars = jars or find_connector_jars()
        print(f"Spark Kafka connector from {jars.describe()}", file=sys.stderr)
        settings.update(jars.spark_conf())
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def kafka_options(bootstrap: str, **extra: str) -> dict[str, str]:
    """Options for format("kafka"): Kafka client settings take the "kafka." prefix."""
    return {"kafka.bootstrap.servers": bootstrap, **extra}


def base_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every example takes: where the broker is."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("ODRADEK_BOOTSTRAP", "localhost:9092"),
        help="odradek's bootstrap address (default: $ODRADEK_BOOTSTRAP or localhost:9092)",
    )
    return parser
