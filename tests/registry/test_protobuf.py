"""PROTOBUF schemas in the built-in registry: confluent-kafka's ProtobufSerializer and
ProtobufDeserializer through odradek (an import registered as a reference under its own subject,
a well-known type left to the registry), .proto text registered, evolved and refused by
Confluent's Protobuf rules, and `normalize=true`."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from odradek.testing.broker import Broker

pytestmark = pytest.mark.compat

F = descriptor_pb2.FieldDescriptorProto
ORDER_V1 = """syntax = "proto3";
package shop;

message Order {
  string id = 1;
  int32 quantity = 2;
  repeated string tags = 3;
}
"""


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    b = Broker(schema_registry=True).start()
    try:
        yield b
    finally:
        b.stop()


def message_classes() -> tuple[type, type]:
    """shop/money.proto's Money and shop/order.proto's Order (importing money.proto and
    google/protobuf/timestamp.proto), built as protoc would, in a pool of their own."""
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    pool.Add(ts)
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop")
    money.syntax = "proto3"
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    m.field.add(name="currency", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    pool.Add(money)
    order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop")
    order.syntax = "proto3"
    order.dependency.extend(["shop/money.proto", "google/protobuf/timestamp.proto"])
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    o.field.add(
        name="total", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE, type_name=".shop.Money"
    )
    o.field.add(
        name="at",
        number=3,
        label=F.LABEL_OPTIONAL,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
    )
    pool.Add(order)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Money")),
    )


def test_protobuf_serializer_through_odradek(broker: Broker) -> None:
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    order_cls, money_cls = message_classes()
    topic = broker.create_topic("orders-pb")
    ser = ProtobufSerializer(order_cls, sr, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    sent = []
    for i in range(3):
        msg = order_cls(id=f"o{i}", total=money_cls(cents=100 * i, currency="EUR"))
        msg.at.seconds = 1_700_000_000 + i
        sent.append(msg)
        producer.produce(topic, value=ser(msg, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    # the import became a reference under its own subject; the well-known type did not
    assert sorted(sr.get_subjects()) == ["orders-pb-value", "shop/money.proto"]
    latest = sr.get_latest_version("orders-pb-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in latest.schema.references] == [
        ("shop/money.proto", "shop/money.proto")
    ]
    de = ProtobufDeserializer(order_cls, {"use.deprecated.format": False}, sr)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "pb", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            record = consumer.poll(0.5)
            if record is None or record.error():
                continue
            got.append(de(record.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert got == sent


def test_proto_text_evolves_by_protobufs_rules(broker: Broker) -> None:
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    subject = "text-order"
    first = sr.register_schema(subject, Schema(ORDER_V1, "PROTOBUF"))
    # comments and layout are not the schema: the same id
    spaced = ORDER_V1.replace("message Order {", "// an order\nmessage   Order{")
    assert sr.register_schema(subject, Schema(spaced, "PROTOBUF")) == first
    # BACKWARD (the default): a field added, int32 -> int64 (one wire group), a field renamed
    v2 = ORDER_V1.replace("int32 quantity = 2;", "int64 qty = 2;\n  bool gift = 4;")
    second = sr.register_schema(subject, Schema(v2, "PROTOBUF"))
    assert second != first
    refused = {
        "scalar kind": v2.replace("int64 qty = 2;", "string qty = 2;"),
        "package": v2.replace("package shop;", "package store;"),
        "numeric label": v2.replace("bool gift = 4;", "repeated bool gift = 4;"),
        "message removed": v2.replace("message Order", "message Purchase"),
    }
    for why, schema in refused.items():
        assert not sr.test_compatibility(subject, Schema(schema, "PROTOBUF")), why
        with pytest.raises(SchemaRegistryError) as exc:
            sr.register_schema(subject, Schema(schema, "PROTOBUF"))
        assert exc.value.http_status_code == 409, why
    # optional <-> repeated is allowed for length-delimited fields (string here)
    v3 = v2.replace("string id = 1;", "repeated string id = 1;")
    assert sr.test_compatibility(subject, Schema(v3, "PROTOBUF"))
    with pytest.raises(SchemaRegistryError) as bad:
        sr.register_schema(
            "broken", Schema('syntax = "proto3"; message M { Nope n = 1; }', "PROTOBUF")
        )
    assert bad.value.error_code == 42201


def test_normalize_on_register_and_lookup(broker: Broker) -> None:
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    a = 'syntax = "proto3";\npackage n;\nmessage M {\n  string a = 1;\n  int32 b = 2;\n}\n'
    b = 'syntax = "proto3";\npackage n;\nmessage M {\n  int32 b = 2;\n  string a = 1;\n}\n'
    first = sr.register_schema("norm-pb", Schema(a, "PROTOBUF"), normalize_schemas=True)
    with pytest.raises(SchemaRegistryError) as exc:
        sr.lookup_schema("norm-pb", Schema(b, "PROTOBUF"))
    assert exc.value.error_code == 40403  # field order counts without normalize
    assert (
        sr.lookup_schema("norm-pb", Schema(b, "PROTOBUF"), normalize_schemas=True).schema_id
        == first
    )
    assert sr.register_schema("norm-pb", Schema(b, "PROTOBUF"), normalize_schemas=True) == first
    props = '"properties":{"x":{"type":"string"},"y":{"type":"string"}}'
    ja = '{"type":"object",' + props + ',"required":["x","y"]}'
    jb = '{"type":"object",' + props + ',"required":["y","x"]}'
    jid = sr.register_schema("norm-json", Schema(ja, "JSON"), normalize_schemas=True)
    assert sr.register_schema("norm-json", Schema(jb, "JSON"), normalize_schemas=True) == jid
    assert (
        sr.lookup_schema("norm-json", Schema(jb, "JSON"), normalize_schemas=True).schema_id == jid
    )
    avro_a = '{"type":"record","name":"R","fields":[{"name":"a","type":"int","doc":"x"}]}'
    avro_b = '{"fields":[{"type":"int","name":"a"}],"name":"R","type":"record"}'
    aid = sr.register_schema("norm-avro", Schema(avro_a, "AVRO"), normalize_schemas=True)
    assert (
        sr.lookup_schema("norm-avro", Schema(avro_b, "AVRO"), normalize_schemas=True).schema_id
        == aid
    )


def test_text_imports_through_references(broker: Broker) -> None:
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    common = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    sr.register_schema("common-money", Schema(common, "PROTOBUF"))
    order = (
        'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
        "message Bill { common.Money total = 1; }\n"
    )
    refs = [SchemaReference("common/money.proto", "common-money", 1)]
    with pytest.raises(SchemaRegistryError) as missing:  # the import needs its reference
        sr.register_schema("bill", Schema(order, "PROTOBUF"))
    assert missing.value.error_code == 42201
    bill_id = sr.register_schema("bill", Schema(order, "PROTOBUF", refs))
    # format=serialized: the descriptor, as the Protobuf deserializer reads a writer schema
    serialized = sr.get_schema(bill_id, fmt="serialized")
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized.schema_str))
    assert fd.package == "shop" and list(fd.dependency) == ["common/money.proto"]
    assert fd.message_type[0].field[0].type_name == ".common.Money"
    with pytest.raises(SchemaRegistryError) as referenced:
        sr.delete_version("common-money", 1)
    assert referenced.value.error_code == 42206
