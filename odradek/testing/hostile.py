"""Hostile but well-formed requests: every field a value its schema allows and a handler may not
expect.

Byte mutations (`odradek.testing.fuzz.mutate`) mostly test the decoders; the requests here
decode, so they test the handlers and the response encoders behind them. Per field type, from
Kafka's JSON message definitions (through `odradek.wire.protocol`):

- integers: the extremes of the type, -1, 0 and 1; float64: NaN, the infinities, 0, -1, 1e308;
- strings: null where nullable, empty, the longest an int16 length allows (32,767 bytes), a
  known topic, an unknown one, an internal one, names that are not legal topic names, a few
  words the handlers look for (entity types, config and quota keys, a SASL mechanism);
- uuids: the zero id (null as kafka-python decodes it), the known topic's id, an unknown id;
- bytes and records: null where nullable, empty, a valid record batch, a cut one, garbage;
- arrays: null where nullable, empty, up to three elements, or one element twice (duplicates).

Each list starts with its most hostile value (null, then the extremes), which is where
hypothesis starts and shrinks to. `values(field, version)` gives the candidates of a simple
field (the hypothesis property test
tests/broker/test_handler_properties.py samples them); `random_request(rng, key, version)` draws
a whole request with a `random.Random` (the live fuzzer's "hostile" sends).
"""

from __future__ import annotations

import math
import random
import uuid

from odradek.wire import protocol
from odradek.wire.records import build_batch

LONGEST = 0x7FFF  # the longest string an int16 length allows
TOPIC = "fuzz"
GROUP = "fuzz-group"
UNKNOWN_ID = uuid.UUID(int=0x0DDBA11)


class KnownId:
    """Stands for the id of the known topic, which the broker picks when it creates it."""

    def __repr__(self) -> str:
        return "KNOWN_ID"


KNOWN_ID = KnownId()

_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_BATCH = build_batch([(b"k", b"v", [], 1_700_000_000_000)])
_LONG = "x" * LONGEST
STRINGS = (
    _LONG,
    "",
    TOPIC,
    "missing",
    "é\x00/..",
    "__consumer_offsets",
    GROUP,
    "user",
    "client-id",
    "cleanup.policy",
    "producer_byte_rate",
    "PLAIN",
    "consumer",
)
TOPIC_NAMES = (_LONG, "", TOPIC, "missing", ".", "__consumer_offsets", "a" * 250)
GROUP_IDS = (_LONG, "", GROUP, "missing")
FLOATS = (math.nan, math.inf, -math.inf, 0.0, -1.0, 1.5, 1e308)


def values(f: protocol.Schema, version: int) -> list[object]:
    """The hostile candidates of a simple (not array, not struct) field at `version`."""
    kind = f.type_str
    none: list[object] = [None] if f.nullable_for_version_q(version) else []
    if kind in _BITS:
        top = 1 << (_BITS[kind] - 1)
        return [-top, top - 1, -1, 0, 1]
    if kind == "uint16":
        return [0xFFFF, 0, 1]
    if kind == "float64":
        return list(FLOATS)
    if kind == "bool":
        return [False, True]
    if kind == "uuid":
        return [None, UNKNOWN_ID, KNOWN_ID]
    if kind == "string":
        entity = f._json.get("entityType")
        pool = (
            TOPIC_NAMES if entity == "topicName" else GROUP_IDS if entity == "groupId" else STRINGS
        )
        return none + list(pool)
    if kind == "records":
        return none + [b"\xff" * 64, b"", _BATCH, _BATCH[:30]]
    if kind == "bytes":
        return none + [b"\xff" * 300, b"", b"x"]
    raise ValueError(f"no hostile values for type {kind} ({f.name})")


def _random_value(
    rng: random.Random, f: protocol.Schema, version: int, topic_id: uuid.UUID
) -> object:
    nullable = f.nullable_for_version_q(version)
    if f.is_array():
        if nullable and rng.random() < 0.15:
            return None
        if f.is_struct_array():
            draw = lambda: _random_struct(rng, f, version, topic_id)  # noqa: E731
        else:
            pool = values(f.array_of, version)
            draw = lambda: resolve(rng.choice(pool), topic_id)  # noqa: E731
        if rng.random() < 0.2:
            one = draw()
            return [one, one]  # the same element twice
        return [draw() for _ in range(rng.randint(0, 3))]
    if f.is_struct():
        if nullable and rng.random() < 0.15:
            return None
        return _random_struct(rng, f, version, topic_id)
    return resolve(rng.choice(values(f, version)), topic_id)


def _random_struct(
    rng: random.Random, f: protocol.Schema, version: int, topic_id: uuid.UUID
) -> protocol.Message:
    fields = {g.name: _random_value(rng, g, version, topic_id) for g in f.untagged_fields(version)}
    return f.data_class(version=version, **fields)


def resolve(value: object, topic_id: uuid.UUID) -> object:
    """A candidate value with KNOWN_ID replaced by the known topic's id."""
    return topic_id if value is KNOWN_ID else value


def random_request(
    rng: random.Random, api_key: int, version: int, topic_id: uuid.UUID = UNKNOWN_ID
) -> protocol.Message:
    """A whole hostile request of this key and version (kafka-python's message object)."""
    cls = protocol.request_class(api_key)
    if cls is None:
        raise ValueError(f"kafka-python has no request schema for API key {api_key}")
    fields = {
        g.name: _random_value(rng, g, version, topic_id)
        for g in cls._struct.untagged_fields(version)
    }
    return cls(version=version, **fields)
