"""Where the Spark Kafka connector jars come from (spark_examples/session.py); no JVM started."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_examples import session

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark", reason="pyspark is not installed (the `pipelines` extra)")
SPARK = session.spark_version()


def _jars(directory: Path, *names: str) -> Path:
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"PK")
    return directory


POOL2 = f"commons-pool2-{session.dependency_lines(SPARK)[1]}.1.jar"
FULL_SET = (
    f"spark-sql-kafka-0-10_2.13-{SPARK}.jar",
    f"spark-token-provider-kafka-0-10_2.13-{SPARK}.jar",
    "kafka-clients-3.9.2.jar",
    POOL2,
)


def test_pyspark_is_the_4_2_line_with_scala_2_13() -> None:
    assert SPARK.startswith("4.2.")
    assert session.maven_coordinates() == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK}"]
    assert session.dependency_lines(SPARK) == ("3.9", "2.13")  # Spark 4.2's POM


def test_jars_dir_with_every_jar(tmp_path: Path) -> None:
    directory = _jars(tmp_path / "jars", *FULL_SET, "unrelated-1.0.jar")
    jars = session.find_connector_jars({session.JARS_ENV: str(directory)})
    assert jars.origin == session.JARS_ENV
    assert [j.name for j in jars.jars] == list(FULL_SET)
    conf = jars.spark_conf()
    assert conf == {"spark.jars": ",".join(str(directory / n) for n in FULL_SET)}
    assert session.unavailable_reason({session.JARS_ENV: str(directory)}) is None


def test_jars_dir_without_kafka_clients_names_it(tmp_path: Path) -> None:
    directory = _jars(tmp_path / "jars", *(n for n in FULL_SET if "kafka-clients" not in n))
    with pytest.raises(session.ConnectorJarsError, match=r"lacks: kafka-clients-3\.9\.x\.jar$"):
        session.find_connector_jars({session.JARS_ENV: str(directory)})


def test_jars_dir_missing_the_connector_says_what_is_missing(tmp_path: Path) -> None:
    directory = _jars(tmp_path / "jars", POOL2)
    env = {session.JARS_ENV: str(directory)}
    with pytest.raises(session.ConnectorJarsError, match="spark-sql-kafka-0-10"):
        session.find_connector_jars(env)
    reason = session.unavailable_reason(env)
    assert reason is not None and "spark-token-provider-kafka-0-10" in reason


def test_wrong_spark_version_is_not_picked(tmp_path: Path) -> None:
    names = [n.replace(SPARK, "3.5.1") if "spark-" in n else n for n in FULL_SET]
    directory = _jars(tmp_path / "jars", *names)
    with pytest.raises(session.ConnectorJarsError):
        session.find_connector_jars({session.JARS_ENV: str(directory)})


def test_without_jars_dir_uses_maven_coordinates() -> None:
    jars = session.find_connector_jars(
        {session.REPOSITORIES_ENV: "https://mirror.example/m2"}, reachable=lambda _url: True
    )
    assert jars.origin == "maven" and not jars.jars
    assert jars.spark_conf() == {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK}",
        "spark.jars.repositories": "https://mirror.example/m2",
    }


def test_tests_skip_without_jars_or_online_opt_in() -> None:
    reason = session.unavailable_reason({})
    assert reason is not None
    assert session.JARS_ENV in reason and session.ONLINE_ENV in reason
    assert session.unavailable_reason({session.ONLINE_ENV: "1"}) is None


def test_spark_ivy_cache_layout_is_accepted(tmp_path: Path) -> None:
    names = (
        f"org.apache.spark_spark-sql-kafka-0-10_2.13-{SPARK}.jar",
        f"org.apache.spark_spark-token-provider-kafka-0-10_2.13-{SPARK}.jar",
        "org.apache.kafka_kafka-clients-3.9.0.jar",
        f"org.apache.commons_{POOL2}",
        "org.slf4j_slf4j-api-2.0.16.jar",
    )
    directory = _jars(tmp_path / "ivy-jars", *names)
    jars = session.find_connector_jars({session.JARS_ENV: str(directory)})
    assert [j.name for j in jars.jars] == list(names[:4])


def test_connector_of_another_patch_release_of_the_line_is_accepted(tmp_path: Path) -> None:
    """The 4.0.0 connector runs on pyspark 4.0.5: any patch release of the installed minor line
    is taken, the exact one preferred; another minor line is not."""
    line = session.minor_line(SPARK)
    other = f"{line}.0" if SPARK != f"{line}.0" else f"{line}.9"
    names = [n.replace(SPARK, other) for n in FULL_SET]
    directory = _jars(tmp_path / "jars", *names)
    jars = session.find_connector_jars({session.JARS_ENV: str(directory)})
    assert [j.name for j in jars.jars] == names
    _jars(directory, *FULL_SET[:2])  # the exact release beside it wins
    jars = session.find_connector_jars({session.JARS_ENV: str(directory)})
    assert [j.name for j in jars.jars][:2] == list(FULL_SET[:2])


def test_jars_are_checked_against_listed_hashes(tmp_path: Path) -> None:
    import hashlib

    directory = _jars(tmp_path / "jars", *FULL_SET)
    good = hashlib.sha256(b"PK").hexdigest()
    rows = "\n".join(f"| {n} | {good} |" for n in FULL_SET)
    (directory / "README.md").write_text(f"| file | sha256 |\n|---|---|\n{rows}\n")
    assert session.find_connector_jars({session.JARS_ENV: str(directory)}).jars
    (directory / FULL_SET[0]).write_bytes(b"PK-damaged")
    with pytest.raises(session.ConnectorJarsError, match=f"{FULL_SET[0]} has sha256"):
        session.find_connector_jars({session.JARS_ENV: str(directory)})
    (directory / "README.md").unlink()
    (directory / "SHA256SUMS").write_text(f"{good}  {FULL_SET[0]}\n")
    with pytest.raises(session.ConnectorJarsError, match="damaged or different"):
        session.find_connector_jars({session.JARS_ENV: str(directory)})


def _maven_repo(root: Path) -> Path:
    """A Maven repository layout holding the installed pyspark's connector jar."""
    artifact = "spark-sql-kafka-0-10_2.13"
    folder = root / "org/apache/spark" / artifact / SPARK
    folder.mkdir(parents=True)
    (folder / f"{artifact}-{SPARK}.jar").write_bytes(b"PK")
    return root


def test_tests_resolve_the_coordinates_from_the_local_maven_repository(tmp_path: Path) -> None:
    """setup.sh filled .cache/m2: the tests take the coordinates path (spark.jars.packages), with
    an Ivy settings file naming only that repository (so no test traffic leaves the machine)
    and Ivy's directory beside it; ../shared/sparkjars is then not used."""
    repo, ivy = _maven_repo(tmp_path / "m2"), tmp_path / "ivy"
    shared = _jars(tmp_path / "shared", *FULL_SET)
    env = session.jars_source_for_tests({}, local_repo=repo, shared=shared, ivy=ivy)
    assert env[session.REPOSITORIES_ENV] == repo.resolve().as_uri()
    assert env[session.IVY_ENV] == str(ivy) and session.JARS_ENV not in env
    settings = Path(env[session.IVY_SETTINGS_ENV]).read_text()
    assert f'root="{repo.resolve().as_uri()}"' in settings and "http" not in settings
    assert session.unavailable_reason(env) is None
    conf = session.find_connector_jars(env).spark_conf()
    assert conf == {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK}",
        "spark.jars.repositories": repo.resolve().as_uri(),
        "spark.jars.ivy": str(ivy),
        "spark.jars.ivySettings": env[session.IVY_SETTINGS_ENV],
    }


def test_shared_jars_folder_is_used_only_when_it_fits_the_installed_pyspark(
    tmp_path: Path,
) -> None:
    """CI's ../shared/sparkjars holds the 4.0.0 connector: with pyspark 4.2 it is left aside
    (nothing fails); a folder of the installed line's jars is used when .cache/m2 lacks one."""
    no_repo = tmp_path / "empty-m2"
    old = _jars(tmp_path / "old", *(n.replace(SPARK, "4.0.0") for n in FULL_SET[:2]))
    _jars(old, "kafka-clients-3.9.1.jar", "commons-pool2-2.12.0.jar")
    assert session.jars_source_for_tests({}, local_repo=no_repo, shared=old) == {}
    fits = _jars(tmp_path / "fits", *FULL_SET)
    env = session.jars_source_for_tests({}, local_repo=no_repo, shared=fits)
    assert env == {session.JARS_ENV: str(fits)}
    # what the user set is kept
    for given in ({session.JARS_ENV: "/x"}, {session.ONLINE_ENV: "1"}):
        assert session.jars_source_for_tests(given, local_repo=no_repo, shared=fits) == {}


@pytest.mark.parametrize(
    "jars_dir, says",
    [("/nonexistent/jars", "is not a directory"), ("EMPTY", "lacks: spark-sql-kafka-0-10_2.13")],
)
def test_bad_jars_dir_is_one_line_not_a_traceback(tmp_path: Path, jars_dir: str, says: str) -> None:
    """`ODRADEK_SPARK_JARS` pointing at the wrong place: the example says so in one line."""
    import os
    import subprocess
    import sys

    if jars_dir == "EMPTY":
        jars_dir = str(_jars(tmp_path / "empty"))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "spark_examples.etl", "--checkpoint", str(tmp_path / "cp")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, session.JARS_ENV: jars_dir, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{session.JARS_ENV}={jars_dir}" in lines[0] and says in lines[0], lines


def test_offline_uses_the_jars_ivy_fetched_before(tmp_path: Path) -> None:
    ivy = _jars(tmp_path / ".ivy2.5.2", *())
    _jars(ivy / "jars", *FULL_SET)
    jars = session.find_connector_jars({"HOME": str(tmp_path)}, reachable=lambda _url: False)
    assert jars.origin == "Ivy's cache"
    assert {j.name for j in jars.jars} == set(FULL_SET)


def test_offline_without_jars_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(session.ConnectorJarsError) as caught:
        session.find_connector_jars({"HOME": str(tmp_path)}, reachable=lambda _url: False)
    message = str(caught.value)
    assert "\n" not in message
    assert "ODRADEK_SPARK_JARS is unset" in message and "repo1.maven.org" in message
    assert f"spark-sql-kafka-0-10_2.13-{session.minor_line(SPARK)}.x.jar" in message


def test_an_example_offline_says_what_is_missing_in_one_line(tmp_path: Path) -> None:
    """An example run as a user would, with no network (a network namespace with only
    loopback, `unshare -n`) and no ODRADEK_SPARK_JARS: one line and exit status 2, not Ivy's
    hundred lines and a Java gateway error."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a network-less run")
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -rn is not permitted here: {probe.stderr.decode().strip()}")
    repo = Path(session.__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_SPARK_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(repo))
    example = [sys.executable, "-m", "spark_examples.page_views", "--bootstrap", "127.0.0.1:1"]
    proc = subprocess.run(
        ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *example],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("page_views.py: error: the Spark Kafka connector jars are missing")
    assert "ODRADEK_SPARK_JARS" in lines[0]


def test_coordinates_resolve_offline_from_the_local_maven_repository(tmp_path: Path) -> None:
    """The default path of session.py (spark.jars.packages), as the tests take it, with no
    network at all (`unshare -rn`: only loopback) and a fresh Ivy directory: Spark's Ivy finds
    the connector and its dependencies in .cache/m2 and Spark's "kafka" source loads."""
    import os
    import shutil
    import subprocess
    import sys

    if not session.has_connector(session.LOCAL_MAVEN_REPO):
        pytest.skip(f"{session.LOCAL_MAVEN_REPO} lacks the connector: run scripts/setup.sh")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a network-less run")
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -rn is not permitted here: {probe.stderr.decode().strip()}")
    repo = Path(session.__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_SPARK_")}
    env.update(session.local_maven_env(session.LOCAL_MAVEN_REPO, tmp_path / "ivy"))
    env.update(HOME=str(tmp_path), PYTHONPATH=str(repo), SPARK_LOCAL_IP="127.0.0.1")
    code = (
        "from spark_examples import session\n"
        "spark = session.build_session('odradek-offline-ivy')\n"
        "lookup = spark._jvm.org.apache.spark.sql.execution.datasources.DataSource\n"
        "conf = spark._jsparkSession.sessionState().conf()\n"
        "print('kafka source:', lookup.lookupDataSource('kafka', conf).getName())\n"
        "spark.stop()\n"
    )
    proc = subprocess.run(
        ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
        + [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "kafka source: org.apache.spark.sql.kafka010.KafkaSourceProvider" in proc.stdout
    found = f"found org.apache.spark#spark-sql-kafka-0-10_2.13;{SPARK} in local-maven"
    assert found in proc.stderr, proc.stderr[-5000:]
