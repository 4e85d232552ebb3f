"""A parser for .proto text (proto2 and proto3, as Confluent's registry accepts and as protoc
and the serializers write it) into a `FileDescriptorProto` whose named types are left as
written: protobuf's `DescriptorPool` resolves them (scoping rules, imports) and refuses what
does not resolve (`protobuf_schema.py`). Kept: syntax, package, imports, messages with their
fields (labels, scalar, named and map types, defaults, json_name, packed), nested messages and
enums, oneofs (and proto3 `optional`), reserved ranges and names, enums, services with their
methods. Options other than those are skipped (their values are read, not kept); extensions,
`extend` blocks and groups are refused."""

from __future__ import annotations

import re
from collections.abc import Callable

from google.protobuf import descriptor_pb2 as pb  # type: ignore[import-untyped]

F = pb.FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32,
    "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
    "uint32": F.TYPE_UINT32,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
}
LABELS = {"optional": F.LABEL_OPTIONAL, "required": F.LABEL_REQUIRED, "repeated": F.LABEL_REPEATED}
MAX_FIELD = 536870911
TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/
    |(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)(?![\w.]))
    |(?P<id>\.?[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)
    |(?P<sym>[{}\[\]()<>;=,:.-])""",
    re.S | re.X,
)


class ProtoSyntaxError(ValueError):
    pass


def tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if m is None:
            raise ProtoSyntaxError(f"unexpected character {text[pos]!r} at {pos}")
        pos = m.end()
        if m.lastgroup is not None:
            out.append(m.group())
    return out


class Parser:
    def __init__(self, text: str) -> None:
        self.t = tokens(text)
        self.i = 0

    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k] if self.i + k < len(self.t) else ""

    def next(self) -> str:
        if self.i >= len(self.t):
            raise ProtoSyntaxError("unexpected end of the schema")
        self.i += 1
        return self.t[self.i - 1]

    def expect(self, want: str) -> None:
        got = self.next()
        if got != want:
            raise ProtoSyntaxError(f"expected {want!r}, found {got!r}")

    def ident(self) -> str:
        tok = self.next()
        if not re.fullmatch(r"\.?[A-Za-z_][\w.]*", tok):
            raise ProtoSyntaxError(f"expected a name, found {tok!r}")
        return tok

    def string(self) -> str:
        tok = self.next()
        if tok[:1] not in "\"'":
            raise ProtoSyntaxError(f"expected a string, found {tok!r}")
        parts = [tok[1:-1]]
        while self.peek()[:1] in ("'", '"') and self.peek():
            parts.append(self.next()[1:-1])
        raw = "".join(parts)
        return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")

    def integer(self) -> int:
        tok = self.next()
        digits = tok.lstrip("+-")
        base = (
            16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and digits[0] == "0" else 10
        )
        try:
            return int(tok, base)
        except ValueError:
            raise ProtoSyntaxError(f"expected an integer, found {tok!r}") from None

    def constant(self) -> str:
        """An option's value, as text (a message literal `{...}` is skipped whole)."""
        tok = self.peek()
        if tok == "{":
            depth = 0
            while True:
                t = self.next()
                depth += t == "{"
                depth -= t == "}"
                if depth == 0:
                    return ""
        if tok[:1] in "\"'":
            return self.string()
        if tok == "-":
            self.next()
            return "-" + self.next()
        return self.next()

    def option_name(self) -> str:
        name = ""
        while self.peek() != "=":
            name += self.next()
        return name

    # -- file ---------------------------------------------------------------------------------

    def file(self, name: str) -> pb.FileDescriptorProto:
        fd = pb.FileDescriptorProto(name=name)
        syntax = "proto2"
        if self.peek() in ("syntax", "edition"):
            word = self.next()
            self.expect("=")
            syntax = self.string()
            self.expect(";")
            if word == "edition" or syntax not in ("proto2", "proto3"):
                raise ProtoSyntaxError(f"unsupported syntax {syntax!r}")
        if syntax == "proto3":
            fd.syntax = "proto3"
        self.proto3 = syntax == "proto3"
        while self.i < len(self.t):
            tok = self.next()
            if tok == ";":
                continue
            if tok == "package":
                fd.package = self.ident().lstrip(".")
                self.expect(";")
            elif tok == "import":
                kind = self.next() if self.peek() in ("public", "weak") else ""
                if kind == "public":
                    fd.public_dependency.append(len(fd.dependency))
                elif kind == "weak":
                    fd.weak_dependency.append(len(fd.dependency))
                fd.dependency.append(self.string())
                self.expect(";")
            elif tok == "option":
                self.option(None)
            elif tok == "message":
                self.message(fd.message_type.add())
            elif tok == "enum":
                self.enum(fd.enum_type.add())
            elif tok == "service":
                self.service(fd.service.add())
            else:
                raise ProtoSyntaxError(f"unexpected {tok!r} at the top level")
        return fd

    def option(self, field: pb.FieldDescriptorProto | None) -> None:
        self.option_name()
        self.expect("=")
        self.constant()
        self.expect(";")

    def message(self, msg: pb.DescriptorProto) -> None:
        msg.name = self.ident()
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok == ";":
                continue
            if tok == "message":
                self.message(msg.nested_type.add())
            elif tok == "enum":
                self.enum(msg.enum_type.add())
            elif tok == "option":
                self.option(None)
            elif tok == "oneof":
                self.oneof(msg)
            elif tok == "reserved":
                self.reserved(msg.reserved_range.add, msg.reserved_name, end_exclusive=True)
            elif tok in ("extensions", "extend", "group"):
                raise ProtoSyntaxError(f"{tok} is not supported")
            elif tok == "map":
                self.map_field(msg)
            else:
                self.i -= 1
                self.field(msg, msg.field.add(), None)

    def field(self, msg: pb.DescriptorProto, f: pb.FieldDescriptorProto, oneof: int | None) -> None:
        label = LABELS.get(self.peek())
        if label is not None and oneof is None:
            self.next()
        if self.peek() == "group":
            raise ProtoSyntaxError("groups are not supported")
        if self.peek() == "map" and self.peek(1) == "<":
            self.next()
            self.map_field(msg, f)
            return
        typ = self.ident()
        f.name = self.ident()
        self.expect("=")
        f.number = self.integer()
        f.label = label if label is not None else F.LABEL_OPTIONAL
        if typ in SCALARS:
            f.type = SCALARS[typ]
        else:
            f.type_name = typ
        if oneof is not None:
            f.oneof_index = oneof
        elif self.proto3 and label == F.LABEL_OPTIONAL:
            f.proto3_optional = True
            f.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{f.name}")
        self.field_options(f)
        self.expect(";")

    def field_options(self, f: pb.FieldDescriptorProto) -> None:
        if self.peek() != "[":
            return
        self.next()
        while True:
            name = self.option_name()
            self.expect("=")
            value = self.constant()
            if name == "default":
                f.default_value = value
            elif name == "json_name":
                f.json_name = value
            elif name == "packed":
                f.options.packed = value == "true"
            elif name == "deprecated":
                f.options.deprecated = value == "true"
            if self.next() == "]":
                return

    def map_field(self, msg: pb.DescriptorProto, f: pb.FieldDescriptorProto | None = None) -> None:
        self.expect("<")
        key = self.ident()
        self.expect(",")
        val = self.ident()
        self.expect(">")
        f = f if f is not None else msg.field.add()
        f.name = self.ident()
        self.expect("=")
        f.number = self.integer()
        f.label = F.LABEL_REPEATED
        entry = msg.nested_type.add(name="".join(p.title() for p in f.name.split("_")) + "Entry")
        entry.options.map_entry = True
        for name, number, typ in (("key", 1, key), ("value", 2, val)):
            ef = entry.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
            if typ in SCALARS:
                ef.type = SCALARS[typ]
            else:
                ef.type_name = typ
        f.type_name = entry.name
        self.field_options(f)
        self.expect(";")

    def oneof(self, msg: pb.DescriptorProto) -> None:
        index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=self.ident())
        self.expect("{")
        while (tok := self.peek()) != "}":
            if tok == "option":
                self.next()
                self.option(None)
            elif tok == ";":
                self.next()
            else:
                self.field(msg, msg.field.add(), index)
        self.next()

    def reserved(
        self, add_range: Callable[..., object], names: list[str], end_exclusive: bool
    ) -> None:
        while True:
            if self.peek()[:1] in "\"'":
                names.append(self.string())
            else:
                start = self.integer()
                end = start
                if self.peek() == "to":
                    self.next()
                    end = MAX_FIELD if self.peek() == "max" and self.next() else self.integer()
                add_range(start=start, end=end + 1 if end_exclusive else end)
            if self.next() == ";":
                return

    def enum(self, en: pb.EnumDescriptorProto) -> None:
        en.name = self.ident()
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok == ";":
                continue
            if tok == "option":
                name = self.option_name()
                self.expect("=")
                value = self.constant()
                self.expect(";")
                if name == "allow_alias":
                    en.options.allow_alias = value == "true"
            elif tok == "reserved":
                self.reserved(en.reserved_range.add, en.reserved_name, end_exclusive=False)
            else:
                v = en.value.add(name=tok)
                self.expect("=")
                v.number = self.integer()
                if self.peek() == "[":
                    self.next()
                    while True:
                        self.option_name()
                        self.expect("=")
                        self.constant()
                        if self.next() == "]":
                            break
                self.expect(";")

    def service(self, svc: pb.ServiceDescriptorProto) -> None:
        svc.name = self.ident()
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok == ";":
                continue
            if tok == "option":
                self.option(None)
                continue
            if tok != "rpc":
                raise ProtoSyntaxError(f"unexpected {tok!r} in a service")
            m = svc.method.add(name=self.ident())
            self.expect("(")
            if self.peek() == "stream":
                self.next()
                m.client_streaming = True
            m.input_type = self.ident()
            self.expect(")")
            self.expect("returns")
            self.expect("(")
            if self.peek() == "stream":
                self.next()
                m.server_streaming = True
            m.output_type = self.ident()
            self.expect(")")
            if self.peek() == "{":
                self.next()
                while (t := self.next()) != "}":
                    if t == "option":
                        self.option(None)
            else:
                self.expect(";")


def parse(text: str, name: str) -> pb.FileDescriptorProto:
    """The file's descriptor, named types unresolved; ProtoSyntaxError for bad text."""
    try:
        return Parser(text).file(name)
    except ProtoSyntaxError:
        raise
    except (IndexError, ValueError, TypeError) as exc:  # e.g. a field number out of range
        raise ProtoSyntaxError(str(exc) or "unexpected end of the schema") from None
