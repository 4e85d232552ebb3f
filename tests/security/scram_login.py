"""Logging in with SCRAM through confluent-kafka, for the tests that check credentials work."""

from __future__ import annotations

import time

TIMED_OUT = "timed out"


def scram_login(
    bootstrap: str, user: str, password: str, mechanism: str, wait_s: float
) -> str | None:
    """None when confluent-kafka's admin client logs in on the SASL_PLAINTEXT listener at
    `bootstrap` and lists topics; else the first error librdkafka reports, or TIMED_OUT when
    neither happens within `wait_s`."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    errors: list[confluent_kafka.KafkaError] = []
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": errors.append,
            "log_level": 0,
        }
    )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if errors:
            return str(errors[0])
        try:
            admin.list_topics(timeout=0.5)
            return None
        except confluent_kafka.KafkaException:
            admin.poll(0.05)
    return TIMED_OUT
