"""What the registry keeps in `_schemas` (Confluent's record format, so Confluent's registry
or Karapace can take the topic over), and bad HTTP input answered without harm."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.testing.broker import Broker

pytestmark = pytest.mark.compat

SCHEMA = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(schema_registry=True).start()
    try:
        yield b
    finally:
        b.stop()


def read_topic(b: Broker, count: int) -> list[tuple[dict[str, object], object]]:
    consumer = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": "reader", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["_schemas"])
    out: list[tuple[dict[str, object], object]] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            value = msg.value()
            out.append((json.loads(msg.key()), None if value is None else json.loads(value)))
    finally:
        consumer.close()
    return out


def test_records_in_confluents_format(broker: Broker) -> None:
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    schema_id = sr.register_schema("s", Schema(SCHEMA, "AVRO"))
    sr.set_compatibility("s", "FULL")
    sr.update_global_mode("READWRITE")
    sr.delete_subject("s")
    sr.delete_subject("s", permanent=True)
    got = read_topic(broker, 6)
    assert got == [
        (
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {
                "subject": "s",
                "version": 1,
                "id": schema_id,
                "schema": SCHEMA,
                "schemaType": "AVRO",
                "deleted": False,
            },
        ),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "MODE", "subject": None, "magic": 0}, {"mode": "READWRITE"}),
        ({"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}, {"subject": "s", "version": 1}),
        (
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {
                "subject": "s",
                "version": 1,
                "id": schema_id,
                "schema": SCHEMA,
                "schemaType": "AVRO",
                "deleted": True,
            },
        ),
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, None),
    ]


def http_exchange(b: Broker, raw: bytes) -> bytes:
    host, port = b.schema_registry_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return data


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b"NONSENSE\r\n\r\n", b"400", 400),
        (
            b"POST /subjects/x/versions HTTP/1.1\r\nContent-Length: 5\r\nConnection: close"
            b"\r\n\r\n{nope",
            b"400",
            400,
        ),
        (
            b"POST /subjects/x/versions HTTP/1.1\r\nContent-Length: 2\r\nConnection: close"
            b"\r\n\r\n[]",
            b"422",
            42201,
        ),
        (
            b"POST /subjects/x/versions HTTP/1.1\r\nContent-Length: 41\r\nConnection: close"
            b'\r\n\r\n{"schema": "x", "schemaType": "PROTOBUF"}',
            b"422",
            42201,
        ),
        (b"GET /subjects/x/versions/0 HTTP/1.1\r\nConnection: close\r\n\r\n", b"404", 40401),
        (b"GET /schemas/ids/abc HTTP/1.1\r\nConnection: close\r\n\r\n", b"404", 40403),
        (b"GET /nowhere HTTP/1.1\r\nConnection: close\r\n\r\n", b"404", 404),
    ],
)
def test_bad_requests_get_error_bodies(
    broker: Broker, raw: bytes, status: bytes, code: int
) -> None:
    answer = http_exchange(broker, raw)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == status
    assert json.loads(body)["error_code"] == code
    # and the registry still serves
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    assert sr.get_subjects() == []
