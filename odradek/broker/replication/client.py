"""A Kafka protocol client for broker-to-broker requests (Kafka's NetworkClient, pared down).

One TCP connection, one request in flight, answered in order: what a replica fetcher needs.
Requests and responses are kafka-python's message classes through `odradek.wire.protocol`;
framing is Kafka's (int32 size, then the header and body).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import TYPE_CHECKING, Any

from odradek.wire import protocol

if TYPE_CHECKING:
    from odradek.broker.network.sasl import PeerSasl

_SIZE = struct.Struct(">i")
MAX_RESPONSE = 256 * 1024 * 1024


class PeerError(Exception):
    """The peer could not be reached, closed the connection, or sent garbage."""


class PeerClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        tls: ssl.SSLContext | None = None,
        sasl: PeerSasl | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.tls = tls  # the inter-broker listener is SSL or SASL_SSL
        self.sasl = sasl  # ... or SASL_PLAINTEXT / SASL_SSL: authenticate once connected
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self.local_address: tuple[str, int] | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    limit=1 << 20,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls is not None else None,
                )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise PeerError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        sock = self._writer.get_extra_info("sockname")
        self.local_address = (sock[0], sock[1]) if sock else None
        if self.sasl is not None:
            try:
                await self.sasl.authenticate(self, timeout)
            except PeerError:
                self.close()
                raise

    # request and response are kafka-python's untyped message objects
    async def request(self, api_key: int, version: int, request: Any, timeout: float) -> Any:
        """Send one request and return the decoded response (raises PeerError)."""
        if not self.connected:
            raise PeerError("not connected")
        assert self._reader is not None and self._writer is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        request.with_header(correlation_id=correlation, client_id=self.client_id)
        data = request.encode(version=version, header=True, framed=True)
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(bytes(data))
                await self._writer.drain()
                head = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if not 0 < size <= MAX_RESPONSE:
                    self.close()
                    raise PeerError(f"bad response size {size}")
                payload = await self._reader.readexactly(size)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            self.close()
            raise PeerError(f"{self.host}:{self.port}: {type(exc).__name__}: {exc}") from None
        try:
            response = protocol.response_class(api_key).decode(
                payload, version=version, header=True
            )
        except Exception as exc:  # kafka-python raises assorted errors on garbage
            self.close()
            raise PeerError(f"undecodable response: {exc}") from None
        if response.header is not None and response.header.correlation_id != correlation:
            self.close()
            raise PeerError("correlation id mismatch")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
        self.local_address = None
