"""Avro compatibility by the schema resolution rules (Avro's SchemaCompatibility, which
Confluent's AvroCompatibilityChecker uses), and the levels built on it."""

from __future__ import annotations

import json

import pytest

from odradek.registry.avro_compat import can_read
from odradek.registry.errors import RegistryError
from odradek.registry.formats import Parsed, is_compatible


def rec(*fields: dict[str, object], name: str = "R", **extra: object) -> dict[str, object]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, type_: object, **extra: object) -> dict[str, object]:
    return {"name": name, "type": type_, **extra}


@pytest.mark.parametrize(
    ("writer", "reader", "ok"),
    [
        ("int", "long", True),
        ("int", "float", True),
        ("int", "double", True),
        ("long", "double", True),
        ("float", "double", True),
        ("long", "int", False),
        ("double", "float", False),
        ("string", "bytes", True),
        ("bytes", "string", True),
        ("string", "int", False),
        ("int", ["null", "int"], True),  # reader union holding the writer's type
        (["null", "int"], "int", False),  # writer's null branch cannot be read
        (["int", "long"], "long", True),  # every writer branch promotes
        (["int", "string"], ["long", "string"], True),
        ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}, True),
        ({"type": "map", "values": "long"}, {"type": "map", "values": "int"}, False),
        (
            {"type": "fixed", "name": "F", "size": 4},
            {"type": "fixed", "name": "F", "size": 8},
            False,
        ),
    ],
)
def test_primitive_and_container_resolution(writer: object, reader: object, ok: bool) -> None:
    assert can_read(reader, writer) is ok


def test_record_fields() -> None:
    old = rec(f("a", "int"))
    assert can_read(rec(f("a", "int"), f("b", "string", default="x")), old)  # added with default
    assert not can_read(rec(f("a", "int"), f("b", "string")), old)  # added without
    assert can_read(rec(), old)  # a removed field is ignored by the reader
    assert can_read(rec(f("z", "int", aliases=["a"])), old)  # renamed through an alias
    assert not can_read(rec(f("a", "int"), name="Other"), old)  # another record name
    assert can_read(rec(f("a", "int"), name="Other", aliases=["R"]), old)


def test_nested_and_named_references() -> None:
    inner_old = rec(f("x", "int"), name="Inner")
    inner_new = rec(f("x", "long"), f("y", "int"), name="Inner")
    old = rec(f("i", inner_old), f("j", "Inner"))
    assert not can_read(rec(f("i", inner_new), f("j", "Inner")), old)  # y has no default
    inner_ok = rec(f("x", "long"), f("y", "int", default=0), name="Inner")
    assert can_read(rec(f("i", inner_ok), f("j", "Inner")), old)
    # a recursive type terminates
    linked = rec(f("v", "int"), f("next", ["null", "Node"], default=None), name="Node")
    assert can_read(linked, linked)


def test_enums() -> None:
    old = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    assert can_read({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}, old)
    assert not can_read({"type": "enum", "name": "E", "symbols": ["A"]}, old)
    assert can_read({"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}, old)


def parsed(schema: object) -> Parsed:
    return Parsed("AVRO", json.dumps(schema), {})


def test_levels_and_transitive() -> None:
    v1 = parsed(rec(f("a", "int")))
    v2 = parsed(rec(f("a", "int"), f("b", "int", default=0)))
    v3 = parsed(rec(f("a", "int"), f("b", "int")))  # b lost its default
    assert is_compatible("BACKWARD", v2, [v1])
    assert is_compatible("BACKWARD", v3, [v1, v2])  # reads v2's data: b is there
    assert not is_compatible("BACKWARD_TRANSITIVE", v3, [v1, v2])  # not v1's
    assert not is_compatible("FORWARD", v1, [v2, v3])  # v3, the old reader, needs b
    assert is_compatible("FORWARD", v3, [v1])  # v1 (old reader) skips b
    assert not is_compatible("FULL", v3, [v1])
    assert is_compatible("FULL", v2, [v1])
    assert is_compatible("NONE", v3, [v1])


def test_canonical_form_makes_texts_equal_and_bad_schemas_42201() -> None:
    a = Parsed(
        "AVRO", '{"type":"record","name":"R","doc":"d","fields":[{"name":"a","type":"int"}]}', {}
    )
    b = Parsed("AVRO", json.dumps(rec(f("a", "int"))), {})
    assert a.canonical == b.canonical
    for bad in ('{"type": "recrd"}', '{"type":"record","name":"R"}', "not json"):
        with pytest.raises(RegistryError) as err:
            Parsed("AVRO", bad, {})
        assert err.value.code == 42201
