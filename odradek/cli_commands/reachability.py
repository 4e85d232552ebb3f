"""Is anything there? A quick look at the bootstrap servers before a command's client starts.

kafka-python's clients retry an unusable address until the connect timeout (10 s) ends, where
kcat gives up in milliseconds. The CLI looks first, and fails at once when:

- no bootstrap host resolves (`localhots:9092`): the resolver's answer is final;
- every address refuses the connection: nothing listens there. Refusals are retried for
  `REFUSED_GRACE_S` (a broker binds its port late in its start-up; a script that starts one and
  runs a command right after should not fail), never for the whole connect timeout;
- a command speaking PLAINTEXT reaches a TLS listener (the listener drops the bytes and a TLS
  handshake on a new connection succeeds) or a SASL listener (it answers ApiVersions, as SASL
  listeners must before authentication, and refuses Metadata): the message says which
  security protocol to give in --command-config.

An address that neither answers nor refuses (a firewall dropping packets) is waited for up to the
connect timeout, as before: a broker may be on its way. Anything the look cannot classify is left
to the client.
"""

from __future__ import annotations

import socket
import struct
import time

from odradek.cli_commands.output import CliError

REFUSED_GRACE_S = 1.0
RETRY_S = 0.1
ANSWER_TIMEOUT_S = 5.0
_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 0)  # key, version, correlation id, client id ""
# Metadata v1 for no topics (empty array): a plaintext listener lists its brokers
_METADATA_V1 = struct.pack(">hhihi", 3, 1, 2, 0, 0)

CONNECT = "cannot connect to a broker"


def parse_servers(servers: str) -> list[tuple[str, int]]:
    """HOST:PORT[,HOST:PORT...] ([v6]:port allowed); a malformed entry is a CliError."""
    out = []
    for item in servers.split(","):
        item = item.strip().split("://", 1)[-1]
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise CliError(f"bad bootstrap server {item!r}: expected HOST:PORT")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise CliError("no bootstrap server given")
    return out


def check_bootstrap(servers: str, connect_timeout_ms: int, plaintext: bool) -> None:
    """Raise a CliError saying what is wrong when no bootstrap server can serve the command;
    return when one may (the client then connects as usual)."""
    problems: list[str] = []
    addresses = parse_servers(servers)
    deadline = time.monotonic() + connect_timeout_ms / 1000
    for host, port in addresses:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            problems.append(f"cannot resolve host {host!r} ({exc.strerror or exc})")
            continue
        outcome = _connect(infos, deadline)
        if isinstance(outcome, str):
            problems.append(f"{host}:{port} {outcome}")
            continue
        with outcome:
            if not plaintext:
                return
            wrong = _plaintext_problem(outcome, host, port, min(ANSWER_TIMEOUT_S, _left(deadline)))
        if wrong is None:
            return
        raise CliError(f"{host}:{port} {wrong}")
    raise CliError(f"{CONNECT}: " + "; ".join(problems))


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.05)


def _connect(infos: list[tuple], deadline: float) -> socket.socket | str:
    """A connected socket, or why not ("refused the connection ...")."""
    grace_end = min(time.monotonic() + REFUSED_GRACE_S, deadline)
    while True:
        refused = False
        last: OSError | None = None
        for family, type_, proto, _, address in infos:
            sock = socket.socket(family, type_, proto)
            sock.settimeout(_left(deadline))
            try:
                sock.connect(address)
                return sock
            except ConnectionRefusedError as exc:
                refused, last = True, exc
            except OSError as exc:
                last = exc
            sock.close()
        if not refused or time.monotonic() >= grace_end:
            break
        time.sleep(RETRY_S)  # a broker binding its port in a moment
    if refused:
        return "refused the connection (nothing listens there)"
    if isinstance(last, TimeoutError | socket.timeout):
        return "did not answer within the connect timeout"
    return f"cannot be reached ({getattr(last, 'strerror', None) or last})"


def _request(sock: socket.socket, payload: bytes) -> bytes | None:
    """Send one size-prefixed request, read one size-prefixed answer; None when the peer closed
    the connection or sent something that is not a Kafka frame."""
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    head = _read(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if not 4 <= size <= 1 << 20:
        return None
    return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _plaintext_problem(sock: socket.socket, host: str, port: int, timeout_s: float) -> str | None:
    """Why a PLAINTEXT client cannot use this listener, or None when it can (or it is not clear
    that it cannot)."""
    sock.settimeout(timeout_s)
    try:
        answer = _request(sock, _API_VERSIONS_V0)
        if answer is None:
            return _tls_problem(host, port, timeout_s)
        if answer[:4] != struct.pack(">i", 1):
            return None
        metadata = _request(sock, _METADATA_V1)
    except TimeoutError:
        return None
    except OSError:
        metadata = None
    if metadata is None or _brokers(metadata) == 0:
        return (
            "is a SASL listener (SASL_PLAINTEXT): give --command-config FILE with "
            "security.protocol=SASL_PLAINTEXT, sasl.mechanism and sasl.jaas.config"
        )
    return None


def _brokers(metadata: bytes) -> int:
    """The broker count of a Metadata v1 response (after the correlation id)."""
    return struct.unpack(">i", metadata[4:8])[0] if len(metadata) >= 8 else 0


def _tls_problem(host: str, port: int, timeout_s: float) -> str | None:
    """The listener closed on our PLAINTEXT bytes: a TLS handshake tells whether it is TLS."""
    import ssl  # only here: its import is a good part of a short command's start

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                pass
    except ssl.SSLError as exc:
        if "CERTIFICATE" in str(exc).upper() or "ALERT" in str(exc).upper():
            return _TLS  # a TLS server that wants a client certificate, say
        return "closed the connection on a Kafka request: is it a Kafka listener?"
    except OSError:
        return "closed the connection on a Kafka request: is it a Kafka listener?"
    return _TLS


_TLS = (
    "is a TLS listener (SSL or SASL_SSL): give --command-config FILE with security.protocol=SSL "
    "(or SASL_SSL and the SASL settings) and ssl.truststore.location"
)
