"""A minimal blocking Kafka protocol client for tests that need exact requests.

It frames a request built from `odradek.wire.protocol` classes, sends it, and decodes the
answer; for protocol-level tests (fetch sessions, bad input) where real clients hide the detail.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.wire import protocol
from odradek.wire.header import read_uvarint


class RawClient:
    def __init__(self, bootstrap: str, client_id: str = "odradek-raw", timeout: float = 10.0):
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._corr = 0

    def send(self, request: Any, version: int) -> int:
        self._corr += 1
        request.with_header(correlation_id=self._corr, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        return self._corr

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def request(self, request: Any, version: int) -> Any:
        """Send and decode the matching response."""
        corr = self.send(request, version)
        payload = self.recv_frame()
        (got,) = struct.unpack_from(">i", payload)
        assert got == corr, f"correlation id {got} != {corr}"
        key = request.API_KEY
        cls = protocol.response_class(key)
        offset = 4
        if key != protocol.API_VERSIONS_KEY and cls.flexible_version_q(version):
            count, offset = read_uvarint(payload, offset)
            assert count == 0
        return cls.decode(payload[offset:], version=version)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
