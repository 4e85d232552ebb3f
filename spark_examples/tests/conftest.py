"""Fixtures for the Spark and Flink example tests.

The broker fixtures are compat_tests' (a real `odradek serve` process on a free port with a
temp data dir; see compat_tests/conftest.py and harness.py); `target` runs a test against it and
against Apache Kafka 4.4 (`kafka44` of compat_tests/reference/conftest.py, the same JVM as the
reference tests use), so a failure on odradek alone is odradek's. `spark` is one local SparkSession
for the whole test session: with the Kafka connector jars when they are available here
(spark_examples/session.py), without them otherwise, so the tests that need no Kafka still run.

Where the jars come from (`session.jars_source_for_tests`, exported for this run so the example
commands the tests start inherit it): `ODRADEK_SPARK_JARS`, `ODRADEK_SPARK_ONLINE=1` or
`ODRADEK_SPARK_REPOSITORIES` when set; else Maven coordinates resolved by Spark's Ivy from the
local Maven repository scripts/setup.sh filled (.cache/m2: no test traffic leaves 127.0.0.1);
else `../shared/sparkjars` beside the checkout (CI) when its connector fits the installed pyspark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from compat_tests.conftest import broker, topic_name  # noqa: F401 - fixtures used here
from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import (  # noqa: F401 - fixtures used here
    kafka44,
    reference_kafka,
    reference_pool,
)
from compat_tests.reference.kafka_ref import KafkaReference
from spark_examples import session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

try:
    os.environ.update(session.jars_source_for_tests(os.environ, shared=session.shared_jars_dir()))
except session.ConnectorJarsError:
    pass  # pyspark missing: unavailable_reason says so

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


@pytest.fixture(params=["odradek", "kafka-4.4"])
def target(request: pytest.FixtureRequest) -> BrokerProcess | KafkaReference:
    """The broker under test (`.bootstrap`, `.log_tail()`): odradek, or Kafka 4.4 itself."""
    if request.param == "odradek":
        proc: BrokerProcess = request.getfixturevalue("broker")
        return proc
    kafka: KafkaReference = request.getfixturevalue("kafka44")
    return kafka
