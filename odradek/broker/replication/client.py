"""A Kafka protocol client for broker-to-broker requests (Kafka's NetworkClient, pared down).

One TCP connection, one request in flight, answered in order: what a replica fetcher needs.
Requests are kafka-python's message classes through `odradek.wire.protocol`; framing is Kafka's
(int32 size, then the header and body). `request` decodes the response with kafka-python;
`request_raw` hands back the response frame itself (header and body), for a caller that parses
it in place: the replica fetcher, whose answers are mostly record batches.

Reading is a `BufferedProtocol`: the socket is read into a 64 KiB scratch buffer, and a frame
larger than what is left there gets a buffer of its own, which the socket is then read into
directly, so a fetch response's records are copied once, from the kernel, and never again.
A receive buffer size given (replica.socket.receive.buffer.bytes for a fetcher) is set on the
socket before it connects, as Kafka's Selector does (network/socket_options.py).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.network.socket_options import USE_DEFAULT_BUFFER_SIZE, connect_socket
from odradek.wire import protocol

if TYPE_CHECKING:
    from odradek.broker.network.sasl import PeerSasl

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
MAX_RESPONSE = 256 * 1024 * 1024
SCRATCH = 64 * 1024


class PeerError(Exception):
    """The peer could not be reached, closed the connection, or sent garbage."""


class _Framer(asyncio.BufferedProtocol):
    """Cuts the response frames out of the byte stream (sans waiting: `PeerClient` waits)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(SCRATCH)
        self._start = 0  # unconsumed bytes of the scratch buffer: [_start, _end)
        self._end = 0
        self._body: bytearray | None = None  # a large frame being read in place
        self._body_got = 0
        self.frames: collections.deque[bytes | bytearray] = collections.deque()
        self.error: PeerError | None = None
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is not None:
            return memoryview(self._body)[self._body_got :]
        return memoryview(self._scratch)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        body = self._body
        if body is not None:
            self._body_got += nbytes
            if self._body_got == len(body):
                self._body = None
                self._deliver(body)
            return
        self._end += nbytes
        self._cut()

    def _cut(self) -> None:
        buf = self._scratch
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if not 0 < size <= MAX_RESPONSE:
                self._fail(PeerError(f"bad response size {size}"))
                return
            have = end - start - 4
            if have >= size:
                self._deliver(bytes(buf[start + 4 : start + 4 + size]))
                start += 4 + size
                continue
            if size + 4 > SCRATCH - start:
                # read the rest of it straight into its own buffer
                body = bytearray(size)
                body[:have] = buf[start + 4 : end]
                self._body, self._body_got = body, have
                start = end = 0
            break
        if start == end:
            start = end = 0
        elif start > 0 and end == SCRATCH:
            buf[: end - start] = buf[start:end]
            start, end = 0, end - start
        self._start, self._end = start, end

    def _deliver(self, frame: bytes | bytearray) -> None:
        self.frames.append(frame)
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, error: PeerError) -> None:
        if self.error is None:
            self.error = error
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def eof_received(self) -> bool:
        self._fail(PeerError("connection closed by the peer"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(PeerError(f"connection lost: {exc}" if exc else "connection closed"))


class PeerClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        tls: ssl.SSLContext | None = None,
        sasl: PeerSasl | None = None,
        receive_buffer: int = USE_DEFAULT_BUFFER_SIZE,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.tls = tls  # the inter-broker listener is SSL or SASL_SSL
        self.sasl = sasl  # ... or SASL_PLAINTEXT / SASL_SSL: authenticate once connected
        self.receive_buffer = receive_buffer  # SO_RCVBUF before connect; -1: the OS default
        self._framer: _Framer | None = None
        self._correlation = 0
        self.local_address: tuple[str, int] | None = None

    @property
    def connected(self) -> bool:
        f = self._framer
        return (
            f is not None
            and f.error is None
            and f.transport is not None
            and not f.transport.is_closing()
        )

    @property
    def transport(self) -> asyncio.Transport | None:
        """The connection's transport (its socket: get_extra_info("socket")); None before
        connect."""
        return self._framer.transport if self._framer is not None else None

    async def connect(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                hostname = self.host if self.tls is not None else None
                if self.receive_buffer == USE_DEFAULT_BUFFER_SIZE:
                    transport, framer = await loop.create_connection(
                        _Framer, self.host, self.port, ssl=self.tls, server_hostname=hostname
                    )
                else:
                    sock = await connect_socket(self.host, self.port, self.receive_buffer)
                    try:
                        transport, framer = await loop.create_connection(
                            _Framer, sock=sock, ssl=self.tls, server_hostname=hostname
                        )
                    except BaseException:
                        sock.close()
                        raise
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise PeerError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        self._framer = framer
        sock = transport.get_extra_info("sockname")
        self.local_address = (sock[0], sock[1]) if sock else None
        if self.sasl is not None:
            try:
                await self.sasl.authenticate(self, timeout)
            except PeerError:
                self.close()
                raise

    async def request_raw(
        self, api_key: int, version: int, request: protocol.Message, timeout: float
    ) -> bytes | bytearray:
        """Send one request and return its response frame: header and body, as received
        (raises PeerError; the caller checks the header it parses)."""

        def encode(correlation: int) -> bytes:
            request.with_header(correlation_id=correlation, client_id=self.client_id)
            return bytes(request.encode(version=version, header=True, framed=True))

        return await self.request_encoded(encode, timeout)

    async def request_encoded(
        self, encode: Callable[[int], bytes], timeout: float
    ) -> bytes | bytearray:
        """`request_raw` for a request the caller frames itself: `encode(correlation_id)` gives
        the framed request (the replica fetcher's hand-encoded Fetch)."""
        framer = self._framer
        if not self.connected or framer is None:
            raise PeerError("not connected")
        assert framer.transport is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        framer.transport.write(encode(correlation))
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while not framer.frames:
                    if framer.error is not None:
                        raise framer.error
                    framer.waiter = loop.create_future()
                    await framer.waiter
        except TimeoutError:
            self.close()
            raise PeerError(f"{self.host}:{self.port}: no answer within {timeout:.0f} s") from None
        except PeerError as exc:
            self.close()
            raise PeerError(f"{self.host}:{self.port}: {exc}") from None
        finally:
            framer.waiter = None
        payload = framer.frames.popleft()
        if len(payload) < 4 or _CORRELATION.unpack_from(payload, 0)[0] != correlation:
            self.close()
            raise PeerError("correlation id mismatch")
        return payload

    # request and response are kafka-python's untyped message objects
    async def request(
        self, api_key: int, version: int, request: protocol.Message, timeout: float
    ) -> protocol.Message:
        """Send one request and return the decoded response (raises PeerError)."""
        payload = await self.request_raw(api_key, version, request, timeout)
        try:
            return protocol.response_class(api_key).decode(
                bytes(payload), version=version, header=True
            )
        except Exception as exc:  # kafka-python raises assorted errors on garbage
            self.close()
            raise PeerError(f"undecodable response: {exc}") from None

    def close(self) -> None:
        framer, self._framer = self._framer, None
        if framer is not None and framer.transport is not None:
            framer.transport.close()
        self.local_address = None
