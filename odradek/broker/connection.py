"""One client connection: read frames, answer them in order, write bytes and file regions.

A `BufferedProtocol`: the socket is read straight into our buffers. Small frames are cut from a
64 KiB scratch buffer; a frame larger than that (a big produce request) gets a buffer of its
exact size, and the rest of it is received directly into that buffer, so a megabyte of records
is copied once from the kernel and not again before it reaches the log.

Requests on a connection are handled one at a time and answered in order, as Kafka mutes a
connection while a response is pending; reading pauses when many frames are queued. Responses
are `bytes | FileRegion` pieces: bytes are written, regions go out with `loop.sendfile`
(zero-copy). A protocol error closes only this connection, with a log line.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from typing import Any

from odradek.broker.dispatch import ProtocolError, dispatch
from odradek.wire.regions import FileRegion, Piece

log = logging.getLogger(__name__)

SCRATCH = 64 * 1024
MAX_QUEUED = 64  # frames read ahead of the one being handled before reading pauses
_SIZE = struct.Struct(">i")


class Connection(asyncio.BufferedProtocol):
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.max_frame = broker.config.get("socket.request.max.bytes")
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.last_active = time.monotonic()
        self._scratch = bytearray(SCRATCH)
        self._view = memoryview(self._scratch)
        self._filled = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._wakeup = asyncio.Event()
        self._reading_paused = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    # -- protocol callbacks -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        gate = self.broker.extensions.get("accept_gate")  # fault injection: a broker cut off
        if gate is not None and not gate(transport):
            self.closed = True
            transport.close()
            return
        self.broker.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._process())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                self._frames.append(self._big)
                self._big = None
                self._wake()
            return
        self._filled += nbytes
        try:
            self._cut_frames()
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()

    def _cut_frames(self) -> None:
        buf, view = self._scratch, self._view
        pos, end = 0, self._filled
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_frame:
                raise ProtocolError(f"frame size {size} outside 0..{self.max_frame}")
            if size + 4 > SCRATCH:
                # a large frame: give it its own buffer and receive the rest straight into it
                have = min(end - pos - 4, size)
                big = bytearray(size)
                big[:have] = view[pos + 4 : pos + 4 + have]
                pos += 4 + have
                if have == size:
                    self._frames.append(big)
                else:
                    self._big, self._big_filled = big, have
                    break
                continue
            if end - pos - 4 < size:
                break
            self._frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            rest = end - pos
            view[:rest] = view[pos:end]
            self._filled = rest
        if self._frames:
            self._wake()

    def _wake(self) -> None:
        self._wakeup.set()
        if len(self._frames) >= MAX_QUEUED and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wakeup.set()
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(ConnectionError("connection lost"))
        self.broker.connection_closed(self)

    # -- handling ---------------------------------------------------------------------------

    async def _process(self) -> None:
        try:
            while not self.closed:
                if not self._frames:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                payload = self._frames.popleft()
                if self._reading_paused and len(self._frames) < MAX_QUEUED // 2:
                    self._reading_paused = False
                    if self.transport is not None and not self.closed:
                        self.transport.resume_reading()
                pieces = await dispatch(self.broker, payload, self.peer, self)
                if pieces and not self.closed:
                    await self.write(pieces)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.close()

    async def write(self, pieces: list[Piece]) -> None:
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        for piece in pieces:
            if isinstance(piece, FileRegion):
                if pending:
                    transport.write(b"".join(pending))
                    pending = []
                sent = await loop.sendfile(transport, piece.file, piece.position, piece.length)
                if sent != piece.length:
                    # the segment shrank under us (truncation); the frame cannot be completed
                    raise ConnectionError(f"sent {sent} of {piece.length} bytes of a region")
            else:
                pending.append(piece)
        if pending:
            transport.write(b"".join(pending) if len(pending) > 1 else pending[0])
        if self._write_paused and not self.closed:
            self._drained = loop.create_future()
            await self._drained

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wakeup.set()
            if self.transport is not None:
                self.transport.close()
        self.broker.connection_closed(self)
