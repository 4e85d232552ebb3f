"""Socket buffer sizes as Kafka's SocketServer and NetworkClient set them.

- `socket.receive.buffer.bytes`: SO_RCVBUF of each listening socket, set before it listens
  (Kafka's Acceptor.openServerSocket sets it before bind). Accepted sockets inherit it, and the
  TCP window scale a connection offers in its SYN-ACK is derived from it, so it has to be in
  place before the first connection arrives. Kafka sets no SO_RCVBUF on accepted sockets.
- `socket.send.buffer.bytes`: SO_SNDBUF of every accepted socket (Kafka's
  Acceptor.configureAcceptedSocketChannel). A TLS connection gets it once its handshake is done
  (asyncio hands the socket over only then); the handshake itself goes at the OS default.
- `replica.socket.receive.buffer.bytes`: SO_RCVBUF of a replica fetcher's connection to the
  leader, set before connect (Kafka's Selector.configureSocketChannel); its send buffer is left
  to the OS (BrokerBlockingSender passes USE_DEFAULT_BUFFER_SIZE). odradek's default is -1,
  not Kafka's 65536 (docs/notes.md: a 128 KiB window slowed RF=3 produce). Kafka's other
  inter-broker clients (transaction markers, AddPartitionsToTxn) use
  `socket.receive.buffer.bytes` the same way.

-1 (Kafka's Selectable.USE_DEFAULT_BUFFER_SIZE) leaves the OS default, i.e. Linux's buffer
autotuning (net.ipv4.tcp_rmem / tcp_wmem); a size set explicitly turns autotuning off for that
direction. Linux doubles what is set (for its own bookkeeping) and caps it at
net.core.rmem_max / wmem_max, so getsockopt reports twice the configured size. None of the three
is a dynamic config in Kafka (DynamicBrokerConfig lists none), nor read per listener.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Protocol

log = logging.getLogger(__name__)

USE_DEFAULT_BUFFER_SIZE = -1  # Kafka's Selectable.USE_DEFAULT_BUFFER_SIZE: the OS decides


class _SetsOptions(Protocol):
    def setsockopt(self, level: int, optname: int, value: int, /) -> None: ...


def set_buffer(sock: _SetsOptions, option: int, size: int) -> None:
    """SO_SNDBUF / SO_RCVBUF to `size` unless it is -1 (the OS default)."""
    if size != USE_DEFAULT_BUFFER_SIZE:
        sock.setsockopt(socket.SOL_SOCKET, option, size)


def configure_listening(server: asyncio.Server, receive_buffer: int) -> None:
    """`socket.receive.buffer.bytes` on a server's sockets, bound but not yet listening (made
    with start_serving=False): accepted sockets inherit it, window scale included."""
    for sock in server.sockets:
        set_buffer(sock, socket.SO_RCVBUF, receive_buffer)


def configure_accepted(transport: asyncio.BaseTransport, send_buffer: int) -> None:
    """`socket.send.buffer.bytes` on an accepted connection's socket."""
    if send_buffer == USE_DEFAULT_BUFFER_SIZE:
        return
    sock = transport.get_extra_info("socket")
    if sock is None:
        return  # not a socket transport (a test's)
    try:
        set_buffer(sock, socket.SO_SNDBUF, send_buffer)
    except OSError as exc:  # the peer may be gone already; the connection's reads will say so
        log.debug("SO_SNDBUF on an accepted socket: %s", exc)


async def connect_socket(host: str, port: int, receive_buffer: int) -> socket.socket:
    """A TCP socket connected to host:port with SO_RCVBUF set before connect (so the SYN
    offers the window scale it needs): each address of the name in turn, as
    loop.create_connection tries them."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError | None = None
    for family, type_, proto, _name, address in infos:
        sock = socket.socket(family, type_, proto)
        try:
            sock.setblocking(False)
            set_buffer(sock, socket.SO_RCVBUF, receive_buffer)
            await loop.sock_connect(sock, address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error if error is not None else OSError(f"getaddrinfo({host!r}) returned nothing")
