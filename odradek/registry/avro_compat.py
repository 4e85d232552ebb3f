"""Avro schemas: parsing (fastavro) and compatibility by Avro's schema resolution rules, as
Confluent's AvroCompatibilityChecker (Avro's SchemaCompatibility): a reader can read data
written with a writer schema when the types match or promote (int -> long/float/double, long ->
float/double, float -> double, string <-> bytes), a record's reader fields are each in the
writer or have a default, enum writer symbols are all in the reader (or the reader has a
default), a writer union's every branch is readable, and named types agree by name or alias.
BACKWARD: the new schema reads the old; FORWARD: the old reads the new; FULL: both."""

from __future__ import annotations

import json
from typing import cast

import fastavro
from fastavro.schema import SchemaParseException, parse_schema, to_parsing_canonical_form

from odradek.registry.errors import invalid_schema

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}

Json = object


def _fastavro(obj: Json, named: dict[str, Json] | None) -> object:
    """fastavro's parsed schema (its parameters are typed loosely: JSON as parsed)."""
    refs = cast(dict[str, dict[str, object]], dict(named or {}))
    return parse_schema(cast(dict[str, object], obj), named_schemas=refs)


def _items(obj: object, key: str) -> list[object]:
    """A JSON object's list member (fields, symbols, aliases); [] when absent or not a list."""
    found = obj.get(key) if isinstance(obj, dict) else None
    return found if isinstance(found, list) else []


def _fields(obj: object) -> list[dict[str, object]]:
    return [
        f for f in _items(obj, "fields") if isinstance(f, dict) and isinstance(f.get("name"), str)
    ]


def parse(text: str, named: dict[str, Json] | None = None) -> Json:
    """The schema's JSON, checked by fastavro; `named` holds referenced named types."""
    try:
        obj: Json = json.loads(text)
    except ValueError:
        # a bare primitive name is a valid Avro schema ("string") only quoted; Confluent
        # accepts it unquoted too
        obj = text.strip()
    try:
        _fastavro(obj, named)
    except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise invalid_schema(str(exc) or type(exc).__name__) from None
    for name, t in named_types(obj).items():
        # fastavro lets a record without "fields" through; Avro's parser (Confluent's) does not
        if isinstance(t, dict) and t.get("type") in ("record", "error"):
            if not isinstance(t.get("fields"), list):
                raise invalid_schema(f"Record has no fields: {name}")
    return obj


def canonical(obj: Json, named: dict[str, Json] | None = None) -> str:
    """Avro's Parsing Canonical Form: how two texts of one schema compare equal."""
    try:
        return str(to_parsing_canonical_form(_fastavro(obj, named)))  # type: ignore[arg-type]
    except Exception:  # references fastavro cannot expand: compare the compact JSON
        return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def named_types(
    obj: Json, namespace: str = "", out: dict[str, Json] | None = None
) -> dict[str, Json]:
    """Every named type (record, enum, fixed) a schema defines, by full name."""
    out = {} if out is None else out
    if isinstance(obj, list):
        for branch in obj:
            named_types(branch, namespace, out)
    elif isinstance(obj, dict):
        kind = obj.get("type")
        if kind in ("record", "error", "enum", "fixed") and isinstance(obj.get("name"), str):
            full = _full_name(obj, namespace)
            out[full] = obj
            namespace = full.rpartition(".")[0]
            for f in _fields(obj):
                named_types(f.get("type"), namespace, out)
        elif kind in ("array", "map"):
            named_types(obj.get("items" if kind == "array" else "values"), namespace, out)
        elif isinstance(kind, (dict, list)):
            named_types(kind, namespace, out)
    return out


def _full_name(obj: dict[str, Json], namespace: str) -> str:
    name = str(obj["name"])
    if "." in name:
        return name
    ns = obj.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


class _Checker:
    """One reader/writer pair; named types resolved through each side's definitions."""

    def __init__(self, reader: Json, writer: Json, refs: dict[str, Json]) -> None:
        self.rnames = {**refs, **named_types(reader)}
        self.wnames = {**refs, **named_types(writer)}
        self.seen: set[tuple[str, str]] = set()

    def resolve(self, s: Json, names: dict[str, Json], ns: str) -> tuple[Json, str]:
        if isinstance(s, str) and s not in PRIMITIVES:
            full = s if "." in s or not ns else f"{ns}.{s}"
            found = names.get(full, names.get(s))
            if found is not None:
                return found, _full_name(found, ns).rpartition(".")[0]  # type: ignore[arg-type]
        if isinstance(s, dict):
            kind = s.get("type")
            if isinstance(kind, str) and kind in PRIMITIVES:
                return kind, ns
            if isinstance(kind, (dict, list)):
                return self.resolve(kind, names, ns)
            if isinstance(kind, str) and kind not in (
                "record",
                "error",
                "enum",
                "fixed",
                "array",
                "map",
            ):
                return self.resolve(kind, names, ns)
            if kind in ("record", "error", "enum", "fixed"):
                ns = _full_name(s, ns).rpartition(".")[0]
        return s, ns

    def compatible(self, r: Json, w: Json, rns: str = "", wns: str = "") -> bool:
        r, rns = self.resolve(r, self.rnames, rns)
        w, wns = self.resolve(w, self.wnames, wns)
        if isinstance(w, list):
            return all(self.compatible(r, branch, rns, wns) for branch in w)
        if isinstance(r, list):
            return any(self.compatible(branch, w, rns, wns) for branch in r)
        if isinstance(r, str) or isinstance(w, str):
            return (
                isinstance(r, str) and isinstance(w, str) and (r == w or r in PROMOTIONS.get(w, ()))
            )
        assert isinstance(r, dict) and isinstance(w, dict)
        kind = r.get("type")
        if kind != w.get("type") and not ({kind, w.get("type")} <= {"record", "error"}):
            return False
        if kind == "array":
            return self.compatible(r.get("items"), w.get("items"), rns, wns)
        if kind == "map":
            return self.compatible(r.get("values"), w.get("values"), rns, wns)
        if not _names_match(r, w, rns, wns):
            return False
        if kind == "fixed":
            return r.get("size") == w.get("size")
        if kind == "enum":
            missing = {str(x) for x in _items(w, "symbols")} - {
                str(x) for x in _items(r, "symbols")
            }
            return not missing or "default" in r
        return self.record(r, w, rns, wns)

    def record(self, r: dict[str, Json], w: dict[str, Json], rns: str, wns: str) -> bool:
        key = (_full_name(r, rns), _full_name(w, wns))
        if key in self.seen:  # a recursive type already being checked
            return True
        self.seen.add(key)
        wfields = {str(f["name"]): f for f in _fields(w)}
        for rf in _fields(r):
            names = [str(rf["name"]), *(str(a) for a in _items(rf, "aliases"))]
            wf = next((wfields[n] for n in names if n in wfields), None)
            if wf is None:
                if "default" not in rf:
                    return False
            elif not self.compatible(
                rf["type"], wf["type"], key[0].rpartition(".")[0], key[1].rpartition(".")[0]
            ):
                return False
        return True


def _names_match(r: dict[str, Json], w: dict[str, Json], rns: str, wns: str) -> bool:
    rname = _full_name(r, rns)
    wname = _full_name(w, wns)
    if rname == wname or rname.rpartition(".")[2] == wname.rpartition(".")[2]:
        # Avro's SchemaCompatibility compares unqualified names
        return True
    aliases = [str(a) for a in _items(r, "aliases")]
    return wname in aliases or wname.rpartition(".")[2] in aliases


def can_read(reader: Json, writer: Json, refs: dict[str, Json] | None = None) -> bool:
    """True when data written with `writer` can be read with `reader`."""
    return _Checker(reader, writer, dict(refs or {})).compatible(reader, writer)


__all__ = ["can_read", "canonical", "fastavro", "named_types", "parse"]
