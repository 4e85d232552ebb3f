"""The Kafka binary protocol, sans-IO: framing, headers, record batches and message schemas."""
