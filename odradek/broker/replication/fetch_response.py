"""A follower's reading of a Fetch v12 response, in place.

The replica fetcher needs, per partition, the error, the high watermark, the log start offset and
the record bytes; it appends those bytes to its log as they are. kafka-python's decoder would
build an object per field and copy the records out of the frame; this walks the frame
(`PeerClient.request_raw`) once and hands back the records as a `memoryview` of it: the bytes
read from the socket are the bytes written to the log. Aborted transactions and tagged fields
are skipped (a follower keeps its own transaction index from the markers it appends).

Layout (FetchResponse.json, flexible from v12): response header v1 (correlation id, tagged
fields), throttle_time_ms, error_code, session_id, then compact arrays of topics (compact string
name) and partitions (index, error, high watermark, last stable offset, log start offset, aborted
transactions, preferred read replica, records as compact nullable bytes), each ending in tagged
fields.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_HEAD = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start
_ABORTED = 16  # producer id, first offset (int64 each), then tagged fields


class MalformedResponse(ValueError):
    """The frame does not parse as a Fetch v12 response."""


@dataclass(slots=True)
class PartitionAnswer:
    topic: str
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None


@dataclass(slots=True)
class FetchAnswer:
    error_code: int
    session_id: int
    partitions: list[PartitionAnswer]


class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise MalformedResponse(f"truncated at byte {pos} (needs {n} more)")
        self.pos = pos + n
        return pos

    def uvarint(self) -> int:
        value = shift = 0
        buf, pos, end = self.buf, self.pos, self.end
        while True:
            if pos >= end:
                raise MalformedResponse("truncated varint")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise MalformedResponse("varint over 5 bytes")
        self.pos = pos
        return value

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.need(self.uvarint())


def parse_fetch_v12(frame: bytes | bytearray | memoryview) -> FetchAnswer:
    """The answer in `frame` (response header included); raises MalformedResponse."""
    buf = memoryview(frame)
    r = _Reader(buf, 0)
    r.need(4)  # correlation id: checked by the client
    r.skip_tags()
    r.need(4)  # throttle_time_ms
    (error_code,) = _I16.unpack_from(buf, r.need(2))
    (session_id,) = _I32.unpack_from(buf, r.need(4))
    out: list[PartitionAnswer] = []
    for _ in range(r.uvarint() - 1):
        n = r.uvarint() - 1
        start = r.need(n)
        topic = bytes(buf[start : start + n]).decode("utf-8", "replace")
        for _ in range(r.uvarint() - 1):
            index, error, hw, lso, log_start = _PART_HEAD.unpack_from(buf, r.need(_PART_HEAD.size))
            aborted = r.uvarint() - 1  # -1: null
            for _ in range(max(aborted, 0)):
                r.need(_ABORTED)
                r.skip_tags()
            r.need(4)  # preferred read replica
            size = r.uvarint() - 1
            records = None
            if size >= 0:
                at = r.need(size)
                records = buf[at : at + size]
            r.skip_tags()
            out.append(PartitionAnswer(topic, index, error, hw, lso, log_start, records))
        r.skip_tags()
    r.skip_tags()
    return FetchAnswer(error_code, session_id, out)
