"""The schema types and their rules: AVRO (fastavro parsing, Avro resolution for compatibility),
JSON (schemas checked with jsonschema; compatibility by `json_compat.py`) and PROTOBUF (.proto
text or a base64 descriptor built with protobuf's DescriptorPool, `protobuf_schema.py`;
compatibility by `protobuf_compat.py`). Each parsed schema has a canonical form, which two
registrations of one schema share, and a normalized one (`normalize=true`)."""

from __future__ import annotations

import json

import jsonschema  # type: ignore[import-untyped]
from google.protobuf import descriptor_pb2 as pb  # type: ignore[import-untyped]

from odradek.registry import avro_compat, json_compat, protobuf_compat, protobuf_schema
from odradek.registry.errors import RegistryError, invalid_schema

TYPES = ("AVRO", "JSON", "PROTOBUF")
SET_KEYWORDS = ("required", "enum", "type")  # JSON Schema keywords whose lists are sets


def _sorted_sets(node: object) -> object:
    """A JSON Schema with its set-valued lists in one order (Confluent's normalization)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            v = _sorted_sets(v)
            if k in SET_KEYWORDS and isinstance(v, list):
                v = sorted(v, key=lambda x: json.dumps(x, sort_keys=True))
            out[k] = v
        return out
    if isinstance(node, list):
        return [_sorted_sets(x) for x in node]
    return node


class Parsed:
    """A schema checked for its type, with the canonical text two registrations compare by."""

    def __init__(self, schema_type: str, text: str, refs: dict[str, object]) -> None:
        self.schema_type = schema_type
        self.proto: pb.FileDescriptorProto | None = None
        if schema_type == "AVRO":
            self.obj = avro_compat.parse(text, refs)
            self.canonical = avro_compat.canonical(self.obj, refs)
            self.normalized = self.canonical
        elif schema_type == "JSON":
            try:
                self.obj = json.loads(text)
                jsonschema.validators.validator_for(self.obj).check_schema(self.obj)
            except (ValueError, jsonschema.SchemaError) as exc:
                raise invalid_schema(str(exc).splitlines()[0]) from None
            self.canonical = json.dumps(self.obj, sort_keys=True, separators=(",", ":"))
            self.normalized = json.dumps(
                _sorted_sets(self.obj), sort_keys=True, separators=(",", ":")
            )
        elif schema_type == "PROTOBUF":
            protos = {k: v for k, v in refs.items() if isinstance(v, pb.FileDescriptorProto)}
            self.proto = protobuf_schema.build(text, protos)
            self.obj = self.proto
            self.canonical = protobuf_schema.canonical(self.proto)
            self.normalized = protobuf_schema.canonical(self.proto, normalize=True)
        else:
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")
        self.refs = refs

    def key(self, normalize: bool) -> str:
        return self.normalized if normalize else self.canonical

    def can_read(self, writer: Parsed) -> bool:
        """This schema, as a reader, reads what `writer` wrote."""
        if self.schema_type != writer.schema_type:
            return False
        if self.schema_type == "AVRO":
            return avro_compat.can_read(self.obj, writer.obj, {**writer.refs, **self.refs})
        if self.proto is not None and writer.proto is not None:
            return protobuf_compat.can_read(self.proto, writer.proto)
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
