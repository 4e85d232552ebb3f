"""Batches of repetitive JSON log lines, as a log shipper produces them, for tests and bench.

Access-log lines of one service (a timestamp that moves every 1,000 lines, four hosts and paths,
eight latencies) compress about 180x with gzip, 150x with lz4, thousands of times with zstd and
19x with snappy (near its 21x ceiling): ordinary data whose batches inflate far past the
compressed size. Sections are built and compressed chunk by chunk, so a batch inflating to
hundreds of megabytes is built without holding them.

`stream_bomb_batch` is the hostile counterpart: one valid record whose value is `mib` MiB of
zeros, so a validator must inflate all of it before it can answer; `raw_snappy_bomb_batch` the
same as librdkafka frames snappy (one raw block).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator

import cramjam
import lz4.frame
import zstandard

from odradek.testing.hostile_batches import raw_batch
from odradek.wire.compression import GZIP, LZ4, SNAPPY, XERIAL_MAGIC, ZSTD
from odradek.wire.records import write_varint

_PATHS = ("/api/v1/orders", "/api/v1/users", "/api/v1/cart", "/healthz")
_XERIAL_BLOCK = 32 * 1024


def json_log_lines(start: int, n: int) -> bytes:
    """Lines `start` .. `start + n - 1` of the log, each a JSON object and a newline."""
    return "".join(
        f'{{"@timestamp":"2024-05-01T{i // 3600000 % 24:02d}:{i // 60000 % 60:02d}:'
        f'{i // 1000 % 60:02d}.000Z","level":"INFO","logger":"http.access",'
        f'"service":"checkout","host":"web-{i % 4}","method":"GET","path":"{_PATHS[i % 4]}",'
        f'"status":200,"latency_ms":{3 + i % 8},"msg":"request completed"}}\n'
        for i in range(start, start + n)
    ).encode()


def json_log_values(total_bytes: int, lines_per_value: int = 256) -> Iterator[bytes]:
    """Record values of `lines_per_value` lines each, about `total_bytes` in all."""
    line = 0
    made = 0
    while made < total_bytes:
        value = json_log_lines(line, lines_per_value)
        line += lines_per_value
        made += len(value)
        yield value


def _encoder(codec: int) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    """(compress a piece, finish) for `codec`, in the framing Kafka's clients write."""
    if codec == GZIP:
        z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return z.compress, z.flush
    if codec == ZSTD:
        c = zstandard.ZstdCompressor(level=3).compressobj()
        return c.compress, c.flush
    if codec == LZ4:
        f = lz4.frame.LZ4FrameCompressor(block_linked=False)
        head: list[bytes] = [f.begin()]

        def lz4_piece(data: bytes) -> bytes:
            out: bytes = (head.pop() if head else b"") + f.compress(data)
            return out

        def lz4_end() -> bytes:
            out: bytes = (head.pop() if head else b"") + f.flush()
            return out

        return lz4_piece, lz4_end
    if codec == SNAPPY:
        pending = bytearray(XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big"))
        buf = bytearray()

        def blocks(final: bool) -> bytes:
            out = bytes(pending)
            pending.clear()
            while len(buf) >= _XERIAL_BLOCK or (final and buf):
                block = bytes(cramjam.snappy.compress_raw(bytes(buf[:_XERIAL_BLOCK])))
                del buf[:_XERIAL_BLOCK]
                out += len(block).to_bytes(4, "big") + block
            return out

        def snappy_piece(data: bytes) -> bytes:
            buf.extend(data)
            return blocks(False)

        return snappy_piece, lambda: blocks(True)
    raise ValueError(f"no encoder for codec {codec}")


def _record_head(index: int, value_length: int) -> bytes:
    """A record's bytes before its value: null key, no headers (the value follows, then 0)."""
    body = bytearray(b"\x00\x00")  # attributes, timestamp delta
    write_varint(body, index)
    write_varint(body, -1)
    write_varint(body, value_length)
    out = bytearray()
    write_varint(out, len(body) + value_length + 1)
    return bytes(out + body)


def compressed_section(codec: int, values: Iterator[bytes]) -> tuple[bytes, int, int]:
    """(the compressed records section of `values`, their count, its inflated size)."""
    piece, finish = _encoder(codec)
    parts: list[bytes] = []
    count = 0
    inflated = 0
    for value in values:
        raw = _record_head(count, len(value)) + value + b"\x00"
        parts.append(piece(raw))
        inflated += len(raw)
        count += 1
    parts.append(finish())
    return b"".join(parts), count, inflated


def json_log_batch(codec: int, total_bytes: int) -> tuple[bytes, int, int]:
    """(a batch of JSON log lines inflating to about `total_bytes`, its record count, the exact
    inflated size)."""
    section, count, inflated = compressed_section(codec, json_log_values(total_bytes))
    return raw_batch(section, count, codec=codec), count, inflated


def stream_bomb_batch(codec: int, mib: int) -> bytes:
    """A batch of one valid record whose value is `mib` MiB of zeros (at most 2047)."""
    size = mib << 20
    piece, finish = _encoder(codec)
    zeros = bytes(1 << 20)
    parts = [piece(_record_head(0, size))]
    parts += [piece(zeros) for _ in range(mib)]
    parts.append(piece(b"\x00"))
    parts.append(finish())
    return raw_batch(b"".join(parts), 1, codec=codec)


def raw_snappy_bomb_batch(mib: int) -> bytes:
    """A batch of one valid record of `mib` MiB of zeros as one raw snappy block, librdkafka's
    snappy framing (about 21x: 20 MiB fit the default max.message.bytes)."""
    size = mib << 20
    raw = _record_head(0, size) + bytes(size) + b"\x00"
    return raw_batch(bytes(cramjam.snappy.compress_raw(raw)), 1, codec=SNAPPY)
