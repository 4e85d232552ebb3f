"""Request header parsing (RequestHeader v1 and v2), by hand because it runs on every request.

    offset 0  int16   request_api_key
    offset 2  int16   request_api_version
    offset 4  int32   correlation_id
    offset 8  int16   client_id length (-1 = null), then that many UTF-8 bytes
    v2 only:  tagged fields (unsigned varint count, then (tag, size, bytes) triples)

Header v2 keeps client_id as an int16-length string, not a compact string: clients rely on it.
Response headers: v0 is the correlation id alone, v1 adds an empty tagged-field section.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.wire import varint

_FIXED = struct.Struct(">hhih")
_CORR = struct.Struct(">i")


class HeaderError(ValueError):
    """A request header that cannot be parsed."""


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int = 0

    @property
    def size(self) -> int:
        return self.body_offset


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`; return (value, next position)."""
    return varint.read_uvarint(buf, pos, None, 5, HeaderError)


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Skip a tagged-field section; return the position after it."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise HeaderError("truncated tagged field")
    return pos


def parse_fixed(payload: bytes | bytearray) -> RequestHeader:
    """Parse the v1 part of a header (key, version, correlation id, client id)."""
    if len(payload) < 10:
        raise HeaderError(f"request header needs 10 bytes, got {len(payload)}")
    api_key, api_version, correlation_id, n = _FIXED.unpack_from(payload, 0)
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(payload):
            raise HeaderError("truncated client_id")
        client_id = payload[pos : pos + n].decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise HeaderError(f"bad client_id length {n}")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def finish_flexible(payload: bytes | bytearray, header: RequestHeader) -> None:
    """Skip the v2 header's tagged fields, moving `body_offset` past them."""
    header.body_offset = skip_tagged_fields(payload, header.body_offset)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    return _CORR.pack(correlation_id) + (b"\x00" if flexible else b"")
