"""One client connection: read frames, answer them in order, write bytes and file regions.

Requests on a connection are handled one at a time and answered in order, as Kafka mutes a
connection while a response is pending. Responses are `bytes | FileRegion` pieces: bytes are
written, regions go out with `loop.sendfile` (zero-copy). A protocol error closes only this
connection, with a log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from odradek.broker.dispatch import ProtocolError, dispatch
from odradek.wire.frames import FrameDecoder, FrameError
from odradek.wire.regions import FileRegion, Piece

log = logging.getLogger(__name__)

READ_SIZE = 256 * 1024


class Connection:
    def __init__(self, broker: Any, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.decoder = FrameDecoder(broker.config.get("socket.request.max.bytes"))
        self.closed = False
        self.last_active = time.monotonic()

    async def run(self) -> None:
        try:
            while not self.closed:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    break
                self.last_active = time.monotonic()
                for payload in self.decoder.feed(data):
                    pieces = await dispatch(self.broker, payload, self.peer, self)
                    if pieces:
                        await self.write(pieces)
        except (FrameError, ProtocolError) as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.close()

    async def write(self, pieces: list[Piece]) -> None:
        writer = self.writer
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        for piece in pieces:
            if isinstance(piece, FileRegion):
                if pending:
                    writer.write(b"".join(pending))
                    pending = []
                sent = await loop.sendfile(writer.transport, piece.file, piece.position,
                                           piece.length)
                if sent != piece.length:
                    # the segment shrank under us (truncation); the frame cannot be completed
                    raise ConnectionError(f"sent {sent} of {piece.length} bytes of a region")
            else:
                pending.append(piece)
        if pending:
            writer.write(b"".join(pending))
        await writer.drain()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()
        self.broker.connection_closed(self)
