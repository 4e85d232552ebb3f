"""PROTOBUF schemas as Confluent's registry takes them: .proto text, or a base64
`FileDescriptorProto` (what confluent-kafka's ProtobufSerializer registers). Either is checked by
building it in a fresh protobuf `DescriptorPool` with its references (imports resolved through
schema references, by the reference's name) and the well-known types, which resolves every
named type to its full name. The result is the file's resolved descriptor, from which come the
canonical form two registrations compare by, the `format=serialized` answer (base64) and the
compatibility check (`protobuf_compat.py`)."""

from __future__ import annotations

import base64
import binascii
import importlib
import json

from google.protobuf import descriptor_pb2 as pb  # type: ignore[import-untyped]
from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from odradek.registry.errors import invalid_schema
from odradek.registry.proto_text import ProtoSyntaxError, parse

MAIN = "schema.proto"
# the well-known types, importable without a reference (the serializers skip them)
WELL_KNOWN = (
    "any",
    "api",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
)
for _name in WELL_KNOWN:
    importlib.import_module(f"google.protobuf.{_name}_pb2")
WELL_KNOWN_PREFIX = "google/protobuf/"


def _from_text_or_base64(text: str, name: str) -> pb.FileDescriptorProto:
    stripped = text.strip()
    if stripped and not any(c in stripped for c in " \n{;"):
        try:
            fd = pb.FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
            fd.ClearField("source_code_info")
            return fd
        except (binascii.Error, DecodeError, ValueError):
            pass
    try:
        return parse(text, name)
    except ProtoSyntaxError as exc:
        raise invalid_schema(str(exc)) from None


def _well_known(name: str) -> pb.FileDescriptorProto | None:
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    out = pb.FileDescriptorProto()
    found.CopyToProto(out)
    return out


def build(text: str, refs: dict[str, pb.FileDescriptorProto]) -> pb.FileDescriptorProto:
    """The schema's resolved descriptor; `refs`: import name -> resolved descriptor of every
    schema reachable through its references. Raises 42201 for what does not parse or resolve."""
    fd = _from_text_or_base64(text, MAIN)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str, stack: tuple[str, ...]) -> None:
        if name in added or name in stack:
            return
        dep = refs.get(name)
        if dep is None and name.startswith(WELL_KNOWN_PREFIX):
            dep = _well_known(name)
        if dep is None:
            raise invalid_schema(f"the import {name!r} is not among the schema's references")
        dep = pb.FileDescriptorProto.FromString(dep.SerializeToString())
        dep.name = name
        for sub in dep.dependency:
            add(sub, (*stack, name))
        pool.Add(dep)
        added.add(name)

    try:
        for dep_name in fd.dependency:
            add(dep_name, ())
        if fd.name in added or not fd.name:
            fd.name = MAIN
        pool.Add(fd)
        built = pool.FindFileByName(fd.name)
    except (TypeError, ValueError, KeyError) as exc:
        raise invalid_schema(str(exc).splitlines()[0] if str(exc) else "unresolvable") from None
    out = pb.FileDescriptorProto()
    built.CopyToProto(out)
    return out


def serialized(fd: pb.FileDescriptorProto) -> str:
    """The `format=serialized` form: base64 of the descriptor."""
    return base64.standard_b64encode(fd.SerializeToString()).decode("ascii")


def _message(m: pb.DescriptorProto, normalize: bool) -> dict[str, object]:
    fields = [
        {
            "name": f.name,
            "number": f.number,
            "label": f.label,
            "type": f.type,
            "type_name": f.type_name,
            "oneof": m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None,
            "default": f.default_value,
            "packed": f.options.packed if f.options.HasField("packed") else None,
        }
        for f in m.field
    ]
    nested = [_message(n, normalize) for n in m.nested_type]
    enums = [_enum(e, normalize) for e in m.enum_type]
    if normalize:
        fields.sort(key=lambda f: f["number"])
        nested.sort(key=lambda n: str(n["name"]))
        enums.sort(key=lambda e: str(e["name"]))
    return {
        "name": m.name,
        "fields": fields,
        "nested": nested,
        "enums": enums,
        "map": m.options.map_entry,
        "reserved": sorted((r.start, r.end) for r in m.reserved_range)
        if normalize
        else [(r.start, r.end) for r in m.reserved_range],
        "reserved_names": sorted(m.reserved_name) if normalize else list(m.reserved_name),
    }


def _enum(e: pb.EnumDescriptorProto, normalize: bool) -> dict[str, object]:
    values = [(v.name, v.number) for v in e.value]
    if normalize:
        values.sort(key=lambda v: (v[1], v[0]))
    return {"name": e.name, "values": values, "alias": e.options.allow_alias}


def canonical(fd: pb.FileDescriptorProto, normalize: bool = False) -> str:
    """What two registrations of the same schema share: everything on the wire and in the
    generated code's names, not comments, layout or (unless kept above) options. With
    `normalize`, Confluent's normalization: fields by number, nested types, enums, imports
    and services by name."""
    messages = [_message(m, normalize) for m in fd.message_type]
    enums = [_enum(e, normalize) for e in fd.enum_type]
    services = [
        {
            "name": s.name,
            "methods": [
                (m.name, m.input_type, m.output_type, m.client_streaming, m.server_streaming)
                for m in s.method
            ],
        }
        for s in fd.service
    ]
    deps = list(fd.dependency)
    if normalize:
        enums.sort(key=lambda e: str(e["name"]))
        services.sort(key=lambda s: str(s["name"]))
        deps.sort()
    doc = {
        "syntax": fd.syntax or "proto2",
        "package": fd.package,
        "deps": deps,
        "messages": messages,
        "enums": enums,
        "services": services,
    }
    return json.dumps(doc, separators=(",", ":"))
