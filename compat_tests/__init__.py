"""Compatibility tests: real Kafka clients against a real odradek broker process."""
