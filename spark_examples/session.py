"""The SparkSession every example uses, and where Spark's Kafka connector jars come from.

Spark's Kafka source and sink (`spark-sql-kafka-0-10`, Spark's stock "kafka" format) are not in
the pyspark wheel. They come from one of two places, in this order:

1. `ODRADEK_SPARK_JARS=/some/dir` (offline): the jars in that directory, given to Spark as
   `spark.jars`. It must hold, for pyspark 4.0.x with Scala 2.13 (versions as in Spark's POM;
   the connector may be any patch release of the installed pyspark's minor line, the exact
   one preferred: Spark keeps a minor line's patch releases compatible, and the 4.0.0
   connector runs on pyspark 4.0.5):

       spark-sql-kafka-0-10_2.13-<spark 4.0.x>.jar
       spark-token-provider-kafka-0-10_2.13-<spark 4.0.x>.jar
       kafka-clients-3.9.x.jar      (optional: else the kafka-clients 3.9.1 jar shipped in
                                     shigawire-apache-flink-libraries, a test dependency)
       commons-pool2-2.12.x.jar

   lz4-java, snappy-java, zstd-jni and slf4j, which kafka-clients needs, are already in pyspark.
   When the directory has a `SHA256SUMS` file (`sha256sum` format) or a README.md with a
   `| file | sha256 |` table, each chosen jar listed there must match its hash.
2. Otherwise Maven coordinates in `spark.jars.packages`
   (`org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`); Spark's Ivy fetches it and
   its dependencies above from Maven Central, or from the repositories listed in
   `ODRADEK_SPARK_REPOSITORIES` (comma-separated URLs, passed as `spark.jars.repositories`).

Offline (neither Maven Central nor a repository of `ODRADEK_SPARK_REPOSITORIES` takes a
connection, and no proxy is set) and without `ODRADEK_SPARK_JARS`, the jars Spark's Ivy fetched
on an earlier run (`~/.ivy2.5.2/jars`) are used when they are all there; otherwise the example
stops with one line naming what is missing and how to provide it.

Tests cannot know whether Maven Central answers without asking it, so they use the jars only
from `ODRADEK_SPARK_JARS`, or by coordinates when `ODRADEK_SPARK_ONLINE=1`; otherwise they skip
and say why (`unavailable_reason`). When `ODRADEK_SPARK_JARS` is unset and the folder
`../shared/sparkjars` exists beside the checkout (as in this project's CI), the tests use it
(`shared_jars_dir`, spark_examples/tests/conftest.py).

A wrong `ODRADEK_SPARK_JARS` stops an example with one line naming what is missing
(`run_main`), not a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, files, version
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_ENV = "ODRADEK_SPARK_JARS"
ONLINE_ENV = "ODRADEK_SPARK_ONLINE"
REPOSITORIES_ENV = "ODRADEK_SPARK_REPOSITORIES"
# Spark's Ivy looks in Maven Central (and the local caches) for spark.jars.packages
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
REACH_TIMEOUT_S = 3.0
IVY_DIR = ".ivy2.5.2"  # spark.jars.ivy's default in Spark 4
SCALA_BINARY = "2.13"
# What spark-sql-kafka-0-10 4.0.x depends on; any patch release of these lines works.
KAFKA_CLIENTS_LINE = "3.9"
COMMONS_POOL2_LINE = "2.12"
FLINK_LIBS_WHEEL = "shigawire-apache-flink-libraries"
# Beside the checkout (CI has ../shared next to the clone): the connector jars, for offline runs.
SHARED_JARS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "sparkjars"

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


def minor_line(spark: str) -> str:
    """ "4.0.5" -> "4.0": the connector of any patch release of this line fits."""
    return ".".join(spark.split(".")[:2])


def required_jars(spark: str | None = None) -> dict[str, re.Pattern[str]]:
    """File-name patterns of the jars a directory must hold, by artifact."""
    spark = re.escape(minor_line(spark or spark_version())) + r"\.\d+"
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


def _expected_name(artifact: str, spark: str) -> str:
    """The file a missing artifact is looked for as, for people: `commons-pool2-2.12.x.jar`."""
    line = {
        "kafka-clients": KAFKA_CLIENTS_LINE,
        "commons-pool2": COMMONS_POOL2_LINE,
    }.get(artifact)
    if line is None:
        return f"{artifact}_{SCALA_BINARY}-{minor_line(spark)}.x.jar"
    return f"{artifact}-{line}.x.jar"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name.rsplit("-", 1)[-1]))


_README_HASH_ROW = re.compile(r"\|\s*`?([^|`]+\.jar)`?\s*\|\s*([0-9a-fA-F]{64})\s*\|")


def listed_hashes(directory: Path) -> dict[str, str]:
    """sha256 by file name, from `SHA256SUMS` (sha256sum's format) or a README.md table row
    `| name.jar | <64 hex digits> |` in `directory`; empty when neither is there."""
    hashes: dict[str, str] = {}
    sums, readme = directory / "SHA256SUMS", directory / "README.md"
    if sums.is_file():
        for line in sums.read_text(encoding="utf-8").splitlines():
            if m := re.fullmatch(r"([0-9a-fA-F]{64})\s+\*?(\S+)", line.strip()):
                hashes[Path(m.group(2)).name] = m.group(1).lower()
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8").splitlines():
            if m := _README_HASH_ROW.fullmatch(line.strip()):
                hashes.setdefault(m.group(1).strip(), m.group(2).lower())
    return hashes


def verify_hashes(directory: Path, jars: tuple[Path, ...]) -> None:
    """ConnectorJarsError when a jar of `directory` differs from the hash listed beside it."""
    hashes = listed_hashes(directory)
    for jar in jars:
        want = hashes.get(jar.name)
        if want is None or jar.parent != directory:
            continue
        have = hashlib.sha256(jar.read_bytes()).hexdigest()
        if have != want:
            raise ConnectorJarsError(
                f"{JARS_ENV}={directory}: {jar.name} has sha256 {have}, "
                f"but {want} is listed beside it (a damaged or different jar)"
            )


def jars_from_dir(directory: Path, spark: str | None = None) -> tuple[Path, ...]:
    """The connector jars in `directory`, in a fixed order; ConnectorJarsError names any missing
    (or any whose hash differs from the one listed beside it)."""
    if not directory.is_dir():
        raise ConnectorJarsError(f"{JARS_ENV}={directory} is not a directory")
    names = sorted(p.name for p in directory.iterdir() if p.suffix == ".jar")
    installed = spark or spark_version()
    chosen: list[Path] = []
    missing: list[str] = []
    for artifact, pattern in required_jars(installed).items():
        matches = [n for n in names if pattern.fullmatch(n)]
        if matches:
            exact = [n for n in matches if n.endswith(f"-{installed}.jar")]
            chosen.append(directory / (exact or sorted(matches, key=_version_key))[-1])
        elif artifact == "kafka-clients" and (bundled := _bundled_kafka_clients()):
            chosen.append(bundled)
        else:
            missing.append(_expected_name(artifact, installed))
    if missing:
        raise ConnectorJarsError(f"{JARS_ENV}={directory} lacks: " + "; ".join(missing))
    verify_hashes(directory, tuple(chosen))
    return tuple(chosen)


def shared_jars_dir() -> Path | None:
    """`../shared/sparkjars` beside the checkout, when it exists (this project's CI)."""
    return SHARED_JARS_DIR if SHARED_JARS_DIR.is_dir() else None


def jar_list(spark: str | None = None) -> str:
    """The jars a directory must hold, for a message."""
    line = minor_line(spark or spark_version())
    return (
        f"spark-sql-kafka-0-10_{SCALA_BINARY}-{line}.x.jar, "
        f"spark-token-provider-kafka-0-10_{SCALA_BINARY}-{line}.x.jar, "
        f"commons-pool2-{COMMONS_POOL2_LINE}.x.jar (kafka-clients-{KAFKA_CLIENTS_LINE}.x.jar "
        "optional)"
    )


def _reachable(url: str, timeout_s: float = REACH_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the host of repository `url` opens (DNS included)."""
    parsed = urlsplit(url if "://" in url else f"https://{url}")
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def ivy_jars_dir(env: Mapping[str, str]) -> Path:
    """Where Spark's Ivy keeps the jars it fetched (`~/.ivy2.5.2/jars`, Spark 4)."""
    home = env.get("HOME") or str(Path.home())
    return Path(home) / IVY_DIR / "jars"


def find_connector_jars(
    env: Mapping[str, str] | None = None, reachable: Callable[[str], bool] | None = None
) -> ConnectorJars:
    """The jars named by ODRADEK_SPARK_JARS when set, else the Maven coordinates. Offline (no
    Maven repository answers, no proxy set), the jars Spark's Ivy fetched before, or else a
    ConnectorJarsError saying in one line what is missing: Ivy would print a hundred lines and
    Spark's gateway would fail without naming ODRADEK_SPARK_JARS."""
    env = os.environ if env is None else env
    if env.get(JARS_ENV):
        return ConnectorJars(JARS_ENV, jars=jars_from_dir(Path(env[JARS_ENV])))
    repos = tuple(r for r in env.get(REPOSITORIES_ENV, "").split(",") if r)
    proxied = any(env.get(k) for k in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"))
    reachable = reachable or _reachable
    if not proxied and not any(reachable(url) for url in (MAVEN_CENTRAL, *repos)):
        try:
            return ConnectorJars("Ivy's cache", jars=jars_from_dir(ivy_jars_dir(env)))
        except ConnectorJarsError:
            pass
        where = ", ".join(urlsplit(url).hostname or url for url in (MAVEN_CENTRAL, *repos))
        raise ConnectorJarsError(
            f"the Spark Kafka connector jars are missing: {JARS_ENV} is unset and no Maven "
            f"repository can be reached ({where}) to fetch them; set {JARS_ENV} to a "
            f"directory with {jar_list()}, or {REPOSITORIES_ENV} to a reachable repository"
        )
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
        f"set (no Maven access assumed). Set {JARS_ENV} to a directory with {jar_list()}, or "
        f"{ONLINE_ENV}=1 to fetch {coords}"
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


def run_main(main: Callable[[], int]) -> int:
    """An example's entry point: a connector-jar problem (a wrong ODRADEK_SPARK_JARS, pyspark
    missing) is one line on stderr and exit status 2, not a traceback."""
    try:
        return main()
    except ConnectorJarsError as exc:
        prog = os.path.basename(sys.argv[0]) or "spark_examples"
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2


def base_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every example takes: where the broker is."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("ODRADEK_BOOTSTRAP", "localhost:9092"),
        help="odradek's bootstrap address (default: $ODRADEK_BOOTSTRAP or localhost:9092)",
    )
    return parser
