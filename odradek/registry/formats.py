"""The schema types and their rules: AVRO (fastavro parsing, Avro resolution for compatibility)
and JSON (schemas checked with jsonschema; compatibility by `json_compat.py`). PROTOBUF is
refused with 42201 (docs/notes.md)."""

from __future__ import annotations

import json

import jsonschema  # type: ignore[import-untyped]

from odradek.registry import avro_compat, json_compat
from odradek.registry.errors import RegistryError, invalid_schema

TYPES = ("AVRO", "JSON")


class Parsed:
    """A schema checked for its type, with the canonical text two registrations compare by."""

    def __init__(self, schema_type: str, text: str, refs: dict[str, object]) -> None:
        self.schema_type = schema_type
        if schema_type == "AVRO":
            self.obj = avro_compat.parse(text, refs)
            self.canonical = avro_compat.canonical(self.obj, refs)
        elif schema_type == "JSON":
            try:
                self.obj = json.loads(text)
                jsonschema.validators.validator_for(self.obj).check_schema(self.obj)
            except (ValueError, jsonschema.SchemaError) as exc:
                raise invalid_schema(str(exc).splitlines()[0]) from None
            self.canonical = json.dumps(self.obj, sort_keys=True, separators=(",", ":"))
        else:
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")
        self.refs = refs

    def can_read(self, writer: Parsed) -> bool:
        """This schema, as a reader, reads what `writer` wrote."""
        if self.schema_type != writer.schema_type:
            return False
        if self.schema_type == "AVRO":
            return avro_compat.can_read(self.obj, writer.obj, {**writer.refs, **self.refs})
        return json_compat.can_read(self.obj, writer.obj)


def is_compatible(level: str, new: Parsed, olds: list[Parsed]) -> bool:
    """Confluent's rule for a level: the newest old schema, or all with _TRANSITIVE."""
    if level == "NONE" or not olds:
        return True
    against = olds if level.endswith("_TRANSITIVE") else olds[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for old in against:
        if base in ("BACKWARD", "FULL") and not new.can_read(old):
            return False
        if base in ("FORWARD", "FULL") and not old.can_read(new):
            return False
    return True
