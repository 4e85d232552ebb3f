"""Forwards a request to the registry on the broker leading `_schemas`-0, as Confluent's
followers forward writes to their elected leader (RestService with the leader's identity): one
HTTP/1.1 exchange on a fresh connection, Content-Length bodies, the leader's answer passed back
unchanged. Failures become Confluent's 50003 (forwarding failed)."""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

from odradek.registry.errors import RegistryError

TIMEOUT_S = 30.0
PASSED_HEADERS = ("authorization", "content-type", "accept", "x-odradek-forwarded")


async def forward(
    url: str,
    method: str,
    target: str,
    headers: dict[str, str],
    raw: bytes,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """(status, body) of `method target` sent to the registry at `url`."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        return await asyncio.wait_for(
            _exchange(host, port, method, target, headers, raw, tls), TIMEOUT_S
        )
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
        raise RegistryError(
            500, 50003, f"Error while forwarding the request to the leader {url}: {exc}"
        ) from None


async def _exchange(
    host: str,
    port: int,
    method: str,
    target: str,
    headers: dict[str, str],
    raw: bytes,
    tls: ssl.SSLContext | None,
) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(host, port, ssl=tls)
    try:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        lines += [f"{k}: {headers[k]}" for k in PASSED_HEADERS if k in headers]
        lines.append(f"Content-Length: {len(raw)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + raw)
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ")[1])
        length = 0
        for line in head[1:]:
            name, _, val = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(val.strip())
        return status, await reader.readexactly(length)
    finally:
        writer.close()
