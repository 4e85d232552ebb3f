"""The SparkSession every example uses, and where Spark's Kafka connector jars come from.

Spark's Kafka source and sink (`spark-sql-kafka-0-10`, Spark's stock "kafka" format) are not in
the pyspark wheel. They come from one of two places, in this order:

1. `ODRADEK_SPARK_JARS=/some/dir` (offline): the jars in that directory, given to Spark as
   `spark.jars`. It must hold, for pyspark 4.2.x with Scala 2.13 (versions as in Spark's POM;
   the connector may be any patch release of the installed pyspark's minor line, the exact
   one preferred: Spark keeps a minor line's patch releases compatible):

       spark-sql-kafka-0-10_2.13-<spark 4.2.x>.jar
       spark-token-provider-kafka-0-10_2.13-<spark 4.2.x>.jar
       kafka-clients-3.9.x.jar
       commons-pool2-2.13.x.jar     (2.12.x for pyspark 4.0)

   scripts/setup.sh makes one from Maven Central: .cache/spark-kafka-<spark>/lib.

   lz4-java, snappy-java, zstd-jni and slf4j, which kafka-clients needs, are already in pyspark.
   When the directory has a `SHA256SUMS` file (`sha256sum` format) or a README.md with a
   `| file | sha256 |` table, each chosen jar listed there must match its hash.
2. Otherwise Maven coordinates in `spark.jars.packages`
   (`org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`); Spark's Ivy fetches it and
   its dependencies above from Maven Central, or from the repositories listed in
   `ODRADEK_SPARK_REPOSITORIES` (comma-separated URLs, passed as `spark.jars.repositories`).
   `ODRADEK_SPARK_IVY` sets Ivy's directory (`spark.jars.ivy`), `ODRADEK_SPARK_IVY_SETTINGS`
   an Ivy settings file (`spark.jars.ivySettings`: Spark's way to resolve behind a firewall,
   without Maven Central).

Offline (neither Maven Central nor a repository of `ODRADEK_SPARK_REPOSITORIES` takes a
connection, and no proxy is set) and without `ODRADEK_SPARK_JARS`, the jars Spark's Ivy fetched
on an earlier run (`~/.ivy2.5.2/jars`) are used when they are all there; otherwise the example
stops with one line naming what is missing and how to provide it.

Tests stay on 127.0.0.1: they resolve the coordinates from the local Maven repository that
scripts/setup.sh filled (.cache/m2, spark_examples/maven/), through an Ivy settings file naming
only that repository (`local_maven_conf`); or use `ODRADEK_SPARK_JARS`; or Maven Central when
`ODRADEK_SPARK_ONLINE=1`. `../shared/sparkjars` beside the checkout (this project's CI) is used
only when its connector fits the installed pyspark (`jars_source_for_tests`,
spark_examples/tests/conftest.py); otherwise they skip and say why (`unavailable_reason`).

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
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_ENV = "ODRADEK_SPARK_JARS"
ONLINE_ENV = "ODRADEK_SPARK_ONLINE"
REPOSITORIES_ENV = "ODRADEK_SPARK_REPOSITORIES"
IVY_ENV = "ODRADEK_SPARK_IVY"
IVY_SETTINGS_ENV = "ODRADEK_SPARK_IVY_SETTINGS"
# Spark's Ivy looks in Maven Central (and the local caches) for spark.jars.packages
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
REACH_TIMEOUT_S = 3.0
IVY_DIR = ".ivy2.5.2"  # spark.jars.ivy's default in Spark 4
SCALA_BINARY = "2.13"
# What spark-sql-kafka-0-10 depends on, by Spark minor line (Spark's POM: kafka.version,
# commons-pool2.version); any patch release of these lines works.
DEPENDENCY_LINES: dict[str, tuple[str, str]] = {"4.0": ("3.9", "2.12"), "4.2": ("3.9", "2.13")}
NEWEST_LINE = "4.2"
REPO_ROOT = Path(__file__).resolve().parents[1]
# Beside the checkout (CI has ../shared next to the clone): the connector jars, for offline runs.
SHARED_JARS_DIR = REPO_ROOT.parent / "shared" / "sparkjars"
# The Maven repository scripts/setup.sh fills from spark_examples/maven/*/pom.xml
LOCAL_MAVEN_REPO = REPO_ROOT / ".cache" / "m2"
TEST_IVY_DIR = REPO_ROOT / ".cache" / "spark-ivy"

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


def dependency_lines(spark: str) -> tuple[str, str]:
    """(kafka-clients line, commons-pool2 line) the connector of `spark`'s minor line needs."""
    return DEPENDENCY_LINES.get(minor_line(spark), DEPENDENCY_LINES[NEWEST_LINE])


def required_jars(spark: str | None = None) -> dict[str, re.Pattern[str]]:
    """File-name patterns of the jars a directory must hold, by artifact."""
    clients_line, pool_line = dependency_lines(spark or spark_version())
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
        "kafka-clients": re.compile(rf"{group}kafka-clients-{re.escape(clients_line)}\.\d+\.jar"),
        "commons-pool2": re.compile(rf"{group}commons-pool2-{re.escape(pool_line)}\.\d+\.jar"),
    }


@dataclass(frozen=True, slots=True)
class ConnectorJars:
    """How this run gets the Kafka connector: local jar files, or Maven coordinates."""

    origin: str  # "ODRADEK_SPARK_JARS" or "maven"
    jars: tuple[Path, ...] = ()
    packages: tuple[str, ...] = ()
    repositories: tuple[str, ...] = field(default=())
    ivy: str = ""
    ivy_settings: str = ""

    def spark_conf(self) -> dict[str, str]:
        conf: dict[str, str] = {}
        if self.jars:
            conf["spark.jars"] = ",".join(str(j) for j in self.jars)
        if self.packages:
            conf["spark.jars.packages"] = ",".join(self.packages)
        if self.repositories:
            conf["spark.jars.repositories"] = ",".join(self.repositories)
        if self.packages and self.ivy:
            conf["spark.jars.ivy"] = self.ivy
        if self.packages and self.ivy_settings:
            conf["spark.jars.ivySettings"] = self.ivy_settings
        return conf

    def describe(self) -> str:
        if self.jars:
            return f"{self.origin}: " + ", ".join(j.name for j in self.jars)
        return f"{self.origin}: spark.jars.packages={','.join(self.packages)}"


def _expected_name(artifact: str, spark: str) -> str:
    """The file a missing artifact is looked for as, for people: `commons-pool2-2.12.x.jar`."""
    clients_line, pool_line = dependency_lines(spark)
    line = {"kafka-clients": clients_line, "commons-pool2": pool_line}.get(artifact)
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
    spark = spark or spark_version()
    line = minor_line(spark)
    clients_line, pool_line = dependency_lines(spark)
    return (
        f"spark-sql-kafka-0-10_{SCALA_BINARY}-{line}.x.jar, "
        f"spark-token-provider-kafka-0-10_{SCALA_BINARY}-{line}.x.jar, "
        f"kafka-clients-{clients_line}.x.jar, commons-pool2-{pool_line}.x.jar"
    )


def _local_path(url: str) -> Path | None:
    """The directory of a file:// repository URL, else None."""
    parsed = urlsplit(url)
    return Path(parsed.path) if parsed.scheme == "file" else None


def _reachable(url: str, timeout_s: float = REACH_TIMEOUT_S) -> bool:
    """Whether repository `url` answers: a file:// one exists, else a TCP connection to its
    host opens (DNS included)."""
    if (local := _local_path(url)) is not None:
        return local.is_dir()
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
    # An Ivy settings file names its own resolvers: Maven Central need not answer.
    searched = repos if env.get(IVY_SETTINGS_ENV) else (MAVEN_CENTRAL, *repos)
    if not proxied and not any(reachable(url) for url in searched):
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
    return ConnectorJars(
        "maven",
        packages=tuple(maven_coordinates()),
        repositories=repos,
        ivy=env.get(IVY_ENV, ""),
        ivy_settings=env.get(IVY_SETTINGS_ENV, ""),
    )


def has_connector(repo: Path, spark: str | None = None) -> bool:
    """Whether Maven repository `repo` holds the connector of the installed pyspark."""
    spark = spark or spark_version()
    artifact = f"spark-sql-kafka-0-10_{SCALA_BINARY}"
    return (repo / "org/apache/spark" / artifact / spark / f"{artifact}-{spark}.jar").is_file()


_IVY_SETTINGS = """<ivysettings>
  <!-- Written by spark_examples/session.py: Spark's Ivy resolves spark.jars.packages from
       this Maven repository only (scripts/setup.sh filled it), never from the network. -->
  <settings defaultResolver="local-maven"/>
  <resolvers>
    <ibiblio name="local-maven" m2compatible="true" usepoms="true" root="{root}"/>
  </resolvers>
</ivysettings>
"""


def local_maven_env(repo: Path = LOCAL_MAVEN_REPO, ivy: Path = TEST_IVY_DIR) -> dict[str, str]:
    """The environment that makes the coordinates path resolve from Maven repository `repo`
    alone: it as ODRADEK_SPARK_REPOSITORIES, an Ivy settings file naming only it, and Ivy's
    directory `ivy` (its cache of resolved jars)."""
    ivy.mkdir(parents=True, exist_ok=True)
    settings = ivy / "ivysettings.xml"
    text = _IVY_SETTINGS.format(root=repo.resolve().as_uri())
    if not settings.is_file() or settings.read_text(encoding="utf-8") != text:
        settings.write_text(text, encoding="utf-8")
    return {
        REPOSITORIES_ENV: repo.resolve().as_uri(),
        IVY_ENV: str(ivy),
        IVY_SETTINGS_ENV: str(settings),
    }


def jars_source_for_tests(
    env: Mapping[str, str],
    *,
    local_repo: Path = LOCAL_MAVEN_REPO,
    shared: Path | None = None,
    ivy: Path = TEST_IVY_DIR,
) -> dict[str, str]:
    """What the test run adds to its environment to get the connector without the internet:
    nothing when ODRADEK_SPARK_JARS, ODRADEK_SPARK_ONLINE=1 or ODRADEK_SPARK_REPOSITORIES say
    already; else the local Maven repository when it holds the connector (the coordinates path,
    as users take it); else `shared` (../shared/sparkjars) when its jars fit the installed
    pyspark; else nothing (the Kafka tests then skip, saying why)."""
    if env.get(JARS_ENV) or env.get(ONLINE_ENV) == "1" or env.get(REPOSITORIES_ENV):
        return {}
    if has_connector(local_repo):
        return local_maven_env(local_repo, ivy)
    if shared is not None:
        try:
            jars_from_dir(shared)
        except ConnectorJarsError:
            return {}
        return {JARS_ENV: str(shared)}
    return {}


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
    repos = [r for r in env.get(REPOSITORIES_ENV, "").split(",") if r]
    if repos and env.get(IVY_SETTINGS_ENV) and all(_reachable(r) for r in repos):
        return None  # resolved from local repositories, as setup.sh's .cache/m2
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
