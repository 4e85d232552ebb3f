"""The Java harness compiles and runs programs against the real kafka-clients jar (no broker)."""

from __future__ import annotations

from compat_tests.java_harness import REQUIRED_JARS, JavaPrograms

KAFKA_CLIENTS_VERSION = "3.9.1"


def test_classpath_has_client_and_codec_jars(java: JavaPrograms) -> None:
    names = {jar.stem for jar in java.classpath}
    assert all(any(n.startswith(f"{want}-") for n in names) for want in REQUIRED_JARS), names
    assert all(jar.is_file() for jar in java.classpath)


def test_smoke_prints_kafka_clients_version(java: JavaPrograms) -> None:
    returncode, stdout, stderr = java.run("Smoke", timeout=60)
    assert returncode == 0, stderr
    assert stdout.strip() == KAFKA_CLIENTS_VERSION


def test_compiles_once_per_session(java: JavaPrograms) -> None:
    assert java.compile("Smoke") == java.compile("Smoke.java")
