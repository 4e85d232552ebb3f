"""The built-in Schema Registry through confluent-kafka's SchemaRegistryClient and its Avro and
JSON serializers, against a real broker (odradek.testing.Broker(schema_registry=True))."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.testing.broker import Broker

pytestmark = pytest.mark.compat

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
USER_V2 = {  # adds a field with a default and promotes age: BACKWARD compatible
    **USER_V1,
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "long"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}
USER_BAD = {  # a new field without a default: the new reader cannot read old data
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "city", "type": "string"}],
}


def avro(schema: dict[str, object]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(schema_registry=True).start()
    try:
        yield b
    finally:
        b.stop()


def client(b: Broker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": b.schema_registry_url})


def test_register_evolve_and_refuse(broker: Broker) -> None:
    sr = client(broker)
    id1 = sr.register_schema("users-value", avro(USER_V1))
    assert sr.register_schema("users-value", avro(USER_V1)) == id1  # same schema, same id
    id2 = sr.register_schema("users-value", avro(USER_V2))
    assert id2 != id1
    assert sr.get_versions("users-value") == [1, 2]
    assert sr.get_subjects() == ["users-value"]
    latest = sr.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (2, id2)
    assert json.loads(sr.get_schema(id1).schema_str) == USER_V1
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema("users-value", avro(USER_BAD))
    assert refused.value.http_status_code == 409
    assert not sr.test_compatibility("users-value", avro(USER_BAD))
    assert sr.test_compatibility("users-value", avro(USER_V2))
    found = sr.lookup_schema("users-value", avro(USER_V1))
    assert (found.version, found.schema_id) == (1, id1)
    with pytest.raises(SchemaRegistryError) as missing:
        sr.get_version("nope", 1)
    assert missing.value.error_code == 40401
    with pytest.raises(SchemaRegistryError) as no_version:
        sr.get_version("users-value", 7)
    assert no_version.value.error_code == 40402
    with pytest.raises(SchemaRegistryError) as no_id:
        sr.get_schema(999)
    assert no_id.value.error_code == 40403
    with pytest.raises(SchemaRegistryError) as invalid:
        sr.register_schema("users-value", Schema('{"type": "recrd"}', "AVRO"))
    assert invalid.value.error_code == 42201
    # NONE lets the incompatible change in, for this subject only
    assert sr.set_compatibility("users-value", "NONE") == {"compatibility": "NONE"}
    assert sr.get_compatibility("users-value") == "NONE"
    assert sr.get_compatibility() == "BACKWARD"
    sr.register_schema("users-value", avro(USER_BAD))
    assert sr.get_versions("users-value") == [1, 2, 3]
    assert sorted(sr.get_subjects()) == ["users-value"]


def test_forward_and_full_levels(broker: Broker) -> None:
    sr = client(broker)
    sr.set_compatibility("f", "FORWARD")
    sr.register_schema("f", avro(USER_V1))
    # dropping a field without a default: old readers (needing it) cannot read new data
    dropped = {**USER_V1, "fields": [USER_V1["fields"][0]]}  # type: ignore[index]
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema("f", avro(dropped))
    assert refused.value.http_status_code == 409
    sr.register_schema("f", avro(USER_BAD))  # an added field: the old reader skips it
    sr.set_compatibility("full", "FULL")
    sr.register_schema("full", avro(USER_V1))
    with pytest.raises(SchemaRegistryError):
        sr.register_schema("full", avro(USER_BAD))  # backward breaks
    optional = {
        **USER_V1,
        "fields": [*USER_V1["fields"], {"name": "nick", "type": "string", "default": ""}],  # type: ignore[misc]
    }
    sr.register_schema("full", avro(optional))


def test_produce_and_consume_avro_and_json_through_odradek(broker: Broker) -> None:
    sr = client(broker)
    topic = broker.create_topic("people")
    ser = AvroSerializer(sr, json.dumps(USER_V1))
    json_schema = json.dumps(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    jser = JSONSerializer(json_schema, sr)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    people = [{"name": f"p{i}", "age": i} for i in range(5)]
    for p in people:
        value = ser(p, SerializationContext(topic, MessageField.VALUE))
        key = jser({"n": p["age"]}, SerializationContext(topic, MessageField.KEY))
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0
    assert sorted(sr.get_subjects()) == ["people-key", "people-value"]
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    de = AvroDeserializer(sr)
    jde = JSONDeserializer(json_schema, schema_registry_client=sr)
    got: list[tuple[object, object]] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(people) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(
                (
                    jde(msg.key(), SerializationContext(topic, MessageField.KEY)),
                    de(msg.value(), SerializationContext(topic, MessageField.VALUE)),
                )
            )
    finally:
        consumer.close()
    assert got == [({"n": p["age"]}, p) for p in people]


def test_deletes_and_modes(broker: Broker) -> None:
    sr = client(broker)
    first = sr.register_schema("d", avro(USER_V1))
    sr.register_schema("d", avro(USER_V2))
    with pytest.raises(SchemaRegistryError) as not_soft:
        sr.delete_subject("d", permanent=True)
    assert not_soft.value.error_code == 40405
    assert sr.delete_version("d", 1) == 1
    assert sr.get_versions("d") == [2]
    assert sr.delete_subject("d") == [2]
    assert sr.get_subjects() == []
    with pytest.raises(SchemaRegistryError) as gone:
        sr.get_versions("d")
    assert gone.value.error_code == 40401
    assert json.loads(client(broker).get_schema(first).schema_str) == USER_V1  # soft: still served
    assert sorted(sr.delete_subject("d", permanent=True)) == [1, 2]
    with pytest.raises(SchemaRegistryError) as purged:
        client(broker).get_schema(first)  # a fresh client: no cached answer
    assert purged.value.error_code == 40403
    sr.update_global_mode("READONLY")
    assert sr.get_global_mode() == "READONLY"
    with pytest.raises(SchemaRegistryError) as readonly:
        sr.register_schema("e", avro(USER_V1))
    assert readonly.value.error_code == 42205
    sr.update_global_mode("READWRITE")
    sr.update_mode("imp", "IMPORT")
    assert sr.get_mode("imp") == "IMPORT"
    sr.register_schema("e", avro(USER_V1))


def test_ids_survive_a_restart(broker: Broker) -> None:
    sr = client(broker)
    ids = {s: sr.register_schema(s, avro(USER_V1 if s != "b" else USER_V2)) for s in "abc"}
    sr.set_compatibility("c", "FULL_TRANSITIVE")
    sr.delete_subject("a")
    broker.restart()
    sr = client(broker)
    assert sorted(sr.get_subjects()) == ["b", "c"]
    assert {s: sr.get_latest_version(s).schema_id for s in "bc"} == {"b": ids["b"], "c": ids["c"]}
    assert json.loads(sr.get_schema(ids["a"]).schema_str) == USER_V1
    assert sr.get_compatibility("c") == "FULL_TRANSITIVE"
    new_id = sr.register_schema("d", avro({**USER_V1, "name": "Other"}))
    assert new_id not in ids.values()


ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "example",
    "fields": [{"name": "city", "type": "string"}],
}
PERSON = {
    "type": "record",
    "name": "Person",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "example.Address"}],
}


def test_references_across_subjects(broker: Broker) -> None:
    sr = client(broker)
    sr.register_schema("address", avro(ADDRESS))
    ref = SchemaReference("example.Address", "address", 1)
    person = Schema(json.dumps(PERSON), "AVRO", [ref])
    pid = sr.register_schema("person-value", person)
    got = sr.get_schema(pid)
    assert [(r.name, r.subject, r.version) for r in got.references] == [
        ("example.Address", "address", 1)
    ]
    assert sr.get_version("person-value", 1).schema.references[0].subject == "address"
    # a reference to a missing subject is refused
    with pytest.raises(SchemaRegistryError) as missing:
        sr.register_schema(
            "p2", Schema(json.dumps(PERSON), "AVRO", [SchemaReference("x", "nope", 1)])
        )
    assert missing.value.error_code == 40401
    # an unresolved named type without its reference is an invalid schema
    with pytest.raises(SchemaRegistryError) as invalid:
        sr.register_schema("p3", avro(PERSON))
    assert invalid.value.error_code == 42201
    # the serializer reads the reference to encode and the deserializer to decode
    ser = AvroSerializer(
        sr, person, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    ctx = SerializationContext("person", MessageField.VALUE)
    record = {"name": "Ann", "home": {"city": "Oslo"}}
    assert AvroDeserializer(sr)(ser(record, ctx), ctx) == record
    # a referenced version cannot be deleted while the reference lives
    with pytest.raises(SchemaRegistryError) as referenced:
        sr.delete_subject("address")
    assert referenced.value.error_code == 42206
    sr.delete_subject("person-value")
    assert sr.delete_subject("address") == [1]


def test_async_client(broker: Broker) -> None:
    async def run() -> tuple[int, list[int], str]:
        sr = AsyncSchemaRegistryClient({"url": broker.schema_registry_url})
        schema_id = await sr.register_schema("a", avro(USER_V1))
        await sr.register_schema("a", avro(USER_V2))
        versions = await sr.get_versions("a")
        level = await sr.get_compatibility()
        return schema_id, versions, level

    schema_id, versions, level = asyncio.run(run())
    assert (schema_id, versions, level) == (1, [1, 2], "BACKWARD")
