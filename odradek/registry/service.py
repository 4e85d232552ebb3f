"""The registry as a broker service: loads `_schemas`, then listens on the first address of
`schema.registry.listeners` (http://host:port; port 0 picks a free one, reported in `port`)."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from odradek.registry import http
from odradek.registry.api import RegistryApi
from odradek.registry.host import RegistryHost
from odradek.registry.store import SchemaStore

log = logging.getLogger(__name__)


def parse_listener(text: str) -> tuple[str, int]:
    """(host, port) of the first `http://host:port` listener; ValueError for anything else."""
    first = text.split(",")[0].strip()
    url = urlsplit(first)
    if url.scheme != "http" or url.port is None:
        raise ValueError(f"schema.registry.listeners: {first!r} is not http://host:port")
    return url.hostname or "0.0.0.0", url.port


class SchemaRegistry:
    def __init__(self, host: RegistryHost, listeners: str) -> None:
        self.address = parse_listener(listeners)
        self.store = SchemaStore(host)
        self.api = RegistryApi(self.store)
        self.server: asyncio.Server | None = None
        self.port = 0
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Starts loading in the background (the broker must be listening for `_schemas` to be
        created in a cluster); the HTTP listener opens once the state is loaded."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="schema-registry")

    async def _run(self) -> None:
        try:
            await self.store.load()
        except RuntimeError as exc:  # e.g. another broker leads _schemas (docs/notes.md)
            log.error("schema registry not started: %s", exc)
            return
        try:
            self.server = await asyncio.start_server(
                self._serve, self.address[0], self.address[1], reuse_address=True
            )
        except OSError as exc:
            log.error("schema registry cannot listen on %s:%d: %s", *self.address, exc)
            return
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("schema registry listening on http://%s:%d", self.address[0], self.port)
        self.ready.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            await http.serve(self.api.handle, reader, writer)
        finally:
            self._clients.discard(writer)

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
