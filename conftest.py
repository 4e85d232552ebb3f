"""Settings for the client libraries that every test suite here drives (tests/, compat_tests/,
spark_examples/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer


@pytest.fixture
def kafka_python_metadata_refresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kafka-python consumers made in the test refresh metadata every 2 s; tests opt in.

    kafka-python 3.0.12 loses the topics a consumer subscribes to when they are set while its
    first Metadata request after bootstrap is still out (ClusterMetadata.set_topics carries a
    TODO for it): the answer clears the pending update, the group leader assigns no partitions
    ("No partition metadata for topic ..."), and nothing asks again before metadata_max_age_ms,
    five minutes by default. The broker answers every Metadata request correctly; the client just
    does not ask. Only for the tests that met it: everywhere, it would also hide a broker that
    answers stale metadata (compat_tests/test_kafka_python.py checks that with the client's own
    refresh).
    """
    monkeypatch.setitem(KafkaConsumer.DEFAULT_CONFIG, "metadata_max_age_ms", 2000)
    yield
