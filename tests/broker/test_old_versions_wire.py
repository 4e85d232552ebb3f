"""The versions below kafka-python's JSON floors (Kafka 4.0 removed them, KIP-896; Kafka 3.9
serves them, and so do we: issue 16) are decoded and encoded with the fields older clients
send. kafka-python keeps its hand-written pre-JSON schemas (`kafka.protocol.old`), an encoder
independent of the JSON definitions: a sample of every request and response version it has
that the broker serves (non-flexible, Produce and Fetch aside) is encoded with it, decoded
with odradek's strict decoder or response class, and encoded back byte for byte."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import kafka.protocol.old as old
import pytest
from kafka.protocol.old.api import Request, Response
from kafka.protocol.old.types import (
    Array,
    Boolean,
    Bytes,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
)

import odradek.broker.handlers  # noqa: F401  (registers every handler)
from odradek.broker.network.registry import REGISTRY
from odradek.wire import protocol

SAMPLES: dict[Any, Any] = {Int8: 1, Int16: 2, Int32: 3, Int64: 4, Boolean: True, Bytes: b"b"}
RECORDS = (0, 1)  # Produce and Fetch: message sets, other work of issue 16
# Where kafka.protocol.old itself is wrong: DescribeLogDirs v0's partitions are an int32 array in
# Kafka, not one int32; DescribeAcls v2 is flexible in Kafka, old/ reuses v1's schema. And an
# ApiVersions response with an error (the sample's error code is 2) is read as v0 by design.
OLD_MISTAKES = {
    "DescribeLogDirsRequest_v0",
    "DescribeAclsRequest_v2",
    "DescribeAclsResponse_v2",
    "ApiVersionsResponse_v1",
    "ApiVersionsResponse_v2",
}


def sample(field: Any) -> Any:
    """A value for an old-style schema field: one element per array."""
    if type(field) is Schema:
        return tuple(sample(f) for f in field.fields)
    if type(field) is Array:  # not CompactArray
        return [sample(field.array_of)]
    if type(field) is String or field is String:  # not CompactString
        return "s"
    if field in SAMPLES:
        return SAMPLES[field]
    raise LookupError(field)  # a flexible-version type: not sampled


def old_classes() -> list[Any]:
    found = []
    for info in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, (Request, Response))
                and obj not in (Request, Response)
                and isinstance(getattr(obj, "API_KEY", None), int)
                and obj.API_KEY in REGISTRY
                and obj.API_KEY not in RECORDS
                and obj.__name__ not in OLD_MISTAKES
            ):
                reg = REGISTRY[obj.API_KEY]
                if reg.min_version <= obj.API_VERSION <= reg.max_version:
                    found.append(obj)
    return sorted(set(found), key=lambda c: (c.API_KEY, c.API_VERSION, c.__name__))


def encoded(cls: Any) -> bytes | None:
    try:
        values = [sample(f) for f in cls.SCHEMA.fields]
    except LookupError:
        return None
    return bytes(cls(*values).encode())


CASES = [(c, data) for c in old_classes() if (data := encoded(c)) is not None]


def test_every_version_below_the_json_floors_is_covered() -> None:
    """Each key whose JSON definition in kafka-python starts above v0 has its old versions
    sampled here (where kafka.protocol.old has them)."""
    covered = {(c.API_KEY, c.API_VERSION) for c, _ in CASES if issubclass(c, Request)}
    for key in (2, 8, 9, 19, 20, 23, 29, 30, 31, 32):
        floor = int(protocol.request_class(key).json["validVersions"].split("-")[0])
        assert {(key, v) for v in range(floor)} <= covered, key


@pytest.mark.parametrize(("cls", "data"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_old_encoding_round_trips(cls: Any, data: bytes) -> None:
    key, version = cls.API_KEY, cls.API_VERSION
    if issubclass(cls, Request):
        decoded = protocol.request_class(key).decode(data, version=version)
        assert protocol.decode_request(key, version, data, 0) == decoded  # the strict decoder
    else:
        decoded = protocol.response_class(key).decode(data, version=version)
    decoded._header = None  # a decoded message lacks the slot that encode reads
    assert bytes(decoded.encode(version=version)) == data


def _s(text: str) -> bytes:
    return len(text).to_bytes(2, "big") + text.encode()


def _n(count: int) -> bytes:
    return count.to_bytes(4, "big")


def test_versions_kafka_protocol_old_lacks_by_hand() -> None:
    """Kafka's v0 layouts of DescribeLogDirs (a nullable array of (topic, [partition int32])),
    AlterReplicaLogDirs ([(path, [(topic, [partition])])]) and WriteTxnMarkers ([(producer id
    int64, epoch int16, result bool, [(topic, [partition])], coordinator epoch int32)])."""
    data = _n(1) + _s("t") + _n(2) + _n(3) * 2
    decoded = protocol.decode_request(35, 0, data, 0)
    assert [(t.topic, list(t.partitions)) for t in decoded.topics] == [("t", [3, 3])]
    assert protocol.decode_request(35, 0, b"\xff\xff\xff\xff", 0).topics is None  # every dir

    data = _n(1) + _s("/d") + _n(1) + _s("t") + _n(1) + _n(4)
    (d,) = protocol.decode_request(34, 0, data, 0).dirs
    assert (d.path, [(t.name, list(t.partitions)) for t in d.topics]) == ("/d", [("t", [4])])

    marker = (7).to_bytes(8, "big") + (1).to_bytes(2, "big") + b"\x01"
    data = _n(1) + marker + _n(1) + _s("t") + _n(1) + _n(0) + _n(5)
    (m,) = protocol.decode_request(27, 0, data, 0).markers
    assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (
        7,
        1,
        True,
        5,
    )
    assert [(t.name, list(t.partition_indexes)) for t in m.topics] == [("t", [0])]
