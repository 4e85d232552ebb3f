"""The pytest plugin's `odradek_schema_registry` fixture: a broker with the registry, its URL."""

from __future__ import annotations

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.testing.broker import Broker


def test_fixture_gives_a_registry(odradek_schema_registry: Broker) -> None:
    sr = SchemaRegistryClient({"url": odradek_schema_registry.schema_registry_url})
    assert sr.register_schema("k", Schema('"long"', "AVRO")) == 1
    assert sr.get_subjects() == ["k"]
