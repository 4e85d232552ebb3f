"""The storage engine: segments, indexes, recovery, retention, compaction.

Kafka's storage module, in Python.
"""
