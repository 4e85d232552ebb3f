"""JSON Schema compatibility, a subset of Confluent's JsonSchemaDiff: can a reader schema accept
every document the writer schema accepts? Handled as Confluent does: types (a reader may widen,
`integer` -> `number`, never narrow), object properties under open and closed content models
(`additionalProperties: false` closes one), `required`, `additionalProperties`, `enum`, array
`items`, and string/number bounds. Any other keyword that differs makes the pair incompatible,
which is stricter than Confluent, never looser (docs/notes.md)."""

from __future__ import annotations

ANY = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
# keywords that carry no constraint on the documents a schema accepts
ANNOTATIONS = frozenset(
    {"title", "description", "$schema", "$id", "$comment", "examples", "default", "readOnly"}
)
HANDLED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "items",
        "maxLength",
        "minLength",
        "maximum",
        "minimum",
        "maxItems",
        "minItems",
    }
)
UPPER = ("maxLength", "maximum", "maxItems")  # a reader's bound may only rise or vanish
LOWER = ("minLength", "minimum", "minItems")  # a reader's bound may only fall or vanish


def _types(s: dict[str, object]) -> frozenset[str]:
    t = s.get("type")
    if isinstance(t, str):
        return frozenset({t})
    if isinstance(t, list):
        return frozenset(str(x) for x in t)
    return ANY


def _open(s: dict[str, object]) -> bool:
    return s.get("additionalProperties", True) is not False


def _props(s: dict[str, object]) -> dict[str, object]:
    p = s.get("properties")
    return p if isinstance(p, dict) else {}


def _required(s: dict[str, object]) -> set[str]:
    r = s.get("required")
    return {str(x) for x in r} if isinstance(r, list) else set()


def can_read(reader: object, writer: object) -> bool:
    """True when every document valid under `writer` is valid under `reader` (by the rules
    above)."""
    if reader is True or reader == {}:
        return True
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return reader == writer
    rtypes, wtypes = _types(reader), _types(writer)
    widened = rtypes | ({"integer"} if "number" in rtypes else set())
    if not wtypes <= widened:
        return False
    rest_r = {k: v for k, v in reader.items() if k not in HANDLED | ANNOTATIONS}
    rest_w = {k: v for k, v in writer.items() if k not in HANDLED | ANNOTATIONS}
    if rest_r != rest_w:
        return False
    if "enum" in reader and ("enum" not in writer or not _enum_within(writer, reader)):
        return False
    for key in UPPER:
        if key in reader and not _at_most(writer.get(key), reader[key]):
            return False
    for key in LOWER:
        if key in reader and not _at_most(reader[key], writer.get(key)):
            return False
    if "items" in reader or "items" in writer:
        if not can_read(reader.get("items", True), writer.get("items", True)):
            return False
    return _objects(reader, writer)


def _at_most(a: object, b: object) -> bool:
    """a <= b for two numbers (a bound missing or not a number compares false)."""
    ok = (int, float)
    return isinstance(a, ok) and isinstance(b, ok) and a <= b


def _enum_within(writer: dict[str, object], reader: dict[str, object]) -> bool:
    w, r = writer["enum"], reader["enum"]
    return isinstance(w, list) and isinstance(r, list) and all(x in r for x in w)


def _objects(reader: dict[str, object], writer: dict[str, object]) -> bool:
    rprops, wprops = _props(reader), _props(writer)
    if not _required(reader) <= _required(writer):
        return False  # a newly required property: old documents may lack it
    if _open(writer) and not _open(reader):
        return False  # old documents may carry properties the reader now refuses
    for name, wschema in wprops.items():
        if name in rprops:
            if not can_read(rprops[name], wschema):
                return False
        elif not _open(reader) or not can_read(reader.get("additionalProperties", True), wschema):
            return False  # removed from a closed content model
    for name in rprops.keys() - wprops.keys():
        if _open(writer) and not can_read(rprops[name], writer.get("additionalProperties", True)):
            return False  # added to an open content model: old documents may hold anything
    return True
