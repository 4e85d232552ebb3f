"""A minimal blocking Kafka protocol client for tests that need exact requests and bytes.

One TCP connection speaking Kafka frames, every read bounded by a deadline; requests are built
with `odradek.wire.protocol` classes. For protocol-level tests (fetch sessions, bad input,
durability) where real clients hide the detail. `fetch_partition` is the plain one-partition
Fetch they share (the compat tests' record reads, the Jepsen runner's batch headers).
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from typing import Any

from odradek.wire import protocol

_SIZE = struct.Struct(">i")
WAIT_S = 20.0
FETCH_VERSION = 11  # topic names and the KIP-392 fields; Kafka 2.3 and later
FETCH_MAX_BYTES = 1 << 20


class Closed(Exception):
    """The broker closed the connection."""


class RawClient:
    """One TCP connection speaking Kafka frames; every read is bounded by a deadline."""

    def __init__(self, bootstrap: str, timeout: float = WAIT_S) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.timeout = timeout
        self._correlation = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def next_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise Closed(str(exc)) from None

    def _recv_exact(self, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete frame within {self.timeout}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(n - len(buf))
            except TimeoutError:
                raise TimeoutError(f"no complete frame within {self.timeout}s") from None
            except ConnectionResetError:
                raise Closed("connection reset") from None
            if not chunk:
                raise Closed("connection closed")
            buf += chunk
        return bytes(buf)

    def read_frame(self, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        (size,) = _SIZE.unpack(self._recv_exact(4, deadline))
        return self._recv_exact(size, deadline)

    def outcome(self, timeout: float = 5.0) -> bytes | str:
        """After a bad request: a response payload, "closed", or "open" (nothing in time)."""
        try:
            return self.read_frame(timeout)
        except Closed:
            return "closed"
        except TimeoutError:
            return "open"

    def encode(self, req: Any, version: int, client_id: str = "odradek-raw") -> tuple[int, bytes]:
        cid = self.next_id()
        req.with_header(correlation_id=cid, client_id=client_id)
        return cid, req.encode(version=version, header=True, framed=True)

    def request(self, req: Any, version: int) -> Any:
        """Send a request, read its response, check the correlation id, decode the body."""
        cid, data = self.encode(req, version)
        self.send(data)
        payload = self.read_frame()
        assert _SIZE.unpack_from(payload)[0] == cid, "response to another request"
        return response_class(req).decode(payload, version=version, header=True)


def response_class(req: Any) -> Any:
    module = sys.modules[type(req).__module__]
    return getattr(module, type(req).__name__.removesuffix("Request") + "Response")


def fetch_partition(
    client: RawClient, topic: str, partition: int, offset: int, max_bytes: int = FETCH_MAX_BYTES
) -> tuple[int, int, bytes]:
    """(error code, high watermark, record bytes) of one Fetch of one partition from `offset`:
    a consumer's (replica id -1), read_uncommitted, outside any fetch session (KIP-227 epoch
    -1), answered at once (max wait 0, min bytes 0), `max_bytes` for the answer and the
    partition. The bytes are the batches as the log holds them, the last one possibly cut."""
    fetch = protocol.FetchRequest
    part = fetch.FetchTopic.FetchPartition(
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        log_start_offset=-1,
        partition_max_bytes=max_bytes,
    )
    req = fetch(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[fetch.FetchTopic(topic=topic, partitions=[part])],
        forgotten_topics_data=[],
        rack_id="",
    )
    (answer,) = client.request(req, FETCH_VERSION).responses[0].partitions
    return answer.error_code, answer.high_watermark, bytes(answer.records or b"")
