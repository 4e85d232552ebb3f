"""The machine's ceilings, printed beside the broker's numbers: what loopback TCP, sendfile from
the page cache to a socket and sequential writes to a file achieve on this host, with nothing
Kafka-shaped in the way (issue 17).

- loopback TCP: one process sends 1 MiB buffers over a 127.0.0.1 connection that another process
  reads into a 4 MiB buffer (as a client reading fetch responses would);
- sendfile: a file written and read once (so it sits in the page cache) is sent with
  os.sendfile in 8 MiB slices over a loopback connection to a reading process, as the broker
  serves a fetch;
- sequential write: 1 MiB writes to a new file in the given directory, rate to the page cache,
  and the same bytes once fsync'ed (the write rate including one fsync at the end).

Each is bounded by bytes and by time (whichever comes first) and cleans up after itself.
`python -m bench.ceilings` prints them; bench.runner puts them under the results table.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import tempfile
import time
from dataclasses import dataclass

HOST = "127.0.0.1"
CHUNK = 1 << 20
RECV_BUF = 4 << 20
SENDFILE_SLICE = 8 << 20
DEFAULT_BYTES = 50_000_000_000  # the time bound ends it first
DEFAULT_FILE_BYTES = 512 * CHUNK
DEFAULT_SECONDS = 3.0  # per ceiling, split over ROUNDS runs


@dataclass(frozen=True, slots=True)
class Ceiling:
    name: str
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


def _drain(port: int, ready: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    """Child: accept one connection, read it to EOF, answer with the byte count."""
    srv = socket.create_server((HOST, port))
    ready.set()
    conn, _ = srv.accept()
    srv.close()
    buf = bytearray(RECV_BUF)
    view = memoryview(buf)
    total = 0
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        total += n
    conn.sendall(total.to_bytes(8, "big"))
    conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _with_reader(send: object) -> tuple[int, float]:
    """Run `send(sock, deadline) -> bytes sent` against a reading child; (bytes read, seconds)."""
    ctx = multiprocessing.get_context("fork")
    port = _free_port()
    ready = ctx.Event()
    child = ctx.Process(target=_drain, args=(port, ready), daemon=True)
    child.start()
    try:
        if not ready.wait(10):
            raise RuntimeError("ceilings: the reading process did not start")
        with socket.create_connection((HOST, port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            started = time.perf_counter()
            send(sock, started)  # type: ignore[operator]
            sock.shutdown(socket.SHUT_WR)
            got = b""
            while len(got) < 8:
                part = sock.recv(8 - len(got))
                if not part:
                    break
                got += part
            elapsed = time.perf_counter() - started
        return int.from_bytes(got, "big") if len(got) == 8 else 0, elapsed
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(5)


def loopback_tcp(limit_bytes: int = DEFAULT_BYTES, limit_s: float = DEFAULT_SECONDS) -> Ceiling:
    payload = os.urandom(CHUNK)

    def send(sock: socket.socket, started: float) -> None:
        sent = 0
        deadline = started + limit_s
        while sent < limit_bytes and time.perf_counter() < deadline:
            sock.sendall(payload)
            sent += CHUNK

    nbytes, seconds = _with_reader(send)
    return Ceiling("loopback TCP (1 MiB send / 4 MiB recv)", nbytes, seconds)


def sendfile(
    directory: str | None = None,
    file_bytes: int = DEFAULT_FILE_BYTES,
    limit_bytes: int = DEFAULT_BYTES,
    limit_s: float = DEFAULT_SECONDS,
) -> Ceiling:
    fd, path = tempfile.mkstemp(prefix="odradek-ceiling-", dir=directory)
    try:
        block = os.urandom(CHUNK)
        for _ in range(max(1, file_bytes // CHUNK)):
            os.write(fd, block)
        size = os.fstat(fd).st_size
        os.lseek(fd, 0, os.SEEK_SET)
        while os.read(fd, 8 * CHUNK):  # read once: the pages are cached
            pass

        def send(sock: socket.socket, started: float) -> None:
            sent = 0
            deadline = started + limit_s
            out = sock.fileno()
            sock.setblocking(True)
            while sent < limit_bytes and time.perf_counter() < deadline:
                offset = 0
                while offset < size:
                    n = os.sendfile(out, fd, offset, min(SENDFILE_SLICE, size - offset))
                    if n == 0:
                        break
                    offset += n
                sent += offset

        nbytes, seconds = _with_reader(send)
    finally:
        os.close(fd)
        os.unlink(path)
    return Ceiling("sendfile page cache -> loopback socket", nbytes, seconds)


def sequential_write(
    directory: str | None = None, limit_bytes: int = DEFAULT_FILE_BYTES, limit_s: float = 10.0
) -> tuple[Ceiling, Ceiling]:
    """(rate into the page cache, rate including the final fsync) of 1 MiB writes."""
    block = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(prefix="odradek-ceiling-", dir=directory)
    try:
        started = time.perf_counter()
        deadline = started + limit_s
        written = 0
        while written < limit_bytes and time.perf_counter() < deadline:
            written += os.write(fd, block)
        cached = time.perf_counter() - started
        os.fsync(fd)
        synced = time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return (
        Ceiling("sequential write, 1 MiB writes (page cache)", written, cached),
        Ceiling("sequential write + fsync", written, synced),
    )


def fsync_latency(directory: str | None = None, rounds: int = 50) -> float:
    """Median ms of write(4 KiB) + fsync on one file: the floor of a flush.messages=1 append."""
    fd, path = tempfile.mkstemp(prefix="odradek-ceiling-", dir=directory)
    block = os.urandom(4096)
    times = []
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return times[len(times) // 2] * 1000.0


ROUNDS = 3


def _median(runs: list[Ceiling]) -> tuple[Ceiling, float, float]:
    """The median run of several, with the lowest and highest MB/s seen."""
    ordered = sorted(runs, key=lambda c: c.mb_per_s)
    return ordered[len(ordered) // 2], ordered[0].mb_per_s, ordered[-1].mb_per_s


def measure(
    directory: str | None = None, limit_s: float = DEFAULT_SECONDS, rounds: int = ROUNDS
) -> list[tuple[Ceiling, float, float]]:
    """Each ceiling `rounds` times, limit_s / rounds seconds each: (median, min MB/s, max MB/s)."""
    each = limit_s / max(1, rounds)
    tcp = [loopback_tcp(limit_s=each) for _ in range(rounds)]
    sf = [sendfile(directory, limit_s=each) for _ in range(rounds)]
    writes = [sequential_write(directory) for _ in range(rounds)]
    return [
        _median(tcp),
        _median(sf),
        _median([w[0] for w in writes]),
        _median([w[1] for w in writes]),
    ]


def lines(directory: str | None = None, limit_s: float = DEFAULT_SECONDS) -> list[str]:
    out = [
        f"ceiling, {c.name}: {c.mb_per_s:,.0f} MB/s (median of {ROUNDS}, {low:,.0f}-{high:,.0f})"
        for c, low, high in measure(directory, limit_s)
    ]
    out.append(f"ceiling, write 4 KiB + fsync: {fsync_latency(directory):.2f} ms median")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ceilings", description=__doc__.split("\n")[0])
    p.add_argument("--dir", help="directory for the file-based ceilings (default: the temp dir)")
    p.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="bound per ceiling")
    a = p.parse_args(argv)
    for line in lines(a.dir, a.seconds):
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
