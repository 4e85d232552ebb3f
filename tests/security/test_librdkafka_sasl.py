"""librdkafka (confluent-kafka) authenticates against odradek.security's SaslConnection over a
real socket: a minimal listener here speaks just ApiVersions v0, SaslHandshake v1 and
SaslAuthenticate v0-1 (hand-encoded), and records the principal once the client moves on to
Metadata. An independent client implementation checks the mechanisms' wire formats and that
Kafka's failure messages reach the client."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from odradek.security.authenticator import Route, SaslConnection  # noqa: E402
from odradek.security.credentials import InMemoryCredentialStore  # noqa: E402
from odradek.security.oauthbearer import UnsecuredValidator  # noqa: E402
from odradek.security.sasl import create_server, plain_authenticator  # noqa: E402
from odradek.security.scram import ScramMechanism, generate_credential  # noqa: E402

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
# ApiVersions 0..0, SaslHandshake 0..1, SaslAuthenticate 0..1, Metadata 0..4
API_VERSIONS = [(18, 0, 0), (17, 0, 1), (36, 0, 1), (3, 0, 4)]


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


class _Handler(socketserver.BaseRequestHandler):
    server: _Listener

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.request.recv(n - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _send(self, correlation_id: int, body: bytes) -> None:
        payload = struct.pack(">i", correlation_id) + body
        self.request.sendall(struct.pack(">i", len(payload)) + payload)

    def handle(self) -> None:
        self.server.sockets.append(self.request)
        conn = self.server.new_connection()
        try:
            while True:
                (size,) = struct.unpack(">i", self._read(4))
                frame = self._read(size)
                api_key, version, correlation_id, client_len = struct.unpack(">hhih", frame[:10])
                body = frame[10 + max(client_len, 0) :]
                decision = conn.route(api_key)
                if decision.route is Route.HANDLE and not conn.authenticated:
                    error = 0 if version == 0 else 35  # UNSUPPORTED_VERSION: client retries v0
                    entries = b"".join(struct.pack(">hhh", *e) for e in API_VERSIONS)
                    self._send(
                        correlation_id,
                        struct.pack(">hi", error, len(API_VERSIONS)) + entries,
                    )
                elif decision.route is Route.HANDLE:
                    self.server.events.append(("authenticated", conn.principal))
                    return
                elif decision.route is Route.HANDSHAKE:
                    (length,) = struct.unpack(">h", body[:2])
                    result = conn.handshake(body[2 : 2 + length].decode(), version)
                    names = b"".join(_string(m) for m in result.mechanisms)
                    self._send(
                        correlation_id,
                        struct.pack(">hi", int(result.error_code), len(result.mechanisms)) + names,
                    )
                    if result.close:
                        self.server.events.append(("unsupported", None))
                        return
                elif decision.route is Route.AUTHENTICATE:
                    (length,) = struct.unpack(">i", body[:4])
                    auth = conn.authenticate(body[4 : 4 + length])
                    if auth.send_response:
                        out = struct.pack(">h", int(auth.error_code)) + _string(auth.error_message)
                        out += _bytes(auth.auth_bytes)
                        if version >= 1:
                            out += struct.pack(">q", auth.session_lifetime_ms)
                        self._send(correlation_id, out)
                    if auth.close:
                        self.server.events.append(("failed", auth.error_message))
                        return
                else:
                    self.server.events.append(("refused", decision.message))
                    return
        except (ConnectionError, OSError):
            return


class _Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, factory: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.new_connection = factory
        self.events: list[tuple[str, str | None]] = []
        self.sockets: list[socket.socket] = []


@pytest.fixture
def listener() -> Iterator[_Listener]:
    store = InMemoryCredentialStore()
    for mechanism in ScramMechanism:
        store.upsert("alice", mechanism, generate_credential(mechanism, "alice-secret"))
    factory = partial(
        create_server,
        plain=plain_authenticator({"alice": "alice-secret"}),
        scram_credentials=store.get,
        oauthbearer=UnsecuredValidator(required_scope=("kafka",)),
    )
    server = _Listener(lambda: SaslConnection(MECHANISMS, factory))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        for sock in server.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        thread.join(timeout=10)


def _run_client(listener: _Listener, **config: Any) -> tuple[list[Any], list[str]]:
    """Start a producer with ``config`` and poll until the listener saw an outcome."""
    errors: list[str] = []
    port = listener.server_address[1]
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "error_cb": lambda err: errors.append(str(err)),
            "log_level": 0,
            "reconnect.backoff.ms": 5000,
            **config,
        }
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            producer.poll(0.05)
            if listener.events and (listener.events[0][0] == "authenticated" or errors):
                break
    finally:
        del producer
    return list(listener.events), errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms(listener: _Listener, mechanism: str) -> None:
    events, _ = _run_client(
        listener,
        **{"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret"},
    )
    assert events[0] == ("authenticated", "User:alice")


def test_scram_wrong_password_reaches_the_client_with_kafkas_message(listener: _Listener) -> None:
    events, errors = _run_client(
        listener,
        **{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "nope"},
    )
    message = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert events[0] == ("failed", message)
    assert any(message in error for error in errors), errors


def test_oauthbearer_unsecured_jwt(listener: _Listener) -> None:
    events, _ = _run_client(
        listener,
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=svc scope=kafka,other",
        },
    )
    assert events[0] == ("authenticated", "User:svc")


def test_oauthbearer_missing_scope_fails_with_the_json_error(listener: _Listener) -> None:
    events, errors = _run_client(
        listener,
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=svc scope=other",
        },
    )
    expected = '{"status":"insufficient_scope", "scope":"[kafka]"}'
    assert events[0] == ("failed", expected)
    assert any("insufficient_scope" in error for error in errors), errors


def test_unknown_mechanism_is_refused(listener: _Listener) -> None:
    listener.new_connection = partial(
        SaslConnection, ["SCRAM-SHA-512"], listener.new_connection().create_server
    )
    events, errors = _run_client(
        listener, **{"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "x"}
    )
    assert events[0] == ("unsupported", None)
    assert any("SCRAM-SHA-512" in error for error in errors), errors
