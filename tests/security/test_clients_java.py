"""Kafka's Java clients (kafka-clients 3.9.1 through the Java harness) over every security mode
(tests/security/conftest.py MODES) with a properties file from `Security.write_properties()`
(`java_properties()`): Admin createTopics / describeCluster, produce, a transaction, a group
consuming read_committed with committed offsets (tests/security/java/SecureClients.java); and
Spark's access pattern (compat_tests/java/SparkAccessPattern.java) over SASL_SSL.

OAUTHBEARER's Java login module (the unsecured JWS) needs Jackson: reference/kafka-clients-3.9/
pom.xml puts it on the harness's classpath beside kafka-clients."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from compat_tests.java_harness import JavaError, JavaPrograms, find_classpath

SOURCES = Path(__file__).resolve().parent / "java"


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    try:
        classpath = find_classpath()
    except JavaError as exc:
        pytest.skip(str(exc))
    try:
        return JavaPrograms(tmp_path_factory.mktemp("secure-java"), classpath, source_dir=SOURCES)
    except JavaError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def spark_java(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    try:
        return JavaPrograms(tmp_path_factory.mktemp("spark-java"))
    except JavaError as exc:
        pytest.skip(str(exc))


def test_java_clients(secure_broker, java: JavaPrograms, tmp_path: Path) -> None:
    security = secure_broker.security
    has_jackson = any(jar.stem.startswith("jackson-databind-") for jar in java.classpath)
    if security.mechanism == "OAUTHBEARER" and not has_jackson:
        pytest.skip("the Java OAUTHBEARER login module needs Jackson (not found)")
    props = security.write_properties(
        str(tmp_path / "client.properties"), secure_broker.bootstrap, "bob"
    )
    topic = f"java-{uuid.uuid4().hex[:8]}"
    result = java.run("SecureClients", props, topic, timeout=120)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["DONE"], (
        f"SecureClients exited {result.returncode}\n--- stdout ---\n{result.stdout}\n"
        f"--- stderr ---\n{result.stderr[-5000:]}"
    )
    assert lines[:3] == ["OK admin", "OK produce", "OK transaction"]
    assert lines[3].startswith("OK group records=8 committed=")


def test_spark_access_pattern_over_sasl_ssl(secure_broker_for, spark_java, tmp_path) -> None:
    broker = secure_broker_for("sasl_ssl", "SCRAM-SHA-256")
    props = broker.security.write_properties(
        str(tmp_path / "spark.properties"), broker.bootstrap, "alice"
    )
    topic = f"spark-{uuid.uuid4().hex[:8]}"
    result = spark_java.run(
        "SparkAccessPattern",
        broker.bootstrap,
        topic,
        "3",
        "50",
        timeout=180,
        env={"ODRADEK_CLIENT_PROPERTIES": props},
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith(("OK", "FAIL", "DONE"))]
    assert result.returncode == 0 and lines[-1:] == ["DONE"], (
        f"SparkAccessPattern exited {result.returncode}\n--- stdout ---\n{result.stdout}\n"
        f"--- stderr ---\n{result.stderr[-5000:]}"
    )
    assert any(line.startswith("OK read all read_uncommitted nogroup") for line in lines), lines
    assert "records=100" in next(x for x in lines if x.startswith("OK read all"))
