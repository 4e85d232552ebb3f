"""A small HTTP/1.1 server on asyncio streams for the registry's JSON REST API: keep-alive,
Content-Length bodies (chunked request bodies are refused with 411), one request at a time per
connection. Bad requests get a 400 answer and a closed connection, never a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, unquote, urlsplit

from odradek.registry.errors import RegistryError

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
IDLE_TIMEOUT_S = 30.0  # a silent or half-sent request is dropped then, as Jetty's idle timeout
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Payload Too Large",
    401: "Unauthorized",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
}

Request = tuple[str, list[str], dict[str, str], object]  # method, path parts, query, JSON body
Handler = Callable[[Request], Awaitable[object]]
# method, target, lower-cased headers, raw body -> status and the answer's JSON bytes
Responder = Callable[[str, str, dict[str, str], bytes], Awaitable[tuple[int, bytes]]]


async def serve(
    respond: Responder, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
            except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                return
            except asyncio.LimitOverrunError:
                await _send(writer, 400, {"error_code": 400, "message": "header too large"}, False)
                return
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                await _send(writer, 400, {"error_code": 400, "message": "bad request line"}, False)
                return
            method, target, _version = parts
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                await _send(writer, 411, {"error_code": 411, "message": "length required"}, False)
                return
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                await _send(writer, 413, {"error_code": 413, "message": "bad body length"}, False)
                return
            raw = b""
            if length:
                raw = await asyncio.wait_for(reader.readexactly(length), IDLE_TIMEOUT_S)
            keep = headers.get("connection", "").lower() != "close"
            status, data = await respond(method, target, headers, raw)
            await _send_bytes(writer, status, data, keep)
            if not keep:
                return
    except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
        return
    finally:
        writer.close()


async def dispatch(handler: Handler, method: str, target: str, raw: bytes) -> tuple[int, object]:
    """Route one request to `handler`: its answer, or the error answer it raised."""
    url = urlsplit(target)
    path = [unquote(p) for p in url.path.split("/") if p]
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    try:
        body: object = json.loads(raw) if raw.strip() else None
    except ValueError:
        return 400, {"error_code": 400, "message": "Unexpected character: the body is not JSON"}
    try:
        return 200, await handler((method.upper(), path, query, body))
    except RegistryError as exc:
        return exc.status, {"error_code": exc.code, "message": exc.message}
    except Exception:
        log.exception("schema registry: %s %s failed", method, target)
        return 500, {"error_code": 50001, "message": "internal error"}


async def _send(writer: asyncio.StreamWriter, status: int, body: object, keep: bool) -> None:
    await _send_bytes(writer, status, json.dumps(body).encode(), keep)


async def _send_bytes(writer: asyncio.StreamWriter, status: int, data: bytes, keep: bool) -> None:
    challenge = 'WWW-Authenticate: Basic realm="SchemaRegistry"\r\n' if status == 401 else ""
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        "Content-Type: application/vnd.schemaregistry.v1+json\r\n"
        f"Content-Length: {len(data)}\r\n{challenge}"
        f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    writer.write(head.encode() + data)
    await writer.drain()
