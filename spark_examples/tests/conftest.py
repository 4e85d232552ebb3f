"""Fixtures for the Spark and Flink example tests.

The broker fixtures are compat_tests' (a real `odradek serve` process on a free port with a
temp data dir; see compat_tests/conftest.py and harness.py). `spark` is one local SparkSession
for the whole test session: with the Kafka connector jars when they are available here
(spark_examples/session.py), without them otherwise, so the tests that need no Kafka still run.

Where the jars come from: `ODRADEK_SPARK_JARS` when set; else Maven when `ODRADEK_SPARK_ONLINE=1`;
else the folder `../shared/sparkjars` beside the checkout when it exists (this project's CI and
dev machines), which is then exported as `ODRADEK_SPARK_JARS` for this run (the example
commands the tests start inherit it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from compat_tests.conftest import broker, topic_name  # noqa: F401 - fixtures used here
from spark_examples import session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

if not os.environ.get(session.JARS_ENV) and os.environ.get(session.ONLINE_ENV) != "1":
    if (shared := session.shared_jars_dir()) is not None:
        os.environ[session.JARS_ENV] = str(shared)

KAFKA_UNAVAILABLE = session.unavailable_reason()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    pytest.importorskip("pyspark", reason="pyspark is not installed (the `pipelines` extra)")
    spark = session.build_session(
        "odradek-spark-examples-tests", with_kafka=KAFKA_UNAVAILABLE is None
    )
    yield spark
    spark.stop()
    # The JVM outlives spark.stop() (until this process exits), and with it the Kafka sink's
    # cached producers, which log a warning a second once the broker is gone: end it now.
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None and proc is not None:
        gateway.shutdown()
        proc.stdin.close()  # the JVM launched by pyspark exits when its stdin closes
        try:
            proc.wait(timeout=30)
        except Exception:
            proc.kill()
        SparkContext._gateway = SparkContext._jvm = None


@pytest.fixture
def spark_kafka(request: pytest.FixtureRequest) -> SparkSession:
    """The session, for a test that reads or writes Kafka: skipped without the connector jars
    (before a JVM is started for nothing). The broker is set up first, so it is stopped after
    the session (Spark's cached producers would otherwise log connection warnings at exit)."""
    if KAFKA_UNAVAILABLE is not None:
        pytest.skip(KAFKA_UNAVAILABLE)
    request.getfixturevalue("broker")
    return request.getfixturevalue("spark")
