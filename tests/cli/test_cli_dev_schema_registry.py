"""`odradek dev --schema-registry`: the built-in Schema Registry beside a dev broker, its URL
printed for SchemaRegistryClient."""

from __future__ import annotations

import json
import signal

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.cli.cli_run import start_odradek


def test_dev_serves_a_schema_registry() -> None:
    proc, lines = start_odradek("dev", "--port", "0", "--schema-registry", "--json")
    try:
        info = json.loads(lines.get(timeout=30))
        sr = SchemaRegistryClient({"url": info["schema_registry"]})
        schema_id = sr.register_schema("t-value", Schema('"string"', "AVRO"))
        assert sr.get_latest_version("t-value").schema_id == schema_id
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
