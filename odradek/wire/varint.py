"""Unsigned base-128 varints (protobuf's): the one reader every part of `wire` uses, and the
writer of the hand-written response encoders (Fetch, Metadata).

Kafka writes them for flexible versions' lengths and tagged fields (KIP-482: unsigned varints of
at most 5 bytes) and, zigzag-encoded on top, for record fields (int32 varints of at most 5 bytes,
int64 varlongs of at most 10). Each byte holds 7 bits, least significant group first; a set top
bit means another byte follows.
"""

from __future__ import annotations

from odradek.wire.batch import Buffer


def read_uvarint(
    buf: Buffer,
    pos: int,
    end: int | None = None,
    max_bytes: int = 5,
    error: type[Exception] = ValueError,
) -> tuple[int, int]:
    """(value, next position) of the unsigned varint at `pos`, reading nothing at or past `end`
    (the buffer's end when None); `error` (the caller's protocol error) is raised for a varint
    cut short or longer than `max_bytes`."""
    if end is None:
        end = len(buf)
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise error("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise error(f"varint longer than {max_bytes} bytes")


def encode_uvarint(n: int) -> bytes:
    """The unsigned varint of `n` (>= 0)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
