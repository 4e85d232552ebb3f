"""Fixtures for the Spark and Flink example tests.

The broker fixtures are compat_tests' (a real `odradek serve` process on a free port with a
temp data dir; see compat_tests/conftest.py and harness.py). `spark` is one local SparkSession
for the whole test session: with the Kafka connector jars when they are available here
(spark_examples/session.py), without them otherwise, so the tests that need no Kafka still run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from compat_tests.conftest import broker, topic_name  # noqa: F401 - fixtures used here
from spark_examples import session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KAFKA_UNAVAILABLE = session.unavailable_reason()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    pytest.importorskip("pyspark", reason="pyspark is not installed (the `pipelines` extra)")
    spark = session.build_session(
        "odradek-spark-examples-tests", with_kafka=KAFKA_UNAVAILABLE is None
    )
    yield spark
    spark.stop()


@pytest.fixture
def spark_kafka(request: pytest.FixtureRequest) -> SparkSession:
    """The session, for a test that reads or writes Kafka: skipped without the connector jars
    (before a JVM is started for nothing)."""
    if KAFKA_UNAVAILABLE is not None:
        pytest.skip(KAFKA_UNAVAILABLE)
    return request.getfixturevalue("spark")
