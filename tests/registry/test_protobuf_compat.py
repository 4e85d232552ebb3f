"""Confluent's Protobuf compatibility rules (its protobuf SchemaDiff's compatible and
incompatible changes), one documented case a row: `can_read(new, old)` is BACKWARD."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.registry.errors import RegistryError
from odradek.registry.protobuf_compat import can_read
from odradek.registry.protobuf_schema import build, canonical

BASE = """syntax = "proto3";
package p;
message M {
  string s = 1;
  int32 n = 2;
  Inner inner = 3;
  Kind kind = 4;
  oneof choice { string a = 5; int64 b = 6; }
  message Inner { string x = 1; }
  enum Kind { K0 = 0; K1 = 1; }
}
"""

CASES = [
    ("field added", BASE.replace("string s = 1;", "string s = 1;\n  bytes extra = 9;"), True),
    ("field removed", BASE.replace("int32 n = 2;", ""), True),
    ("field renamed", BASE.replace("int32 n = 2;", "int32 count = 2;"), True),
    ("int32 -> uint64", BASE.replace("int32 n = 2;", "uint64 n = 2;"), True),
    ("string -> bytes", BASE.replace("string s = 1;", "bytes s = 1;"), True),
    ("enum constant added", BASE.replace("K1 = 1;", "K1 = 1; K2 = 2;"), True),
    ("message added", BASE + "message Other { string o = 1; }\n", True),
    ("syntax proto2", BASE.replace('"proto3"', '"proto2"'), True),
    ("one field into a new oneof", BASE.replace("int32 n = 2;", "oneof o { int32 n = 2; }"), True),
    ("string -> repeated string", BASE.replace("string s = 1;", "repeated string s = 1;"), True),
    ("int32 -> string", BASE.replace("int32 n = 2;", "string n = 2;"), False),
    ("int32 -> sint32", BASE.replace("int32 n = 2;", "sint32 n = 2;"), False),
    ("scalar -> message", BASE.replace("int32 n = 2;", "Inner n = 2;"), False),
    ("message type changed", BASE.replace("Inner inner = 3;", "M inner = 3;"), False),
    ("package changed", BASE.replace("package p;", "package q;"), False),
    (
        "nested message removed",
        BASE.replace("message Inner { string x = 1; }", "").replace("Inner inner = 3;", ""),
        False,
    ),
    ("oneof field removed", BASE.replace("int64 b = 6;", ""), False),
    ("int32 -> repeated int32", BASE.replace("int32 n = 2;", "repeated int32 n = 2;"), False),
    (
        "field moved into an existing oneof",
        BASE.replace("int32 n = 2;", "").replace("int64 b = 6;", "int64 b = 6; int32 n = 2;"),
        False,
    ),
    (
        "two fields moved into a new oneof",
        BASE.replace("string s = 1;", "").replace(
            "int32 n = 2;", "oneof o { string s = 1; int32 n = 2; }"
        ),
        False,
    ),
]


@pytest.mark.parametrize(("why", "new", "ok"), CASES, ids=[c[0] for c in CASES])
def test_backward(why: str, new: str, ok: bool) -> None:
    assert can_read(build(new, {}), build(BASE, {})) is ok


def test_required_fields_proto2() -> None:
    old = 'syntax = "proto2";\nmessage R { required string a = 1; optional int32 b = 2; }'
    assert not can_read(build(old.replace("optional int32", "required int32"), {}), build(old, {}))
    assert not can_read(build(old.replace("required string a = 1;", ""), {}), build(old, {}))
    assert can_read(build(old.replace("optional int32 b = 2;", ""), {}), build(old, {}))


def test_text_and_descriptor_are_one_schema() -> None:
    fd = build(BASE, {})
    encoded = base64.b64encode(fd.SerializeToString()).decode()
    assert canonical(build(encoded, {})) == canonical(fd)


@pytest.mark.parametrize(
    "bad",
    [
        'syntax = "proto3"; message M { Missing m = 1; }',
        'syntax = "proto3"; message M { string a = 1 }',
        'syntax = "proto3"; import "other.proto"; message M { string a = 1; }',
        'syntax = "proto3"; message M { string a = 1; int32 b = 1; }',
        "message {",
    ],
)
def test_invalid_schemas_are_42201(bad: str) -> None:
    with pytest.raises(RegistryError) as exc:
        build(bad, {})
    assert exc.value.code == 42201


PIECES = ["", "{", "}", ";", "=", "<", '"', " 99999999999 ", " to ", " max ", "[default="]
PIECES += [" oneof ", " map<", " required ", "0x", "-"]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_arbitrary_text_only_ever_gives_42201(data: st.DataObject) -> None:
    """Damaged .proto text, or any base64, is refused as an invalid schema, never a crash."""
    chars = list(BASE)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(chars) - 1))
        piece = data.draw(st.sampled_from(PIECES))
        chars[pos : pos + data.draw(st.integers(0, 2))] = list(piece)
    raw = data.draw(st.binary(max_size=64))
    for text in ("".join(chars), base64.b64encode(raw).decode()):
        try:
            build(text, {})
        except RegistryError as exc:
            assert exc.code == 42201
