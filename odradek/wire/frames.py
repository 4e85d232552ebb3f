"""Kafka's size-delimited framing, sans-IO: the one implementation the broker's connections use.

Every request and response on a Kafka connection is a frame:

    offset 0  int32  size      number of bytes that follow (header + body)
    offset 4  bytes  payload   `size` bytes

`FrameDecoder` never touches a socket (the h11 pattern), so it is tested with plain bytes. Its
buffer API fits `asyncio.BufferedProtocol`: `get_buffer()` gives the memory the next read lands
in, `buffer_updated(n)` says how much arrived and cuts the frames completed by it into `frames`,
a deque of (payload, reserved bytes). `feed(data)` is the same for callers holding bytes.

Small frames are cut from a 64 KiB scratch buffer, taken from a process-wide spare list when
bytes arrive and given back as soon as no partial frame is left in it: an idle connection holds
none (Kafka's NetworkReceive allocates per frame too), where a buffer of its own cost each
connection 64 KiB of RSS. A frame larger than that (a big produce request) gets its own
buffer and the rest of it is received straight into that buffer, so a
megabyte of records is copied once from the kernel and not again before it reaches the log. That
buffer grows as bytes arrive (at most `GROWTH` times what has arrived, then the exact size),
never to the announced size up front: a 4-byte prefix claiming 100 MB costs nothing until the
bytes come (KAFKA-14063). Those buffers are allocated and grown without zero-filling
(`_uninitialized`, `_resize`: CPython's C API through ctypes; plain `bytearray(n)` elsewhere):
at 1 GB/s of produce the zeroing was 4% of the broker's CPU, and every byte is overwritten by
the socket before a frame is handed out (a frame is complete only once its buffer is full).

Two hooks belong to the caller: `reserve(size)` is asked before a large frame's body is received
(the broker's memory pool, `queued.max.request.bytes`); when it refuses, cutting stops with the
bytes kept and `waiting_for_memory` set, and the caller calls `retry()` once memory is back. A
large frame's payload is handed out with its reserved size, for the caller to give back once the
frame is answered. `pending()` tells how many bytes are known to be waiting (the kernel's
FIONREAD on a socket), so a large frame's first buffer can be sized for them.
"""

from __future__ import annotations

import ctypes
import struct
from collections import deque
from collections.abc import Callable

_SIZE = struct.Struct(">i")

SCRATCH = 64 * 1024
SPARE_SCRATCH = 32  # scratch buffers kept for reuse once given back (2 MiB)
GROWTH = 4  # a large frame's buffer is at most this many times the bytes received (then exact)

Payload = bytes | bytearray


def _python_resize(buf: bytearray, size: int) -> None:
    buf += bytes(size - len(buf))


def _c_api() -> tuple[Callable[[int], bytearray], Callable[[bytearray, int], None]]:
    """Allocate and grow a bytearray without zero-filling it: CPython's
    PyByteArray_FromStringAndSize(NULL, n) and PyByteArray_Resize leave the new bytes as they
    are (`bytearray(n)` memsets them). Falls back to the zero-filling calls elsewhere."""
    try:
        new = ctypes.pythonapi.PyByteArray_FromStringAndSize
        resize = ctypes.pythonapi.PyByteArray_Resize
    except AttributeError:  # not CPython
        return bytearray, _python_resize
    new.restype, new.argtypes = ctypes.py_object, (ctypes.c_char_p, ctypes.c_ssize_t)
    # PyDLL functions raise the Python error they set (BufferError while a view is exported)
    resize.restype, resize.argtypes = ctypes.c_int, (ctypes.py_object, ctypes.c_ssize_t)

    def uninitialized(size: int) -> bytearray:
        buf: bytearray = new(None, size)
        return buf

    def grow(buf: bytearray, size: int) -> None:
        resize(buf, size)

    return uninitialized, grow


_uninitialized, _resize = _c_api()


_spare: list[tuple[bytearray, memoryview]] = []  # scratch buffers not in use, with their views


def _new_scratch() -> tuple[bytearray, memoryview]:
    buf = _uninitialized(SCRATCH)  # never read before the socket has written it
    return buf, memoryview(buf)


class FrameError(ValueError):
    """The peer broke the framing: a negative size or one over the configured maximum."""


def _always(_size: int) -> bool:
    return True


def _nothing_pending() -> int:
    return 0


class FrameDecoder:
    """Splits a byte stream into Kafka frames, enforcing `socket.request.max.bytes`."""

    __slots__ = (
        "frames",
        "waiting_for_memory",
        "_max_size",
        "_reserve",
        "_pending",
        "_scratch",
        "_view",
        "_filled",
        "_big",
        "_big_size",
        "_big_filled",
    )

    def __init__(
        self,
        max_size: int,
        *,
        reserve: Callable[[int], bool] = _always,
        pending: Callable[[], int] = _nothing_pending,
    ) -> None:
        self._max_size = max_size
        self._reserve = reserve
        self._pending = pending
        self.frames: deque[tuple[Payload, int]] = deque()  # (payload, bytes reserved for it)
        self.waiting_for_memory = False  # `reserve` refused a large frame: call retry()
        # the scratch buffer and its view while bytes are in it or arriving, else None
        self._scratch: bytearray | None = None
        self._view: memoryview | None = None
        self._filled = 0
        self._big: bytearray | None = None  # the large frame being received
        self._big_size = 0  # its announced (and reserved) size
        self._big_filled = 0

    # -- the BufferedProtocol side ----------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Where the next bytes go: the large frame's buffer (grown if full), else the scratch."""
        big = self._big
        if big is not None:
            filled = self._big_filled
            if filled == len(big):  # full but not complete: grow with what has arrived
                _resize(big, self._capacity(filled, self._big_size))
            return memoryview(big)[filled:]
        if self._view is None:
            self._scratch, self._view = _spare.pop() if _spare else _new_scratch()
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> int:
        """`nbytes` were written into the last `get_buffer()`; returns how many frames this
        completed (appended to `frames`). Raises FrameError on a bad size prefix."""
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                self.frames.append((big, self._big_size))
                self._big = None
                return 1
            return 0
        self._filled += nbytes
        return self._cut()

    def retry(self) -> int:
        """Cut again after `reserve` refused (memory came back); returns frames completed."""
        self.waiting_for_memory = False
        return self._cut()

    def feed(self, data: bytes | bytearray | memoryview) -> list[Payload]:
        """Add received bytes; return (and take out of `frames`) every payload completed."""
        src = memoryview(data)
        while src:
            buf = self.get_buffer()
            n = min(len(buf), len(src))
            if n == 0:  # only when waiting for memory: the scratch is full
                break
            buf[:n] = src[:n]
            buf.release()  # a large frame's buffer cannot grow while exported
            src = src[n:]
            self.buffer_updated(n)
        out = [payload for payload, _ in self.frames]
        self.frames.clear()
        return out

    def release(self) -> int:
        """Drop the large frame being received and any partial frame (the connection is gone);
        returns the bytes reserved for the large frame."""
        reserved = self._big_size if self._big is not None else 0
        self._filled = 0
        self._drop_scratch()
        self._big = None
        self._big_size = self._big_filled = 0
        return reserved

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return self._filled + (self._big_filled if self._big is not None else 0)

    # -- cutting ----------------------------------------------------------------------------

    def _drop_scratch(self) -> None:
        scratch, view = self._scratch, self._view
        if scratch is not None and view is not None:
            self._scratch = self._view = None
            if len(_spare) < SPARE_SCRATCH:
                _spare.append((scratch, view))

    def _cut(self) -> int:
        buf, view, frames = self._scratch, self._view, self.frames
        pos, end = 0, self._filled
        if buf is None or view is None:
            return 0
        count = 0
        try:
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > self._max_size:
                    raise FrameError(f"frame size {size} outside 0..{self._max_size}")
                if size + 4 > SCRATCH:
                    # a large frame: reserve its size, then receive it into its own buffer,
                    # which starts at a bounded size and grows as the bytes arrive
                    if not self._reserve(size):
                        self.waiting_for_memory = True
                        break
                    have = min(end - pos - 4, size)
                    big = _uninitialized(max(have, self._capacity(have, size)))
                    big[:have] = view[pos + 4 : pos + 4 + have]
                    pos += 4 + have
                    if have == size:
                        frames.append((big, size))
                        count += 1
                        continue
                    self._big, self._big_size, self._big_filled = big, size, have
                    break
                if end - pos - 4 < size:
                    break
                frames.append((bytes(view[pos + 4 : pos + 4 + size]), 0))
                count += 1
                pos += 4 + size
        finally:
            if pos:
                rest = end - pos
                view[:rest] = view[pos:end]
                self._filled = rest
            if not self._filled:  # nothing partial left: the scratch goes back to the spares
                self._scratch = self._view = None
                if len(_spare) < SPARE_SCRATCH:
                    _spare.append((buf, view))
        return count

    def _capacity(self, have: int, size: int) -> int:
        """A large frame's buffer size: what has arrived (in hand and pending), times GROWTH, at
        least SCRATCH; the exact size once that reaches half of it."""
        target = max(SCRATCH, have * GROWTH, have + self._pending())
        return size if target * 2 >= size else target


def frame(payload_size: int) -> bytes:
    """The 4-byte size prefix for a payload of `payload_size` bytes."""
    return _SIZE.pack(payload_size)
