"""Settings for the client libraries that every test suite here drives (tests/, compat_tests/,
spark_examples/)."""

from __future__ import annotations

from kafka import KafkaConsumer

# kafka-python 3.0.12 loses the topics a consumer subscribes to when they are set while its first
# Metadata request after bootstrap is still out (ClusterMetadata.set_topics carries a TODO for
# it): the answer clears the pending update, the group leader assigns no partitions ("No
# partition metadata for topic ..."), and nothing asks again before metadata_max_age_ms, five
# minutes by default. Under CI load that left a test's consumer with nothing to read. The
# broker answers every Metadata request correctly; the client just does not ask. A consumer
# that refreshes every 2 s recovers in the test's time.
KafkaConsumer.DEFAULT_CONFIG["metadata_max_age_ms"] = 2000
