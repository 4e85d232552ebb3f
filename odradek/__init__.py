"""odradek: a Kafka-wire-compatible broker in Python."""
