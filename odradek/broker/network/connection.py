"""One client connection: read frames, answer them in order, write bytes and file regions.

A `BufferedProtocol` around the sans-IO frame decoder (odradek/wire/frames.py, which owns the
framing, the 64 KiB scratch buffer and the growing buffer of a large frame): the socket is read
straight into the decoder's buffers; this class is the I/O shell (muting, the memory pool, the
handling task, writes).

Memory is bounded as in Kafka's SocketServer / Selector:

- Muting: a connection stops reading from its socket once a complete request is in hand and
  starts again only after that request has been answered (Kafka mutes a channel while a request
  is in flight). Pipelined requests wait in the client's and the kernel's buffers; the frames
  already cut from one read of the scratch buffer (at most 64 KiB) are answered in order first.
  The pause is lazy: reading stops at the first read that comes while a request is in flight
  (one more buffer at most), so a request answered before its client sends again costs no
  pause_reading / resume_reading pair (two epoll_ctl a request at the acks=all rate rows).
- The memory pool (`queued.max.request.bytes`, memory_pool.py): a large frame's announced size is
  reserved before its body is received and released once it is answered; while the pool is out
  of memory the connection is muted and retried when memory comes back. Frames within the
  scratch buffer bypass the pool.

Requests on a connection are handled one at a time and answered in order. Responses are
`bytes | FileRegion` pieces: bytes are written, regions go out with sendfile (zero-copy),
except small ones (up to 64 KiB, 1 MiB per answer), which are read and written with the rest:
for a few records sendfile's round trips through the event loop cost more than the copy.
A region is sent with `os.sendfile` on the socket right away while the transport has nothing
buffered (as Kafka's FileRecords.writeTo, transferTo on the channel), and `loop.sendfile` only
takes over what the socket would not take yet: asyncio's own path pauses reading, waits for
writability and seeks the file around every call, ~5 epoll_ctl and two loop turns a region.
An answer with such a region is written under TCP_CORK (uncorked once written), so its header,
records and trailing tagged fields leave in full segments: the reader is woken once, not three
times (a follower's Fetch answer is a header, 1 MiB of records and three bytes of tags).
A protocol error closes only this connection, with a log line.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import logging
import os
import socket
import struct
import termios
import time
from collections import deque
from typing import TYPE_CHECKING

from odradek.broker.network.context import ANONYMOUS
from odradek.broker.network.dispatch import ProtocolError, dispatch
from odradek.broker.network.memory_pool import MemoryPool
from odradek.broker.network.socket_options import configure_accepted
from odradek.security.principal import NoMatchingRule, dn_from_certificate
from odradek.wire.frames import FrameDecoder, FrameError
from odradek.wire.regions import ChunkedPiece, FileRegion, Piece

if TYPE_CHECKING:
    from odradek.broker.network.listeners import ServedListener
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

_NATIVE_INT = struct.Struct("i")
COPY_CHUNK = 256 * 1024  # bytes of a file region read at once for a TLS connection
SMALL_REGION = 64 * 1024  # regions up to this size are copied rather than sent with sendfile
SMALL_REGIONS_COPIED = 1024 * 1024  # ... up to this much per answer, then sendfile again


class Connection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, listener: ServedListener | None = None) -> None:
        self.broker = broker
        self.listener = listener  # None: a connection made by a test, as PLAINTEXT
        self.listener_name = listener.name if listener is not None else "PLAINTEXT"
        self.principal = ANONYMOUS  # as Kafka's KafkaPrincipal: set by TLS or SASL
        # TLS: file regions are copied (copy_region), not sent with sendfile
        self.copies_regions = listener is not None and listener.uses_tls
        # SASL listeners: the exchange runs in front of dispatch until authenticated
        self.sasl_gate = (
            listener.sasl.gate(self) if listener is not None and listener.sasl is not None else None
        )
        self.max_frame = broker.config.get("socket.request.max.bytes")
        self.pool: MemoryPool = broker.memory_pool
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.last_active = time.monotonic()
        # when the request being handled was complete (metrics' queue time); each cut frame's
        # time waits beside it in _cut_times, since reading goes on while one is handled
        self.cut_at = 0.0
        self._cut_times: deque[float] = deque()
        self._decoder = FrameDecoder(
            self.max_frame, reserve=self._reserve, pending=self._waiting_in_kernel
        )
        self._frames = self._decoder.frames  # (payload, pool bytes it holds), cut, unanswered
        self._wakeup = asyncio.Event()
        self._gone = asyncio.Event()  # set once the connection is closed
        self._muted_in_flight = False  # a request is being handled: read no further
        self._muted_for_memory = False  # the memory pool is out: wait for a release
        self._reading_paused = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._throttle_s = 0.0  # quota throttle: stay muted this long after the answer
        # (name, version) from ApiVersions v3+ (KIP-511), as Kafka keeps it per channel
        self.client_software: tuple[str, str] | None = None

    # -- protocol callbacks -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        configure_accepted(transport, self.broker.config.get("socket.send.buffer.bytes"))
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        mapper = self.listener.principals if self.listener is not None else None
        if mapper is not None:
            # the TLS handshake is complete here: a verified client certificate names the
            # principal, through ssl.principal.mapping.rules (Kafka's SslPrincipalMapper)
            ssl_object = transport.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            if der:
                try:
                    self.principal = mapper.principal(dn_from_certificate(der))
                except (NoMatchingRule, ValueError) as exc:
                    log.info("closing connection from %s: client certificate: %s", self.peer, exc)
                    self.closed = True
                    transport.close()
                    return
        gate = self.broker.accept_gate  # fault injection: a broker cut off
        if gate is not None and not gate(transport):
            self.closed = True
            transport.close()
            return
        self.broker.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._process())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._muted_in_flight and not self._reading_paused:
            self._update_reading()  # bytes came while a request is in flight: stop reading now
        try:
            cut = self._decoder.buffer_updated(nbytes)
        except FrameError as exc:
            self._protocol_error(exc)
            return
        if cut:
            self._requests_in_hand()

    def _protocol_error(self, exc: Exception) -> None:
        log.warning("closing connection from %s: %s", self.peer, exc)
        self.close()

    def _requests_in_hand(self) -> None:
        """Complete requests: wake the handling task; reading stops until they are answered,
        lazily: only once more bytes arrive meanwhile (an answer written in the same loop turns
        as usual costs no pause and resume, two epoll_ctl and asyncio's bookkeeping)."""
        now, waiting = time.monotonic(), len(self._frames) - len(self._cut_times)
        self._cut_times.extend(itertools.repeat(now, waiting))
        self._muted_in_flight = True
        self._wakeup.set()

    def _reserve(self, size: int) -> bool:
        """The decoder's hook before a large frame's body: reserve it in the memory pool, or
        mute until memory is released (then the decoder retries)."""
        if self.pool.try_reserve(size):
            return True
        self._muted_for_memory = True
        self.pool.wait(self._memory_released)
        self._update_reading()
        return False

    def _waiting_in_kernel(self) -> int:
        """Bytes received by the kernel and not yet read (FIONREAD); 0 when unknown."""
        try:
            sock = self.transport.get_extra_info("socket") if self.transport else None
            if sock is None:
                return 0
            buf = fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4))
            waiting: int = _NATIVE_INT.unpack(buf)[0]
            return max(0, waiting)
        except (OSError, ValueError):
            return 0

    def _memory_released(self) -> None:
        if self.closed or not self._muted_for_memory:
            return
        self._muted_for_memory = False
        try:
            cut = self._decoder.retry()  # mutes again if the pool is still out
        except FrameError as exc:
            self._protocol_error(exc)
            return
        if cut:
            self._requests_in_hand()
        else:
            self._update_reading()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.closed:
            return
        mute = self._muted_in_flight or self._muted_for_memory
        if mute and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not mute and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def _release_all(self) -> None:
        """Give back the pool memory of frames that will never be handled."""
        pool = self.pool
        pool.cancel(self._memory_released)
        pool.release(self._decoder.release())
        frames = self._decoder.frames
        while frames:
            _, reserved = frames.popleft()
            pool.release(reserved)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._gone.set()
        self._release_all()
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
                payload, reserved = self._frames.popleft()
                self.cut_at = self._cut_times.popleft() if self._cut_times else time.monotonic()
                try:
                    gate = self.sasl_gate
                    handle, close = True, False
                    if gate is not None and not gate.passive:
                        pieces, handle, close = gate.handle(payload)
                    if handle:
                        pieces = await dispatch(self.broker, payload, self.peer, self)
                    del payload
                    if pieces and not self.closed:
                        await self.write(pieces)
                    if close:  # a failed or refused SASL exchange: answered, then closed
                        break
                finally:
                    self.pool.release(reserved)
                if self._throttle_s > 0:  # a quota was exceeded: as Kafka, mute for the throttle
                    delay, self._throttle_s = self._throttle_s, 0.0
                    try:
                        await asyncio.wait_for(self._gone.wait(), delay)
                    except TimeoutError:
                        pass
                if not self._frames:  # answered: read the next request
                    self._muted_in_flight = False
                    self._update_reading()
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except ConnectionError as exc:
            log.debug("connection from %s: %s", self.peer, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.close()

    def throttle(self, throttle_ms: int) -> None:
        """Read nothing more for `throttle_ms` after the current answer (Kafka's channel
        throttling for quota violations, KIP-219); the answer itself goes out at once."""
        self._throttle_s = max(self._throttle_s, throttle_ms / 1000)

    def _socket(self) -> socket.socket | None:
        """The transport's socket (asyncio's TransportSocket: fileno and setsockopt)."""
        transport = self.transport
        return transport.get_extra_info("socket") if transport is not None else None

    async def write(self, pieces: list[Piece]) -> None:
        sock = None
        if not self.copies_regions and any(
            isinstance(p, FileRegion) and p.length > SMALL_REGION for p in pieces
        ):
            sock = self._socket()
        if sock is None or not _set_cork(sock, 1):
            await self._write(pieces)
            return
        try:
            await self._write(pieces)
        finally:
            if not self.closed:
                _set_cork(sock, 0)  # what is held goes out now

    async def _write(self, pieces: list[Piece]) -> None:
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        copied = 0
        for piece in pieces:
            if isinstance(piece, FileRegion):
                if (
                    piece.length <= SMALL_REGION
                    and copied + piece.length <= SMALL_REGIONS_COPIED
                    and not self.copies_regions
                ):
                    # a small region is read and written with the rest: sendfile's own round
                    # trips through the event loop (drain, pause, sendfile, resume) cost more
                    # than the copy; follower fetches of a few records are the common case
                    data = os.pread(piece.file.fileno(), piece.length, piece.position)
                    if len(data) != piece.length:
                        raise ConnectionError(
                            f"read {len(data)} of {piece.length} bytes of a region"
                        )
                    copied += piece.length
                    pending.append(data)
                    continue
                if pending:
                    transport.write(b"".join(pending))
                    pending = []
                if transport.is_closing():
                    raise ConnectionError("connection closed while answering")
                if self.copies_regions:
                    await self._copy_region(piece)
                    continue
                sent = await self._sendfile(transport, piece)
                if sent != piece.length:
                    # the segment shrank under us (truncation); the frame cannot be completed
                    raise ConnectionError(f"sent {sent} of {piece.length} bytes of a region")
            elif isinstance(piece, ChunkedPiece):  # Fetch v0-3: converted while written
                if pending:
                    transport.write(b"".join(pending))
                    pending = []
                await self._write_chunks(piece)
            else:
                pending.append(piece)
        if pending:
            transport.write(b"".join(pending) if len(pending) > 1 else pending[0])
        if self._write_paused and not self.closed:
            self._drained = loop.create_future()
            await self._drained

    async def _sendfile(self, transport: asyncio.Transport, region: FileRegion) -> int:
        """Send `region` on the socket itself while it takes it, then through loop.sendfile;
        the bytes sent (fewer only when the file ended first)."""
        loop = asyncio.get_running_loop()
        sock = self._socket() if transport.get_write_buffer_size() == 0 else None
        if sock is None:
            return await loop.sendfile(transport, region.file, region.position, region.length)
        out, src = sock.fileno(), region.file.fileno()
        position, left = region.position, region.length
        try:
            while left:
                n = os.sendfile(out, src, position, left)
                if n == 0:
                    return region.length - left  # the file is shorter than the region
                position += n
                left -= n
        except (BlockingIOError, InterruptedError):
            pass
        except ConnectionError:
            raise
        except OSError as exc:
            if left != region.length:
                sent = region.length - left
                raise ConnectionError(f"sendfile failed after {sent} bytes: {exc}") from exc
            # a file sendfile cannot read: asyncio's path falls back to read and send
        if not left:
            return region.length
        return region.length - left + await loop.sendfile(transport, region.file, position, left)

    async def _write_chunks(self, piece: ChunkedPiece) -> None:
        """A piece made while written (down-converted records): a chunk at a time, waiting for
        the transport to drain and letting other connections run between chunks."""
        transport = self.transport
        assert transport is not None
        written = 0
        for chunk in piece.chunks():
            if self.closed or transport.is_closing():
                raise ConnectionError("connection closed while answering")
            transport.write(chunk)
            written += len(chunk)
            if self._write_paused:
                self._drained = asyncio.get_running_loop().create_future()
                await self._drained
            else:
                await asyncio.sleep(0)
        if written != piece.length:  # the frame cannot be completed
            raise ConnectionError(f"made {written} of {piece.length} bytes of a piece")

    async def _copy_region(self, region: FileRegion) -> None:
        """A file region through TLS, which sendfile cannot encrypt (Kafka copies too): read
        with pread at the region's own offsets (the segment's file position is the writer's)
        in chunks of COPY_CHUNK, waiting for the transport to drain between them, so one fetch
        holds at most a chunk plus the transport's write buffer."""
        transport = self.transport
        assert transport is not None
        fd = region.file.fileno()
        position, end = region.position, region.position + region.length
        while position < end:
            chunk = os.pread(fd, min(COPY_CHUNK, end - position), position)
            if not chunk:
                raise ConnectionError(f"region ended {end - position} bytes early")
            transport.write(chunk)
            position += len(chunk)
            if self._write_paused and not self.closed:
                self._drained = asyncio.get_running_loop().create_future()
                await self._drained
            if self.closed:
                raise ConnectionError("connection closed while answering")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wakeup.set()
            self._gone.set()
            if self.transport is not None:
                self.transport.close()
            self._release_all()
        self.broker.connection_closed(self)

    async def stop(self) -> None:
        """Close, and end the handling task: a request still being handled (a long-polling
        fetch, a join waiting for its group) is cancelled, so no task outlives the broker's
        loop ("Task was destroyed but it is pending!")."""
        self.close()
        task = self._task
        if task is None or task.done() or task is asyncio.current_task():
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass


def _set_cork(sock: socket.socket, on: int) -> bool:
    """TCP_CORK on or off (Linux); False where the socket or the system has none."""
    cork = getattr(socket, "TCP_CORK", None)
    if cork is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, cork, on)
    except OSError:
        return False
    return True
