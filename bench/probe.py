"""A raw ApiVersions v0 round trip (key 18), to time how soon a new broker answers.

Request, header v1 then an empty v0 body:

    offset  size  field
    0       4     size            int32, bytes that follow
    4       2     api_key         int16 = 18 (ApiVersions)
    6       2     api_version     int16 = 0
    8       4     correlation_id  int32
    12      2     client_id len   int16
    14      n     client_id       bytes

Response, header v0 (always, even for later ApiVersions versions) then the v0 body:

    0       4     size            int32
    4       4     correlation_id  int32
    8       2     error_code      int16
    10      4     api_keys count  int32
    14      6*n   (api_key int16, min_version int16, max_version int16) per key
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

API_VERSIONS_KEY = 18
_CLIENT_ID = b"odradek-bench"
_HEADER = struct.Struct(">ihhih")
_RESPONSE_HEAD = struct.Struct(">ihi")
RETRY_PAUSE_S = 0.001


class ProbeError(RuntimeError):
    """The broker did not answer ApiVersions in time, or answered something else."""


def api_versions_request(correlation_id: int) -> bytes:
    body_len = _HEADER.size - 4 + len(_CLIENT_ID)
    head = _HEADER.pack(body_len, API_VERSIONS_KEY, 0, correlation_id, len(_CLIENT_ID))
    return head + _CLIENT_ID


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def api_versions(host: str, port: int, timeout: float = 2.0, correlation_id: int = 1) -> int:
    """One ApiVersions v0 round trip; returns how many API keys the broker advertises.

    Raises OSError when the broker cannot be reached and ProbeError when it answers wrongly.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(api_versions_request(correlation_id))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    corr, error_code, count = _RESPONSE_HEAD.unpack_from(payload)
    if corr != correlation_id:
        raise ProbeError(f"correlation id {corr}, expected {correlation_id}")
    if error_code != 0:
        raise ProbeError(f"ApiVersions v0 error_code {error_code}")
    return count


def wait_for_api_versions(
    host: str,
    port: int,
    *,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
) -> float:
    """Poll-connect and send ApiVersions v0 until answered; returns the time it answered
    (time.perf_counter()). Gives up after `timeout` seconds or as soon as `alive()` is False."""
    deadline = time.perf_counter() + timeout
    attempt = 0
    while True:
        attempt += 1
        try:
            api_versions(
                host,
                port,
                timeout=max(0.05, deadline - time.perf_counter()),
                correlation_id=attempt,
            )
            return time.perf_counter()
        except (OSError, ProbeError) as exc:
            if not alive():
                raise ProbeError("broker process exited before answering ApiVersions") from exc
            if time.perf_counter() >= deadline:
                raise ProbeError(
                    f"no ApiVersions answer from {host}:{port} within {timeout:.0f} s "
                    f"({attempt} attempts; last: {exc})"
                ) from exc
        time.sleep(RETRY_PAUSE_S)
