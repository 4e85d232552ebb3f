"""The fault-injection admin endpoint: a tiny HTTP/1.1 JSON server for test suites that are not
written in Python (`odradek.admin.listen=HOST:PORT`; `odradek fault` is its client).

Kafka has no such thing; it is what `odradek.testing.Broker`'s fault hooks are for Python tests,
over HTTP. It drives the broker's FaultInjector (odradek/broker/ops/faults.py) on the broker's own
event loop, so a rule is armed before the response is sent.

    GET  /                    this list: {"endpoints": [{"method", "path", "description"}],
                              "metrics": the Prometheus URL when metrics are on, else null}
    GET  /health              {"status": "ok", "node_id", "cluster_id", "bootstrap", "paused", ...}
    GET  /faults              armed rules, paused flag, how many requests were faulted
    POST /faults/fail         {"api": "produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 3}
    POST /faults/delay        {"api": "fetch", "ms": 500, "count": 2}
    POST /faults/pause        hold every request until resumed
    POST /faults/resume
    POST /faults/clear        disarm every rule and resume
    POST /connections/drop    close every client connection -> {"dropped": n}
    POST /faults/disk         {"error": "EIO", "ops": ["write", "fsync"]}: the log dirs' writes
                              and/or fsyncs fail with that errno (null clears) -> offline dirs
    GET  /clock               {"offset_ms", "now_ms"}: the broker's wall clock (odradek.clock)
    POST /clock               {"offset_ms": -3600000}: shift the process's wall clock from the
                              system clock (0: back); monotonic time is never shifted

`api` is a name ("produce", "FETCH", "ListOffsets") or a key number, `error` a Kafka error name
or code, `count` defaults to 1. Bad input gets 400 with {"error": "..."}. Stdlib only: requests
are small, one per line of a test script, so this parses just what it needs of HTTP/1.1
(Content-Length bodies, keep-alive, no chunked uploads).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from enum import IntEnum
from http import HTTPStatus
from typing import TYPE_CHECKING

from odradek import clock
from odradek.broker.ops.faults import FaultRule, api_key, error_code
from odradek.log.disk_faults import FSYNC, WRITE
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

MAX_HEADER_LINE = 8192
MAX_HEADERS = 100
MAX_BODY = 64 * 1024
IDLE_TIMEOUT_S = 60.0


# what `GET /` says of each endpoint
ENDPOINTS = {
    "/": "this list of endpoints",
    "/health": "status, node id, cluster id, bootstrap address, connections, faults",
    "/faults": "armed fault rules, the paused flag, how many requests were faulted",
    "/faults/fail": 'answer requests with an error: {"api", "error", "count"}',
    "/faults/delay": 'hold requests: {"api", "ms", "count"}',
    "/faults/pause": "hold every request until resumed",
    "/faults/resume": "release held requests",
    "/faults/clear": "disarm every rule and resume",
    "/connections/drop": "close every client connection",
    "/faults/disk": 'fail log dir writes/fsyncs: {"error": "EIO" or null, "ops", "dir"}',
    "/clock": 'the wall clock; POST {"offset_ms"} shifts it from the system clock',
}


class BadRequest(Exception):
    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"odradek.admin.listen must be HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _rule_json(rule: FaultRule) -> dict[str, object]:
    return {
        "api": _name(ApiKey, rule.api_key),
        "api_key": rule.api_key,
        "remaining": rule.remaining,
        "error": None if rule.error_code is None else _name(ErrorCode, rule.error_code),
        "delay_ms": rule.delay_ms,
    }


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def _int_field(body: dict[str, object], name: str, default: int | None, minimum: int) -> int:
    value = body.get(name, default)
    if value is None:
        raise BadRequest(f"missing {name!r}")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequest(f"{name!r} must be an integer")
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"{name!r} must be an integer") from None
    if number < minimum:
        raise BadRequest(f"{name!r} must be at least {minimum}")
    return number


def _int_or_str(value: object) -> int | str:
    if isinstance(value, (int, str)):
        return value
    raise TypeError(type(value).__name__)


def _api_field(body: dict[str, object]) -> int:
    if "api" not in body:
        raise BadRequest("missing 'api'")
    try:
        return api_key(_int_or_str(body["api"]))
    except (ValueError, TypeError):
        raise BadRequest(f"unknown API {body['api']!r}") from None


class AdminHttpServer:
    """Started and stopped with the broker (it is one of `Broker.services`)."""

    def __init__(self, broker: Broker, listen: str) -> None:
        self.broker = broker
        self.host, self.port = parse_listen(listen)
        self.server: asyncio.base_events.Server | None = None
        self.clients: set[asyncio.StreamWriter] = set()
        self.routes: dict[tuple[str, str], Callable[[dict[str, object]], dict[str, object]]] = {
            ("GET", "/"): self.index,
            ("GET", "/health"): self.health,
            ("GET", "/faults"): self.list_faults,
            ("POST", "/faults/fail"): self.fail,
            ("POST", "/faults/delay"): self.delay,
            ("POST", "/faults/pause"): self.pause,
            ("POST", "/faults/resume"): self.resume,
            ("POST", "/faults/clear"): self.clear,
            ("POST", "/connections/drop"): self.drop_connections,
            ("POST", "/faults/disk"): self.disk,
            ("GET", "/clock"): self.clock,
            ("POST", "/clock"): self.set_clock,
        }
        broker.admin_http = self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self.server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True
        )
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("fault-injection admin endpoint on %s", self.url)

    async def stop(self) -> None:
        self.abandon()
        if self.server is not None:
            try:
                await asyncio.wait_for(self.server.wait_closed(), 2)
            except (TimeoutError, Exception):  # noqa: BLE001  (shutting down regardless)
                pass

    def abandon(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.clients):
            writer.close()
        self.clients.clear()

    # -- endpoints ------------------------------------------------------------------------------

    def _faults_state(self) -> dict[str, object]:
        faults = self.broker.faults
        return {
            "paused": not faults.running.is_set(),
            "injected": faults.injected,
            "rules": [_rule_json(r) for queue in faults.rules.values() for r in queue],
        }

    def index(self, _body: dict[str, object]) -> dict[str, object]:
        metrics = self.broker.metrics
        url = None
        if metrics is not None:
            host = "localhost" if metrics.host in ("", "0.0.0.0", "::") else metrics.host
            url = f"http://{f'[{host}]' if ':' in host else host}:{metrics.port}/metrics"
        return {
            "endpoints": [
                {"method": method, "path": path, "description": ENDPOINTS.get(path, "")}
                for method, path in self.routes
            ],
            "metrics": url,
        }

    def health(self, _body: dict[str, object]) -> dict[str, object]:
        bootstrap = None
        if self.broker.bound:
            adv = self.broker.advertised_listener()
            bootstrap = f"{adv.host}:{adv.port}"
        return {
            "status": "ok",
            "node_id": self.broker.node_id,
            "cluster_id": self.broker.cluster_id,
            "bootstrap": bootstrap,
            "connections": len(self.broker.connections),
            **self._faults_state(),
        }

    def list_faults(self, _body: dict[str, object]) -> dict[str, object]:
        return self._faults_state()

    def fail(self, body: dict[str, object]) -> dict[str, object]:
        key = _api_field(body)
        if "error" not in body:
            raise BadRequest("missing 'error'")
        try:
            code = error_code(_int_or_str(body["error"]))
        except (KeyError, ValueError, TypeError):
            raise BadRequest(f"unknown error {body['error']!r}") from None
        rule = FaultRule(key, _int_field(body, "count", 1, 1), code)
        self.broker.faults.add(rule)
        return {"armed": _rule_json(rule)}

    def delay(self, body: dict[str, object]) -> dict[str, object]:
        key = _api_field(body)
        rule = FaultRule(
            key, _int_field(body, "count", 1, 1), None, _int_field(body, "ms", None, 0)
        )
        self.broker.faults.add(rule)
        return {"armed": _rule_json(rule)}

    def pause(self, _body: dict[str, object]) -> dict[str, object]:
        self.broker.faults.pause()
        return {"paused": True}

    def resume(self, _body: dict[str, object]) -> dict[str, object]:
        self.broker.faults.resume()
        return {"paused": False}

    def clear(self, _body: dict[str, object]) -> dict[str, object]:
        self.broker.faults.clear()
        return {"cleared": True}

    def drop_connections(self, _body: dict[str, object]) -> dict[str, object]:
        return {"dropped": self.broker.drop_connections()}

    def disk(self, body: dict[str, object]) -> dict[str, object]:
        """Inject (or clear, with "error": null) a log dir fault, as `Broker.fail_disk`."""
        if "error" not in body:
            raise BadRequest("missing 'error' (an errno name such as EIO, or null to clear)")
        error, ops, where = body["error"], body.get("ops", [WRITE, FSYNC]), body.get("dir")
        if isinstance(error, bool) or not isinstance(error, (str, int, type(None))):
            raise BadRequest("'error' must be an errno name or number, or null")
        if not isinstance(ops, list) or not ops or not set(ops) <= {WRITE, FSYNC}:
            raise BadRequest(f"'ops' must be a list of {WRITE!r} and/or {FSYNC!r}")
        if where is not None and not isinstance(where, str):
            raise BadRequest("'dir' must be a log dir path")
        try:
            self.broker.fail_disk(error, where, tuple(ops))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return {"offline_dirs": self.broker.logs.offline_dirs}

    def clock(self, _body: dict[str, object]) -> dict[str, object]:
        return {"offset_ms": clock.offset_ms(), "now_ms": clock.now_ms()}

    def set_clock(self, body: dict[str, object]) -> dict[str, object]:
        value = body.get("offset_ms")
        if not isinstance(value, int) or isinstance(value, bool):
            raise BadRequest("'offset_ms' must be an integer (milliseconds from the system clock)")
        clock.set_offset_ms(value)
        return self.clock(body)

    # -- HTTP -----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.clients.add(writer)
        try:
            keep_alive = True
            while keep_alive:
                try:
                    request = await asyncio.wait_for(_read_request(reader), IDLE_TIMEOUT_S)
                except BadRequest as exc:
                    await _respond(writer, exc.status, {"error": str(exc)}, False)
                    return
                if request is None:
                    return
                method, path, headers, body, keep_alive = request
                status, payload, extra = self._dispatch(method, path, body)
                await _respond(writer, status, payload, keep_alive, extra)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("admin endpoint failed")
        finally:
            self.clients.discard(writer)
            writer.close()

    def _dispatch(
        self, method: str, path: str, raw: bytes
    ) -> tuple[HTTPStatus, dict[str, object], dict[str, str]]:
        path = path.split("?", 1)[0].rstrip("/") or "/"
        handler = self.routes.get((method, path))
        if handler is None:
            allowed = sorted(m for m, p in self.routes if p == path)
            if allowed:
                return (
                    HTTPStatus.METHOD_NOT_ALLOWED,
                    {"error": f"{method} not allowed on {path}"},
                    {"Allow": ", ".join(allowed)},
                )
            return HTTPStatus.NOT_FOUND, {"error": f"no endpoint {path}"}, {}
        try:
            body = _json_body(raw)
            result = handler(body)
        except BadRequest as exc:
            return exc.status, {"error": str(exc)}, {}
        level = logging.DEBUG if method == "GET" else logging.INFO
        log.log(level, "admin endpoint: %s %s %s", method, path, raw.decode(errors="replace"))
        return HTTPStatus.OK, result, {}


def _json_body(raw: bytes) -> dict[str, object]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise BadRequest(
            "header line too long", HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
        ) from None
    if len(line) > MAX_HEADER_LINE:
        raise BadRequest("header line too long", HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
    return line.rstrip(b"\r\n")


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes, bool] | None:
    """One request, or None when the client closed the connection between requests."""
    try:
        first = await _read_line(reader)
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise BadRequest("truncated request") from None
        return None
    parts = first.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest("malformed request line")
    method, path, version = parts
    headers: dict[str, str] = {}
    while True:
        line = await _read_line(reader)
        if not line:
            break
        if len(headers) >= MAX_HEADERS:
            raise BadRequest("too many headers", HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise BadRequest("malformed header line")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest(
            "chunked bodies are not supported; send Content-Length", HTTPStatus.LENGTH_REQUIRED
        )
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest("bad Content-Length") from None
    if length < 0 or length > MAX_BODY:
        raise BadRequest("body too large", HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
    body = await reader.readexactly(length) if length else b""
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
    return method.upper(), path, headers, body, keep_alive


async def _respond(
    writer: asyncio.StreamWriter,
    status: HTTPStatus,
    payload: dict[str, object],
    keep_alive: bool,
    extra: dict[str, str] | None = None,
) -> None:
    body = json.dumps(payload).encode() + b"\n"
    head = [
        f"HTTP/1.1 {status.value} {status.phrase}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


def start_admin_http(broker: Broker, listen: str | None = None) -> AdminHttpServer:
    """An endpoint for `broker` on `listen` (default: its `odradek.admin.listen`), registered as
    one of its services so `Broker.start()` / `stop()` run it. Called by `Broker.__init__`
    when the key is set; call it yourself before `start()` to add one to a broker."""
    server = AdminHttpServer(broker, listen or broker.config.get("odradek.admin.listen"))
    broker.services.append(server)
    return server
