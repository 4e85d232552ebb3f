"""The registry as a broker service: listens on the first address of
`schema.registry.listeners` (http://host:port; port 0 picks a free one, reported in `port` and
`url`, which the broker registers so the others can forward to it) and loads `_schemas`; requests
wait for the load.

In a cluster every broker serves the API; the writer is the broker leading `_schemas`-0 (the
partition leader stands in for Confluent's group-elected leader: the controller elects exactly
one, among the replicas that hold every acknowledged write). The others forward writes to the
writer's URL and answer reads from their own replica, forwarding a read that finds nothing
(40401/40402/40403) so that what a client just registered through any broker is found through
any other."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

from odradek.registry import http
from odradek.registry.api import RegistryApi
from odradek.registry.errors import RegistryError
from odradek.registry.forward import forward
from odradek.registry.host import RegistryHost
from odradek.registry.store import SchemaStore

log = logging.getLogger(__name__)

NOT_FOUND_CODES = (40401, 40402, 40403)
FORWARDED = "x-odradek-forwarded"  # a forwarded request is never forwarded again


def parse_listener(text: str) -> tuple[str, str, int]:
    """(scheme, host, port) of the first `http(s)://host:port` listener; ValueError else."""
    first = text.split(",")[0].strip()
    url = urlsplit(first)
    if url.scheme not in ("http", "https") or url.port is None:
        raise ValueError(f"schema.registry.listeners: {first!r} is not http(s)://host:port")
    return url.scheme, url.hostname or "0.0.0.0", url.port


# HTTP Basic (Confluent's authentication.method=BASIC): user, password -> accepted
BasicCheck = Callable[[str, str], bool]
UNAUTHORIZED = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()


def basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header; None when it is not one."""
    kind, _, token = header.strip().partition(" ")
    if kind.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


def is_write(method: str, target: str) -> bool:
    """Requests that change state: every PUT and DELETE, POST /subjects/{s}/versions."""
    if method in ("PUT", "DELETE"):
        return True
    path = [p for p in urlsplit(target).path.split("/") if p]
    return method == "POST" and len(path) == 3 and path[0] == "subjects" and path[2] == "versions"


class SchemaRegistry:
    def __init__(
        self,
        host: RegistryHost,
        listeners: str,
        tls: ssl.SSLContext | None = None,
        client_tls: ssl.SSLContext | None = None,
        basic: BasicCheck | None = None,
    ) -> None:
        """`tls`: the https listener's context (client certificates as it requires them);
        `client_tls`: the context writes are forwarded with; `basic`: HTTP Basic users."""
        scheme, host_name, port = parse_listener(listeners)
        if scheme == "https" and tls is None:
            raise ValueError("schema.registry.listeners is https but no TLS settings are given")
        self.scheme = scheme
        self.address = (host_name, port)
        self.tls = tls if scheme == "https" else None
        self.client_tls = client_tls
        self.basic = basic
        self.store = SchemaStore(host)
        self.api = RegistryApi(self.store)
        self.server: asyncio.Server | None = None
        self.port = 0
        self.url = ""
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        self.failed = False
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen now (the URL goes into the broker's registration), then load in the
        background (the broker must be listening for `_schemas` to be created in a cluster)."""
        try:
            self.server = await asyncio.start_server(
                self._serve, self.address[0], self.address[1], reuse_address=True, ssl=self.tls
            )
        except OSError as exc:
            log.error("schema registry cannot listen on %s:%d: %s", *self.address, exc)
            return
        self.port = self.server.sockets[0].getsockname()[1]
        host = self.address[0] if self.address[0] not in ("0.0.0.0", "::", "") else "127.0.0.1"
        self.url = f"{self.scheme}://{host}:{self.port}"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="schema-registry")

    async def _run(self) -> None:
        try:
            await self.store.load()
        except RuntimeError as exc:
            log.error("schema registry not started: %s", exc)
            self.failed = True
            if self.server is not None:  # nothing will be served: waiting clients are closed
                self.server.close()
                for writer in list(self._clients):
                    writer.close()
            return
        log.info("schema registry listening on %s", self.url)
        self.ready.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            await self.ready.wait()
            await http.serve(self.respond, reader, writer)
        finally:
            self._clients.discard(writer)
            writer.close()

    async def respond(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, bytes]:
        if self.basic is not None and not self._authenticated(headers):
            log.debug("schema registry: %s %s refused: no valid Basic credentials", method, target)
            return 401, UNAUTHORIZED
        store = self.store
        store.catch_up()
        forwarded = FORWARDED in headers
        if (
            not forwarded
            and not store.is_writer
            and (is_write(method.upper(), target) or not store.has_replica)
        ):
            return await self._forward(method, target, headers, raw)
        status, body = await http.dispatch(self._handle, method, target, raw)
        if (
            status == 404
            and not forwarded
            and not store.is_writer
            and isinstance(body, dict)
            and body.get("error_code") in NOT_FOUND_CODES
            and store.writer_url() not in (None, self.url)
        ):
            return await self._forward(method, target, headers, raw)
        return status, json.dumps(body).encode()

    def _authenticated(self, headers: dict[str, str]) -> bool:
        assert self.basic is not None
        found = basic_credentials(headers.get("authorization", ""))
        return found is not None and self.basic(*found)

    async def _handle(self, req: http.Request) -> object:
        answer = await self.api.handle(req)
        await self.store.replicated()
        return answer

    async def _forward(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, bytes]:
        url = self.store.writer_url()
        if url is None or url == self.url:
            err = RegistryError(500, 50004, "Unknown leader: no broker leads _schemas")
            return err.status, json.dumps({"error_code": err.code, "message": err.message}).encode()
        try:
            return await forward(
                url, method, target, {**headers, FORWARDED: "1"}, raw, self.client_tls
            )
        except RegistryError as err:
            return err.status, json.dumps({"error_code": err.code, "message": err.message}).encode()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self.server is not None:
            self.server.close()
            for writer in list(self._clients):  # idle keep-alive connections (3.12 waits on them)
                writer.close()
            await self.server.wait_closed()
