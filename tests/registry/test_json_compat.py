"""JSON Schema compatibility (Confluent's JsonSchemaDiff cases): can the new (reader) schema
accept every document the old (writer) schema accepts."""

from __future__ import annotations

import json

import pytest

from odradek.registry.errors import RegistryError
from odradek.registry.formats import Parsed, is_compatible
from odradek.registry.json_compat import can_read


def obj(
    props: dict[str, object], required: list[str] | None = None, closed: bool = False
) -> dict[str, object]:
    out: dict[str, object] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if closed:
        out["additionalProperties"] = False
    return out


S, INT, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}


@pytest.mark.parametrize(
    ("writer", "reader", "ok"),
    [
        (INT, N, True),  # type widened
        (N, INT, False),  # narrowed
        (S, {"type": ["string", "null"]}, True),
        ({"type": ["string", "null"]}, S, False),
        ({"enum": ["a"]}, {"enum": ["a", "b"]}, True),
        ({"enum": ["a", "b"]}, {"enum": ["a"]}, False),
        ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, True),
        ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, False),
        (S, {"type": "string", "minLength": 1}, False),  # a new lower bound
        ({"type": "array", "items": INT}, {"type": "array", "items": N}, True),
        ({"type": "array", "items": N}, {"type": "array", "items": INT}, False),
        ({"type": "string", "format": "email"}, {"type": "string", "format": "uri"}, False),
        (S, {"type": "string", "description": "docs only"}, True),
    ],
)
def test_values(writer: object, reader: object, ok: bool) -> None:
    assert can_read(reader, writer) is ok


def test_objects_open_and_closed_content_models() -> None:
    base = obj({"a": S})
    # removing a property from an open model: the reader takes it as an additional property
    assert can_read(obj({}), base)
    # removing it from a closed model: old documents carrying it are refused
    assert not can_read(obj({}, closed=True), obj({"a": S}, closed=True))
    # adding a property to what was an open model: old documents may hold it with any type
    assert not can_read(obj({"a": S, "b": INT}), base)
    # adding an optional property to a closed model is fine, a required one is not
    assert can_read(obj({"a": S, "b": INT}, closed=True), obj({"a": S}, closed=True))
    assert not can_read(obj({"a": S, "b": INT}, ["b"], closed=True), obj({"a": S}, closed=True))
    # requiring an existing property, closing an open model: refused; the opposite: fine
    assert not can_read(obj({"a": S}, ["a"]), base)
    assert can_read(base, obj({"a": S}, ["a"]))
    assert not can_read(obj({"a": S}, closed=True), base)
    assert can_read(base, obj({"a": S}, closed=True))
    # nested properties recurse
    assert can_read(obj({"n": obj({"x": N})}), obj({"n": obj({"x": INT})}))
    assert not can_read(obj({"n": obj({"x": INT})}), obj({"n": obj({"x": N})}))


def parsed(schema: object) -> Parsed:
    return Parsed("JSON", json.dumps(schema), {})


def test_levels() -> None:
    v1 = parsed(obj({"a": S}, closed=True))
    v2 = parsed(obj({"a": S, "b": INT}, closed=True))  # optional property added
    assert is_compatible("BACKWARD", v2, [v1])
    assert not is_compatible("FORWARD", v2, [v1])  # v1 (closed) refuses documents with b
    assert not is_compatible("FULL", v2, [v1])


def test_invalid_json_schema_42201() -> None:
    for bad in ('{"type": 12}', "{", '{"minLength": -1}'):
        with pytest.raises(RegistryError) as err:
            Parsed("JSON", bad, {})
        assert err.value.code == 42201
