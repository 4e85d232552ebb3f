"""Protobuf compatibility as Confluent's registry computes it (its protobuf `SchemaDiff`): a
change is judged by what it does on the wire, comparing messages by full name and fields by
number. `can_read(reader, writer)` is Confluent's diff from the writer (original) to the reader
(update) with only its compatible changes allowed:

- allowed: fields added or removed (not required ones), renamed fields, enum constants added or
  removed, messages and enums added, oneofs added or removed, a single existing field moved into
  a new oneof, syntax changes, scalar type changes within one wire group (int32, uint32, int64,
  uint64, bool / sint32, sint64 / fixed32, sfixed32 / fixed64, sfixed64 / string, bytes),
  optional <-> repeated for length-delimited fields (string, bytes, messages);
- refused: a changed package (PACKAGE_CHANGED), a message removed (MESSAGE_REMOVED), a field
  changing kind (scalar, message, enum: FIELD_KIND_CHANGED), scalar type across groups
  (FIELD_SCALAR_KIND_CHANGED), message or enum type (FIELD_NAMED_TYPE_CHANGED), a required
  field added or removed, a field leaving a oneof (ONEOF_FIELD_REMOVED), several fields moved
  into a oneof (MULTIPLE_FIELDS_MOVED_TO_ONEOF) or one into an existing oneof
  (FIELD_MOVED_TO_EXISTING_ONEOF), optional <-> repeated for numeric fields."""

from __future__ import annotations

from google.protobuf import descriptor_pb2 as pb  # type: ignore[import-untyped]

F = pb.FieldDescriptorProto
GROUPS = (
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
)
LENGTH_DELIMITED = {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE}


def _messages(fd: pb.FileDescriptorProto) -> dict[str, pb.DescriptorProto]:
    out: dict[str, pb.DescriptorProto] = {}

    def walk(prefix: str, msgs: list[pb.DescriptorProto]) -> None:
        for m in msgs:
            name = f"{prefix}.{m.name}"
            out[name] = m
            walk(name, list(m.nested_type))

    walk(f".{fd.package}" if fd.package else "", list(fd.message_type))
    return out


def _kind(f: pb.FieldDescriptorProto) -> str:
    return {F.TYPE_MESSAGE: "message", F.TYPE_ENUM: "enum", F.TYPE_GROUP: "group"}.get(
        f.type, "scalar"
    )


def _same_scalar(a: int, b: int) -> bool:
    return a == b or any(a in g and b in g for g in GROUPS)


def _oneof(m: pb.DescriptorProto, f: pb.FieldDescriptorProto) -> str | None:
    """The real oneof holding the field (proto3 `optional`'s synthetic one is none)."""
    if not f.HasField("oneof_index") or f.proto3_optional:
        return None
    return str(m.oneof_decl[f.oneof_index].name)


def _field_ok(w: pb.FieldDescriptorProto, r: pb.FieldDescriptorProto) -> bool:
    if _kind(w) != _kind(r):
        return False
    if _kind(w) == "scalar" and not _same_scalar(w.type, r.type):
        return False
    if _kind(w) != "scalar" and w.type_name != r.type_name:
        return False
    if (w.label == F.LABEL_REQUIRED) != (r.label == F.LABEL_REQUIRED):
        return False
    repeated_changed = (w.label == F.LABEL_REPEATED) != (r.label == F.LABEL_REPEATED)
    return not (repeated_changed and w.type not in LENGTH_DELIMITED)


def _message_ok(w: pb.DescriptorProto, r: pb.DescriptorProto) -> bool:
    wf = {f.number: f for f in w.field}
    rf = {f.number: f for f in r.field}
    for number, f in wf.items():
        g = rf.get(number)
        if g is None:
            if f.label == F.LABEL_REQUIRED:
                return False  # REQUIRED_FIELD_REMOVED
            if _oneof(w, f) is not None:
                return False  # ONEOF_FIELD_REMOVED
            continue
        if not _field_ok(f, g):
            return False
        if _oneof(w, f) is not None and _oneof(w, f) != _oneof(r, g):
            return False  # ONEOF_FIELD_REMOVED
    if any(f.label == F.LABEL_REQUIRED and n not in wf for n, f in rf.items()):
        return False  # REQUIRED_FIELD_ADDED
    writer_oneofs = {o.name for o in w.oneof_decl}
    moved: dict[str, int] = {}
    for number, g in rf.items():
        name = _oneof(r, g)
        f = wf.get(number)
        if name is None or f is None or _oneof(w, f) is not None:
            continue
        if name in writer_oneofs:
            return False  # FIELD_MOVED_TO_EXISTING_ONEOF
        moved[name] = moved.get(name, 0) + 1
    return all(count <= 1 for count in moved.values())  # MULTIPLE_FIELDS_MOVED_TO_ONEOF


def can_read(reader: pb.FileDescriptorProto, writer: pb.FileDescriptorProto) -> bool:
    """Confluent's diff from `writer` to `reader` has only compatible changes."""
    if reader.package != writer.package:
        return False
    rm = _messages(reader)
    for name, w in _messages(writer).items():
        r = rm.get(name)
        if r is None or not _message_ok(w, r):
            return False
    return True
