"""Message sets of magic 0 and 1 (Kafka's LegacyRecord / AbstractLegacyRecordBatch), both ways.

Old clients (Produce v0-2, Fetch v0-3) speak these formats; the log only holds RecordBatch v2.
Produce up-converts with `decode_message_set` (odradek/log/validator.py's legacy path); Fetch
v0-3 down-converts with `encode_message_set`. Sans-IO: bytes in, bytes or records out.

API (stable, used by the produce and fetch paths):

    decode_message_set(buf, max_size) -> list[Message]
        Every record of a message set, deep: compressed wrappers are opened (bounded by
        `max_size` decompressed bytes each). Offsets are absolute as Kafka's deep iterator
        gives them (magic 1 inner offsets are relative to the wrapper), and a magic-1 record
        inside a LogAppendTime wrapper carries the wrapper's timestamp. Raises
        CorruptRecordError (bad CRC, truncated or undersized message, unreadable compressed
        value: Kafka's CORRUPT_MESSAGE) or its subclass InvalidRecordError (key/value lengths
        that do not fill the message, e.g. a magic-0 message laid out with a timestamp; magics
        that differ; a compressed inner message; an empty or null wrapper; zstd; a magic-1
        wrapper offset below its last inner offset; inner offsets that go backwards:
        INVALID_RECORD).
    iter_messages(buf) -> Iterator[Message]
        The shallow walk: each outer message (a wrapper is one message), framing and CRC
        checked, nothing decompressed.
    iter_inner(wrapper, max_size) -> Iterator[Message]
        A wrapper's inner messages one at a time, as written (magic 1: relative offsets); its
        checks as decode_message_set's, the end-of-set ones raised after the last message.
    encode_message_set(records, magic, codec=0, *, log_append_time=-1) -> bytes
        `records`: (offset, timestamp, key, value) tuples with absolute offsets, ascending.
        codec 0: one message per record at its own offset. gzip/snappy/lz4: one wrapper
        message holding them all (the wrapper's offset is the last record's; magic-1 inner
        offsets are relative to the first record, magic-0 ones absolute, as Kafka's
        MemoryRecordsBuilder writes them; magic-0 lz4 with Kafka's broken frame header
        checksum, KAFKA-3160). Magic 0 drops timestamps. `log_append_time` >= 0 (magic 1):
        every message, wrapper included, is marked LogAppendTime with that timestamp, as
        Kafka's down-conversion of a LogAppendTime batch; otherwise CreateTime with each
        record's timestamp and the wrapper's the largest. zstd (codec 4) raises ValueError:
        the old formats cannot carry it (Fetch answers UNSUPPORTED_COMPRESSION_TYPE first).
    message_set_size(records, magic) -> int
        Bytes `encode_message_set` writes for these records uncompressed.
    write_message(out, offset, magic, attributes, timestamp, key, value)
        Appends one message (size and CRC computed) to a bytearray.

One message, big-endian; a message set is messages back to back:

    offset  size  field
    0       8     offset        int64   absolute; a magic-1 wrapper's is its last inner offset
    8       4     message_size  int32   bytes after this field
    12      4     crc           uint32  CRC-32 (zlib's) of bytes [16, 12 + message_size)
    16      1     magic         int8    0 or 1
    17      1     attributes    int8    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4);
                                        bit 3 timestamp type (magic 1: 0 CreateTime,
                                        1 LogAppendTime)
    18      8     timestamp     int64   magic 1 only
    ..      4     key_length    int32   -1 for a null key
    ..      n     key
    ..      4     value_length  int32   -1 for a null value
    ..      n     value                 a wrapper's value: the compressed inner message set

Magic 0 LZ4 wrappers carry Kafka 0.8/0.9's wrong frame header checksum (xxh32 over the frame
magic too, KAFKA-3160): Kafka ignores that byte when reading magic 0 and writes the wrong one;
so do we.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from odradek.wire.batch import CorruptRecordError, InvalidRecordError
from odradek.wire.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
)

MAGIC_V0 = 0
MAGIC_V1 = 1
NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

LOG_OVERHEAD = 12  # offset + message_size
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
# bytes of a message after message_size, without key and value: crc, magic, attributes,
# (timestamp), key_length, value_length
RECORD_OVERHEAD = {MAGIC_V0: 14, MAGIC_V1: 22}
MAGIC_OFFSET = 16  # same position as a RecordBatch v2's magic

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_HEAD_SIZE = _HEAD.size  # 18
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

LegacyRecord = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


@dataclass(slots=True)
class Message:
    """One message of a magic 0/1 message set."""

    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME or LOG_APPEND_TIME (magic 1); NO_TIMESTAMP for magic 0."""
        if self.magic == MAGIC_V0:
            return NO_TIMESTAMP
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


# -- reading -----------------------------------------------------------------------------------


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """The magic byte of the message or batch at `pos` (None if the buffer is too short)."""
    if len(buf) - pos <= MAGIC_OFFSET:
        return None
    magic: int = buf[pos + MAGIC_OFFSET]
    return magic


def _read_bytes(
    buf: bytes | bytearray | memoryview, pos: int, end: int, what: str, where: str
) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise InvalidRecordError(f"{where}: {what} length runs past the message")
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise InvalidRecordError(f"{where}: invalid {what} length {length}")
        return None, pos
    if length > end - pos:
        raise InvalidRecordError(
            f"{where}: {what} of {length} bytes runs past the message ({end - pos} bytes left)"
        )
    return bytes(buf[pos : pos + length]), pos + length


def read_message(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[Message, int]:
    """The message at `pos` (checked: size, CRC, magic 0/1, key/value framing) and where the
    next one starts."""
    if end - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated message header at {pos}")
    (size,) = _INT32.unpack_from(buf, pos + 8)
    if size < RECORD_OVERHEAD[MAGIC_V0]:
        raise CorruptRecordError(
            f"message at {pos}: size {size} is less than the minimum record overhead "
            f"({RECORD_OVERHEAD[MAGIC_V0]})"
        )
    stop = pos + LOG_OVERHEAD + size
    if stop > end:
        raise CorruptRecordError(f"truncated message at {pos}: {end - pos} bytes of {size + 12}")
    offset, _size, crc, magic, attributes = _HEAD.unpack_from(buf, pos)
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise InvalidRecordError(f"message at {pos}: magic {magic} in a magic 0/1 message set")
    if size < RECORD_OVERHEAD[magic]:
        raise CorruptRecordError(
            f"message at {pos}: size {size} is less than the magic {magic} record overhead "
            f"({RECORD_OVERHEAD[magic]})"
        )
    if zlib.crc32(memoryview(buf)[pos + 16 : stop]) != crc:
        raise CorruptRecordError(f"message at {pos}: CRC mismatch (stored {crc})")
    p = pos + _HEAD_SIZE
    if magic == MAGIC_V1:
        (timestamp,) = _INT64.unpack_from(buf, p)
        p += 8
    else:
        if attributes & TIMESTAMP_TYPE_MASK:
            raise InvalidRecordError(
                f"message at {pos}: magic 0 message with a timestamp type (attributes "
                f"{attributes:#x}); magic 0 has no timestamp"
            )
        timestamp = NO_TIMESTAMP
    where = f"magic {magic} message at {pos}"
    key, p = _read_bytes(buf, p, stop, "key", where)
    value, p = _read_bytes(buf, p, stop, "value", where)
    if p != stop:
        raise InvalidRecordError(
            f"message at {pos}: {stop - p} bytes left after the value of a magic {magic} "
            "message (its key and value lengths do not fill it)"
        )
    return Message(offset, magic, attributes, timestamp, key, value), stop


def iter_messages(buf: bytes | bytearray | memoryview) -> Iterator[Message]:
    """The outer messages of a message set, each checked (see `read_message`)."""
    pos = 0
    end = len(buf)
    while pos < end:
        message, pos = read_message(buf, pos, end)
        yield message


def _fix_lz4_header_checksum(data: bytes) -> bytes:
    """A magic-0 LZ4 frame with its header checksum byte made right (Kafka ignores it)."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        return data  # not a frame: the decoder says so
    flg = data[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= hc_pos:
        return data
    fixed = (xxh32(data[4:hc_pos]) >> 8) & 0xFF
    if data[hc_pos] == fixed:
        return data
    return data[:hc_pos] + bytes((fixed,)) + data[hc_pos + 1 :]


def iter_inner(wrapper: Message, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Message]:
    """The messages inside a compressed wrapper one at a time, as written (relative offsets for
    magic 1): the checks of `inner_messages`, the last ones (an empty set, a magic-1 wrapper
    offset below the last inner offset) raised after the last message."""
    codec = wrapper.codec
    if codec == ZSTD or codec not in (GZIP, SNAPPY, LZ4):
        raise InvalidRecordError(
            f"invalid compression codec {codec} for a magic {wrapper.magic} wrapper message"
        )
    if wrapper.value is None:
        raise InvalidRecordError(
            f"found invalid compressed record set with null value (magic = {wrapper.magic})"
        )
    data = wrapper.value
    if codec == LZ4 and wrapper.magic == MAGIC_V0:
        data = _fix_lz4_header_checksum(data)
    section = decompress(codec, data, max_size)
    pos = 0
    end = len(section)
    last = None
    while pos < end:
        message, pos = read_message(section, pos, end)
        if message.magic != wrapper.magic:
            raise InvalidRecordError(
                f"compressed message magic {message.magic} does not match wrapper magic "
                f"{wrapper.magic}"
            )
        if message.codec:
            raise InvalidRecordError("inner messages must not be compressed")
        if last is not None and message.offset < last:
            raise InvalidRecordError(
                f"inner offsets out of order in a compressed message set: {message.offset} "
                f"after {last}"
            )
        last = message.offset
        yield message
    if last is None:
        raise InvalidRecordError("found invalid compressed record set with no inner records")
    if wrapper.magic == MAGIC_V1 and wrapper.offset != 0 and wrapper.offset < last:
        raise InvalidRecordError(
            f"found invalid wrapper offset in compressed v1 message set, wrapper offset "
            f"'{wrapper.offset}' is less than the last inner message offset '{last}' and it "
            "is not zero."
        )


def inner_messages(wrapper: Message, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> list[Message]:
    """The messages inside a compressed wrapper, as written (relative offsets for magic 1)."""
    return list(iter_inner(wrapper, max_size))


def decode_message_set(
    buf: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> list[Message]:
    """Every record of a message set, wrappers opened; see the module docstring."""
    out: list[Message] = []
    for outer in iter_messages(buf):
        if not outer.codec:
            out.append(outer)
            continue
        inner = inner_messages(outer, max_size)
        if outer.magic == MAGIC_V1:
            # librdkafka once sent wrapper offset 0: then the inner offsets are taken as they are
            base = 0 if outer.offset == 0 else outer.offset - inner[-1].offset
            log_append = outer.attributes & TIMESTAMP_TYPE_MASK
            for m in inner:
                m.offset += base
                if log_append:
                    m.timestamp = outer.timestamp
                    m.attributes |= TIMESTAMP_TYPE_MASK
        out.extend(inner)
    return out


# -- writing -----------------------------------------------------------------------------------


def write_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
) -> None:
    """Append one message to `out`, its size and CRC computed (for a wrapper, `value` is the
    compressed inner set and `attributes` carries the codec)."""
    start = len(out)
    out += _HEAD.pack(offset, 0, 0, magic, attributes)
    if magic == MAGIC_V1:
        out += _INT64.pack(timestamp)
    for part in (key, value):
        if part is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _INT32.pack(len(part))
            out += part
    _INT32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    struct.pack_into(">I", out, start + 12, zlib.crc32(memoryview(out)[start + 16 :]))


def message_set_size(records: Sequence[LegacyRecord], magic: int) -> int:
    """Bytes of the uncompressed message set `encode_message_set` writes for `records`."""
    per = LOG_OVERHEAD + RECORD_OVERHEAD[magic]
    return sum(
        per + (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
        for _o, _t, k, v in records
    )


def encode_message_set(
    records: Sequence[LegacyRecord],
    magic: int,
    codec: int = NONE,
    *,
    log_append_time: int = NO_TIMESTAMP,
) -> bytes:
    """A magic 0/1 message set of `records`; see the module docstring."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"magic {magic} is not a legacy message format")
    if codec not in (NONE, GZIP, SNAPPY, LZ4):
        raise ValueError(f"codec {codec} cannot be written in magic {magic}")
    log_append = magic == MAGIC_V1 and log_append_time >= 0
    attributes = TIMESTAMP_TYPE_MASK if log_append else 0
    out = bytearray()
    if not records:
        return b""
    if codec == NONE:
        for offset, timestamp, key, value in records:
            ts = log_append_time if log_append else timestamp
            write_message(out, offset, magic, attributes, ts, key, value)
        return bytes(out)
    first = records[0][0]
    inner = bytearray()
    max_timestamp = NO_TIMESTAMP
    for offset, timestamp, key, value in records:
        ts = log_append_time if log_append else timestamp
        max_timestamp = max(max_timestamp, ts)
        inner_offset = offset - first if magic == MAGIC_V1 else offset
        write_message(inner, inner_offset, magic, attributes, ts, key, value)
    payload = compress(codec, inner)
    if codec == LZ4 and magic == MAGIC_V0:
        payload = _LZ4_BROKEN_HEADER + payload[len(_LZ4_BROKEN_HEADER) :]
    write_message(out, records[-1][0], magic, attributes | codec, max_timestamp, None, payload)
    return bytes(out)


# -- xxh32, for the LZ4 frame header checksum -------------------------------------------------

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF
_U32LE = struct.Struct("<I")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH32 of `data` (the LZ4 frame format's header checksum is its second byte)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                (word,) = _U32LE.unpack_from(data, i)
                v[lane] = (_rotl((v[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (word,) = _U32LE.unpack_from(data, i)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
# odradek's lz4 frames start magic, FLG 0x60, BD 0x40, HC: the broken HC hashes the magic too
_LZ4_DESCRIPTOR = b"\x60\x40"
_LZ4_BROKEN_HEADER = (
    _LZ4_MAGIC + _LZ4_DESCRIPTOR + bytes(((xxh32(_LZ4_MAGIC + _LZ4_DESCRIPTOR) >> 8) & 0xFF,))
)
