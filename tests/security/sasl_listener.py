"""A minimal SASL_PLAINTEXT listener for driving odradek.security.SaslConnection with real
clients before the broker wires it: it speaks just ApiVersions (answered in v0, asking for v0
when a newer version is sent, as Kafka does), SaslHandshake v0-1 and SaslAuthenticate v0-1,
hand-encoded (bare tokens after a v0 handshake; set ``api_versions`` to offer only v0), and
ends the connection at the first request after authentication. ``events``
records one ``(client_id, outcome, detail)`` per connection: ``authenticated`` with the
principal, ``failed`` with the message sent to the client, ``unsupported`` or ``refused``."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from odradek.security.authenticator import Route, SaslConnection
from odradek.security.credentials import InMemoryCredentialStore
from odradek.security.oauthbearer import UnsecuredValidator
from odradek.security.sasl import create_server, plain_authenticator
from odradek.security.scram import ScramMechanism, generate_credential

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
# ApiVersions 0..0, SaslHandshake 0..1, SaslAuthenticate 0..1, Metadata 0..4
API_VERSIONS = [(18, 0, 0), (17, 0, 1), (36, 0, 1), (3, 0, 4)]
USERS = {"alice": "alice-secret"}


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


class _Handler(socketserver.BaseRequestHandler):
    server: Listener

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
        client_id = ""
        try:
            while True:
                (size,) = struct.unpack(">i", self._read(4))
                frame = self._read(size)
                if conn.state == "authenticate" and not conn.framed:
                    # After SaslHandshake v0: bare tokens, answered bare (Kafka sends even an
                    # empty one), and a failure just closes the connection.
                    bare = conn.authenticate(frame)
                    if bare.close:
                        self.server.events.append((client_id, "failed", bare.error_message))
                        return
                    self.request.sendall(struct.pack(">i", len(bare.auth_bytes)) + bare.auth_bytes)
                    continue
                api_key, version, correlation_id, client_len = struct.unpack(">hhih", frame[:10])
                client_id = frame[10 : 10 + max(client_len, 0)].decode()
                body = frame[10 + max(client_len, 0) :]
                decision = conn.route(api_key)
                if decision.route is Route.HANDLE and not conn.authenticated:
                    error = 0 if version == 0 else 35  # UNSUPPORTED_VERSION: client retries v0
                    versions = self.server.api_versions
                    entries = b"".join(struct.pack(">hhh", *e) for e in versions)
                    self._send(correlation_id, struct.pack(">hi", error, len(versions)) + entries)
                elif decision.route is Route.HANDLE:
                    self.server.events.append((client_id, "authenticated", conn.principal))
                    return
                elif decision.route is Route.HANDSHAKE:
                    (length,) = struct.unpack(">h", body[:2])
                    result = conn.handshake(body[2 : 2 + length].decode(), version)
                    names = b"".join(_string(m) for m in result.mechanisms)
                    head = struct.pack(">hi", int(result.error_code), len(result.mechanisms))
                    self._send(correlation_id, head + names)
                    if result.close:
                        self.server.events.append((client_id, "unsupported", None))
                        return
                elif decision.route is Route.AUTHENTICATE:
                    (length,) = struct.unpack(">i", body[:4])
                    auth = conn.authenticate(body[4 : 4 + length])
                    if auth.send_response:
                        out = struct.pack(">h", int(auth.error_code)) + _string(auth.error_message)
                        out += struct.pack(">i", len(auth.auth_bytes)) + auth.auth_bytes
                        if version >= 1:
                            out += struct.pack(">q", auth.session_lifetime_ms)
                        self._send(correlation_id, out)
                    if auth.close:
                        self.server.events.append((client_id, "failed", auth.error_message))
                        return
                else:
                    self.server.events.append((client_id, "refused", decision.message))
                    return
        except (ConnectionError, OSError):
            return


class Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, new_connection: Callable[[], SaslConnection]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.new_connection = new_connection
        self.api_versions = list(API_VERSIONS)
        self.events: list[tuple[str, str, str | None]] = []
        self.sockets: list[socket.socket] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def outcome(self, client_id: str) -> tuple[str, str | None] | None:
        for cid, kind, detail in list(self.events):
            if cid == client_id:
                return kind, detail
        return None


def default_connection(
    mechanisms: list[str] | None = None, required_scope: tuple[str, ...] = ("kafka",)
) -> SaslConnection:
    store = InMemoryCredentialStore()
    for user, password in USERS.items():
        for mechanism in ScramMechanism:
            store.upsert(user, mechanism, generate_credential(mechanism, password))
    factory = partial(
        create_server,
        plain=plain_authenticator(USERS),
        scram_credentials=store.get,
        oauthbearer=UnsecuredValidator(required_scope=required_scope),
    )
    return SaslConnection(mechanisms or MECHANISMS, factory)


@contextmanager
def sasl_listener(
    new_connection: Callable[[], SaslConnection] = default_connection,
) -> Iterator[Listener]:
    server = Listener(new_connection)
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
