"""A consumer that does not look at records: Fetch v4 requests over one socket, responses read
whole into one buffer and only the record-batch headers walked (base offset, length, last offset
delta, record count) to know where to fetch next (issue 17).

librdkafka's consumer spends CPU on every record it hands out, so at small values it, not the
broker, sets the consume rate on a 2-core machine. This row shows what the broker serves when
the client costs almost nothing per record: the difference between the two rows is the client.
Rates run from the first response to the last, like the other consume rows.
"""

from __future__ import annotations

import socket
import struct
import time

from bench.workloads import PhaseError, PhaseResult

FETCH = 1
FETCH_VERSION = 4  # not flexible; isolation level; no sessions
MAX_BYTES = 64 * 1_048_576
PARTITION_MAX_BYTES = 32 * 1_048_576
MAX_WAIT_MS = 100
CLIENT_ID = b"odradek-rawfetch"
_BATCH_HEADER = 61  # v2 record batch header bytes, up to and including the record count


def _fetch_request(correlation: int, topic: bytes, offsets: dict[int, int]) -> bytes:
    body = struct.pack(">iiiib", -1, MAX_WAIT_MS, 1, MAX_BYTES, 0)
    body += struct.pack(">ih", 1, len(topic)) + topic + struct.pack(">i", len(offsets))
    for partition, offset in offsets.items():
        body += struct.pack(">iqi", partition, offset, PARTITION_MAX_BYTES)
    header = struct.pack(">hhih", FETCH, FETCH_VERSION, correlation, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(header) + len(body)) + header + body


def _read_exact(sock: socket.socket, buf: bytearray, size: int) -> memoryview:
    view = memoryview(buf)[:size]
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise PhaseError("raw fetch: the broker closed the connection")
        got += n
    return view


def _walk(view: memoryview, offsets: dict[int, int]) -> tuple[int, int]:
    """Parse a Fetch v4 response body; advance `offsets`; (records, record-batch bytes)."""
    pos = 4 + 4  # correlation id, throttle time
    (topics,) = struct.unpack_from(">i", view, pos)
    pos += 4
    records = nbytes = 0
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", view, pos)
        pos += 2 + name_len
        (parts,) = struct.unpack_from(">i", view, pos)
        pos += 4
        for _ in range(parts):
            partition, error = struct.unpack_from(">ih", view, pos)
            pos += 4 + 2 + 8 + 8
            if error:
                raise PhaseError(f"raw fetch: partition {partition} answered error {error}")
            (aborted,) = struct.unpack_from(">i", view, pos)
            pos += 4 + max(0, aborted) * 16
            (size,) = struct.unpack_from(">i", view, pos)
            pos += 4
            end = pos + max(0, size)
            p = pos
            while p + _BATCH_HEADER <= end:
                base, length = struct.unpack_from(">qi", view, p)
                if p + 12 + length > end:
                    break  # a partial batch at the end of the response
                (delta,) = struct.unpack_from(">i", view, p + 23)
                (count,) = struct.unpack_from(">i", view, p + 57)
                records += count
                nbytes += 12 + length
                offsets[partition] = base + delta + 1
                p += 12 + length
            pos = end
    return records, nbytes


def consume(
    bootstrap: str, topic: str, partitions: int, records: int, timeout_s: float = 300.0
) -> tuple[PhaseResult, int]:
    """Fetch partitions 0..P-1 from offset 0 until `records` arrived: (result, batch bytes).
    The result's value_bytes are the record-batch bytes on the wire (headers included)."""
    host, _, port = bootstrap.rpartition(":")
    offsets = {p: 0 for p in range(partitions)}
    buf = bytearray(MAX_BYTES + 1_048_576)
    got = wire = 0
    first_got = first_wire = 0
    correlation = 0
    name = topic.encode()
    started = time.perf_counter()
    deadline = started + timeout_s
    first_at = last_at = None
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while got < records:
            if time.perf_counter() > deadline:
                break
            correlation += 1
            sock.sendall(_fetch_request(correlation, name, offsets))
            (size,) = struct.unpack(">i", _read_exact(sock, buf, 4))
            if size > len(buf):
                buf = bytearray(size)
            view = _read_exact(sock, buf, size)
            n, b = _walk(view, offsets)
            view.release()
            now = time.perf_counter()
            if n:
                got += n
                wire += b
                last_at = now
                if first_at is None:
                    first_at, first_got, first_wire = now, got, wire
    if first_at is None or last_at is None or got == first_got:
        elapsed = (last_at or time.perf_counter()) - started
        measured = (got, wire)
    else:
        elapsed = last_at - first_at
        measured = (got - first_got, wire - first_wire)
    result = PhaseResult(
        records=got,
        value_bytes=wire,
        elapsed_s=elapsed,
        errors=0,
        client_errors=0,
        measured_records=measured[0],
        measured_bytes=measured[1],
        first_record_s=None if first_at is None else first_at - started,
    )
    return result, wire
