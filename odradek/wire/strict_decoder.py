"""Strict request decoders: kafka-python's generated decoders, with Kafka's own read-side checks.

kafka-python 3.0.x compiles one flat decode function per message and version from Kafka's JSON
message definitions (`StructField.compiled_decode_from`). It is written for a client reading a
trusted broker, so it trusts lengths; a broker reading hostile clients must not. The decoders
built here come from the same code generator, with four of its emitters replaced while (and only
while) this module generates a request decoder, so kafka-python's own response decoding is
untouched. Each replacement is what Kafka's generated `*Data.read` methods do:

- **Null where the schema forbids it.** A negative array count, or a string/bytes length of -1,
  in a field whose `nullableVersions` do not include the version raises `NullFieldError`
  (Kafka: "non-nullable field X was serialized as null"), and so does a null element of an
  array of strings or bytes, nullable array or not (Kafka: "... element was serialized as
  null"). kafka-python hands `None` on to the handlers, which then fail on it.
- **Counts and lengths bounded by what is left.** An array count larger than the bytes left
  raises before any element is built (Kafka: "Tried to allocate a collection of size N, but
  there are only M bytes remaining", KAFKA-14063); a string or bytes field running past the end
  raises instead of yielding a short value.
- **Unsigned varints of at most 5 bytes**, as `ByteUtils.readUnsignedVarint`. kafka-python's
  loop is unbounded, and a long run of 0xff bytes makes it build a huge integer bit by bit,
  quadratic in the run (80 KB took 0.2 s, so a 1 MB run would freeze the event loop for ~30 s).
- **Tagged fields read in place**, each from exactly its declared size, then skipped by it (as
  Kafka does). kafka-python copies the rest of the message for every struct that carries a
  tagged field, quadratic in the number of such structs (a 1.7 MB request took 3 s).

One emitter is replaced for speed, not strictness: a `records` field (Produce's record batches)
is a memoryview of the request frame rather than a copy of it in bytes (at 1 GB/s of produce the
copy was 4.5% of the broker's CPU). The view lives as long as the request: the validator and the
log read it in place and write it with pwritev; nothing keeps it once the request is answered.

Everything these decoders raise is `DecodeError`, a `ValueError`: the caller closes the
connection, as Kafka does for a request it cannot parse.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs.tagged_fields import TaggedFields
from kafka.protocol.schemas.fields.codecs.types import UnsignedVarInt32
from kafka.protocol.schemas.fields.codegen import CodegenContext
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from odradek.wire.varint import read_uvarint

Decoder = Callable[[memoryview, int], tuple[Any, int]]

_VARIABLE = frozenset({"string", "bytes", "records"})


class DecodeError(ValueError):
    """A request body that cannot be decoded, or that breaks its schema."""


class NullFieldError(DecodeError):
    """A null (negative length or count) in a field the schema says is not nullable."""


# Set on the generating thread only: kafka-python may compile its own (client) decoders on
# other threads at the same time, and those must come out exactly as kafka-python writes them.
_state = threading.local()
_lock = threading.Lock()


def _strict() -> bool:
    return getattr(_state, "strict", False)


# -- replacement emitters ------------------------------------------------------------------------


def _emit_uvarint(ctx: CodegenContext, var: str, indent: str) -> None:
    b, shift = ctx.next_var("b"), ctx.next_var("sh")
    ctx.emit(indent, f"{var} = 0")
    ctx.emit(indent, f"{shift} = 0")
    ctx.emit(indent, "while True:")
    ctx.emit(indent, f"    {b} = data[pos]")
    ctx.emit(indent, "    pos += 1")
    ctx.emit(indent, f"    {var} |= ({b} & 0x7f) << {shift}")
    ctx.emit(indent, f"    if not ({b} & 0x80): break")
    ctx.emit(indent, f"    {shift} += 7")
    ctx.emit(
        indent, f"    if {shift} > 28: raise _DecodeError('unsigned varint longer than 5 bytes')"
    )


def _emit_simple(
    field: SimpleField,
    ctx: CodegenContext,
    var: str,
    indent: str,
    version: int,
    compact: bool,
    tagged: Any,
) -> None:
    if _strict() and field.type_str == "records":
        _emit_records(ctx, var, indent, compact)
    else:
        _ORIGINAL["simple"](
            field, ctx, var, indent, version=version, compact=compact, tagged=tagged
        )
    if not _strict() or field.type_str not in _VARIABLE:
        return
    ctx.emit(indent, f"if pos > len(data): raise _DecodeError('truncated field {field.name}')")
    if not field.nullable_for_version_q(version):
        ctx.emit(indent, f"if {var} is None: raise _NullField('null in field {field.name}')")


def _emit_length(ctx: CodegenContext, var: str, indent: str, compact: bool) -> None:
    """A bytes field's or an array's length into `var`: a uvarint of length + 1 when compact,
    else an int32 (-1: null either way)."""
    if compact:
        _emit_uvarint(ctx, var, indent)
        ctx.emit(indent, f"{var} -= 1")
    else:
        ctx.emit(indent, f'{var} = unpack_from(">i", data, pos)[0]')
        ctx.emit(indent, "pos += 4")


def _emit_records(ctx: CodegenContext, var: str, indent: str, compact: bool) -> None:
    """kafka-python's Bytes decoding without its `bytes(...)` copy: a slice of `data`, the
    frame's memoryview (the length check after it catches a slice cut short)."""
    ln = ctx.next_var("ln")
    _emit_length(ctx, ln, indent, compact)
    ctx.emit(indent, f"if {ln} < 0:")
    ctx.emit(indent, f"    {var} = None")
    ctx.emit(indent, "else:")
    ctx.emit(indent, f"    {var} = data[pos:pos+{ln}]")
    ctx.emit(indent, f"    pos += {ln}")


def _emit_array(
    field: ArrayField,
    ctx: CodegenContext,
    var: str,
    indent: str,
    version: int,
    compact: bool,
    tagged: Any,
) -> None:
    """Array of simple values or of structs: count, null/size checks, then the elements."""
    n = ctx.next_var("n")
    _emit_length(ctx, n, indent, compact)
    ctx.emit(indent, f"if {n} < 0:")
    if field.nullable_for_version_q(version):
        ctx.emit(indent, f"    {var} = None")
    else:
        ctx.emit(indent, f"    raise _NullField('null in array field {field.name}')")
    ctx.emit(indent, "else:")
    inner = indent + "    "
    ctx.emit(inner, f"if {n} > len(data) - pos:")
    ctx.emit(inner, f"    raise _DecodeError('array {field.name} of %d items in %d bytes'")
    ctx.emit(inner, f"                       % ({n}, len(data) - pos))")
    ctx.emit(inner, f"{var} = []")
    idx, item = ctx.next_var("idx"), ctx.next_var("item")
    ctx.emit(inner, f"for {idx} in range({n}):")
    field.array_of.emit_decode_from(
        ctx, item, inner + "    ", version=version, compact=compact, tagged=tagged
    )
    if not field.is_struct_array() and field.array_of.type_str in _VARIABLE:
        # an element is never null, whatever the array's nullableVersions say (kafka-python
        # gives the element field the array's)
        ctx.emit(inner, f"    if {item} is None:")
        ctx.emit(inner, f"        raise _NullField('null element in array field {field.name}')")
    ctx.emit(inner, f"    {var}.append({item})")


def _emit_tagged(
    field: StructField, ctx: CodegenContext, var: str, indent: str, version: int
) -> None:
    tf = ctx.next_var("tf")
    ctx.globs[tf] = field.tagged_fields(version)
    ctx.emit(indent, f"pos = _read_tags({tf}, data, pos, {version}, {var})")


def _uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    return read_uvarint(data, pos, None, 5, DecodeError)


def _read_tags(tf: TaggedFields, data: memoryview, pos: int, version: int, obj: Any) -> int:
    """Read a tagged-field section into `obj`; each field from exactly its declared size."""
    count, pos = _uvarint(data, pos)
    if count > len(data) - pos:
        raise DecodeError(f"{count} tagged fields in {len(data) - pos} bytes")
    known = tf._tags
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise DecodeError(f"tagged field {tag} of {size} bytes runs past the end")
        field = known.get(tag)
        if field is None:
            if obj.unknown_tags is None:
                obj.unknown_tags = {}
            obj.unknown_tags[f"_{tag}"] = bytes(data[pos:end])
        else:
            chunk = io.BytesIO(bytes(data[pos:end]))
            value = field.decode(chunk, version=version, compact=True, tagged=None)
            if value is None and not field.nullable_for_version_q(version):
                raise NullFieldError(f"null in tagged field {field.name}")
            if obj.tags is None:
                obj.tags = set()
            obj.tags.add(field.name)
            setattr(obj, field.name, value)
        pos = end
    return pos


# -- installing the replacements -----------------------------------------------------------------

_ORIGINAL: dict[str, Any] = {
    "uvarint": UnsignedVarInt32.__dict__["emit_decode_from"].__func__,
    "simple": SimpleField.emit_decode_from,
    "array": ArrayField.emit_decode_from,
    "struct_array": StructArrayField.emit_decode_from,
    "tagged": StructField._emit_tagged_decode,
}


def _uvarint_hook(cls: Any, ctx: CodegenContext, var_name: str, indent: str) -> None:
    if _strict():
        _emit_uvarint(ctx, var_name, indent)
    else:
        _ORIGINAL["uvarint"](cls, ctx, var_name, indent)


def _versioned_hook(original: str, emit: Callable[..., None]) -> Callable[..., None]:
    """A field's decode emitter: `emit` when building a strict decoder for one version, else
    kafka-python's own (`original`), so its client decoders come out unchanged."""

    def hook(
        self: Any,
        ctx: CodegenContext,
        var_name: str,
        indent: str,
        version: int | None = None,
        compact: bool = False,
        tagged: Any = False,
    ) -> None:
        if _strict() and version is not None:
            emit(self, ctx, var_name, indent, version, compact, tagged)
        else:
            _ORIGINAL[original](
                self, ctx, var_name, indent, version=version, compact=compact, tagged=tagged
            )

    return hook


def _tagged_hook(
    self: StructField, ctx: CodegenContext, var_name: str, indent: str, version: int
) -> None:
    if _strict():
        _emit_tagged(self, ctx, var_name, indent, version)
    else:
        _ORIGINAL["tagged"](self, ctx, var_name, indent, version)


UnsignedVarInt32.emit_decode_from = classmethod(_uvarint_hook)
SimpleField.emit_decode_from = _versioned_hook("simple", _emit_simple)
ArrayField.emit_decode_from = _versioned_hook("array", _emit_array)
StructArrayField.emit_decode_from = _versioned_hook("struct_array", _emit_array)
StructField._emit_tagged_decode = _tagged_hook


# -- building decoders ---------------------------------------------------------------------------


def build_decoder(message_class: Any, version: int) -> Decoder:
    """Compile a strict decoder `(data, pos) -> (message, end)` for one message version."""
    struct = message_class._struct
    flexible = bool(message_class.flexible_version_q(version))
    with _lock:
        _state.strict = True
        saved = struct._data_class
        struct._data_class = message_class
        try:
            ctx = CodegenContext()
            ctx.globs.update(
                _DecodeError=DecodeError, _NullField=NullFieldError, _read_tags=_read_tags
            )
            ctx.lines.append("def _decode(data, pos):")
            struct.emit_decode_from(
                ctx, "obj", "    ", version=version, compact=flexible, tagged=flexible
            )
            ctx.emit("    ", "return obj, pos")
            name = f"<odradek-strict-decode:{message_class.__name__}_v{version}>"
            exec(compile(ctx.source(), name, "exec"), ctx.globs)  # noqa: S102 - kafka-python's codegen
        finally:
            struct._data_class = saved
            _state.strict = False
    decoder: Decoder = ctx.globs["_decode"]
    return decoder
