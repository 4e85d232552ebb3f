"""Kafka's size-delimited framing, sans-IO.

Every request and response on a Kafka connection is a frame:

    offset 0  int32  size      number of bytes that follow (header + body)
    offset 4  bytes  payload   `size` bytes

`FrameDecoder` is fed whatever the socket produced and hands back complete payloads; it never
touches a socket (the h11 pattern), so it is tested with plain bytes.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(ValueError):
    """The peer broke the framing: a negative size or one over the configured maximum."""


class FrameDecoder:
    """Splits a byte stream into Kafka frames, enforcing `socket.request.max.bytes`."""

    __slots__ = ("_buf", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self._max_size = max_size

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame payload completed by them, in order."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        with memoryview(buf) as view:
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > self._max_size:
                    raise FrameError(f"frame size {size} outside 0..{self._max_size}")
                if end - pos - 4 < size:
                    break
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf)


def frame(payload_size: int) -> bytes:
    """The 4-byte size prefix for a payload of `payload_size` bytes."""
    return _SIZE.pack(payload_size)
