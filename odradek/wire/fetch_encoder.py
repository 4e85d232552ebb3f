"""Fetch response encoder (key 1, v0-18) that splices file regions instead of copying records.

Everything but `records` is small and built here with struct; each partition's records are a
list of `bytes | FileRegion | ChunkedPiece` pieces that the connection writes, sends with
sendfile, or (v0-3 down-conversion) makes while writing. Layout (flexible = v12+, where
strings/arrays are compact and sections end in tagged fields):

    int32 throttle_time_ms            v1+
    int16 error_code                  v7+
    int32 session_id                  v7+
    array responses
      string topic (v4-12) | uuid topic_id (v13+)
      array partitions
        int32 partition_index; int16 error_code; int64 high_watermark
        int64 last_stable_offset (v4+); int64 log_start_offset (v5+)
        nullable array aborted_transactions (v4+) of (int64 producer_id, int64 first_offset)
        int32 preferred_read_replica (v11+)
        records: int32 size (non-flexible) | uvarint size+1 (flexible), then the bytes
        tagged fields (v12+): 0 diverging_epoch, 1 current_leader, 2 snapshot_id
      tagged fields
    tagged fields (v16+ tag 0 node_endpoints: array of (int32 node_id, string host, int32 port,
    nullable string rack, tagged fields), KIP-951)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.wire.frames import frame
from odradek.wire.header import response_header
from odradek.wire.regions import ChunkedPiece, FileRegion, Piece, piece_length
from odradek.wire.varint import encode_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_HEAD = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qq")
_LEADER = struct.Struct(">ii")


@dataclass(slots=True)
class PartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: list[Piece] = field(default_factory=list)
    current_leader: tuple[int, int] | None = None

    @property
    def records_size(self) -> int:
        return sum(piece_length(p) for p in self.records)


@dataclass(slots=True)
class TopicData:
    name: str
    topic_id: bytes  # 16 bytes
    partitions: list[PartitionData]


def _array_len(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _I32.pack(n)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _partition_head(p: PartitionData, version: int, flexible: bool) -> bytearray:
    out = bytearray(
        _PART_HEAD.pack(
            p.partition_index,
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
        )
    )
    if version < 5:
        del out[-8 if version == 4 else -16 :]  # v0-3: no last stable offset either
    aborted = p.aborted_transactions
    if version < 4:
        pass
    elif aborted is None:
        out += b"\x00" if flexible else b"\xff\xff\xff\xff"
    else:
        out += _array_len(len(aborted), flexible)
        for producer_id, first_offset in aborted:
            out += _ABORTED.pack(producer_id, first_offset)
            if flexible:
                out += b"\x00"
    if version >= 11:
        out += _I32.pack(p.preferred_read_replica)
    size = p.records_size
    out += encode_uvarint(size + 1) if flexible else _I32.pack(size)
    return out


def _partition_tail(p: PartitionData, flexible: bool) -> bytes:
    if not flexible:
        return b""
    if p.current_leader is None:
        return b"\x00"
    # one tagged field: tag 1, size 9, LeaderIdAndEpoch + its own empty tagged section
    return b"\x01\x01\x09" + _LEADER.pack(*p.current_leader) + b"\x00"


def _node_endpoints(nodes: list[tuple[int, str, int, str | None]]) -> bytes:
    """The top-level tagged section holding NodeEndpoints (tag 0)."""
    body = bytearray(encode_uvarint(len(nodes) + 1))
    for node_id, host, port, rack in nodes:
        body += _I32.pack(node_id) + _string(host, True) + _I32.pack(port)
        body += b"\x00" if rack is None else _string(rack, True)
        body += b"\x00"
    return b"\x01\x00" + encode_uvarint(len(body)) + bytes(body)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: list[TopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: list[tuple[int, str, int, str | None]] | None = None,
) -> list[Piece]:
    """Encode a whole framed Fetch response as pieces; regions are left for sendfile."""
    flexible = version >= 12
    pieces: list[Piece] = []
    cur = bytearray(response_header(correlation_id, flexible))
    if version >= 1:
        cur += _I32.pack(throttle_time_ms)
    if version >= 7:
        cur += _I16.pack(error_code) + _I32.pack(session_id)
    cur += _array_len(len(topics), flexible)
    for topic in topics:
        cur += topic.topic_id if version >= 13 else _string(topic.name, flexible)
        cur += _array_len(len(topic.partitions), flexible)
        for p in topic.partitions:
            cur += _partition_head(p, version, flexible)
            for piece in p.records:
                if isinstance(piece, (FileRegion, ChunkedPiece)):
                    if piece.length:
                        pieces.append(bytes(cur))
                        cur = bytearray()
                        pieces.append(piece)
                else:
                    cur += piece
            cur += _partition_tail(p, flexible)
        if flexible:
            cur += b"\x00"
    if version >= 16 and node_endpoints:
        cur += _node_endpoints(node_endpoints)
    elif flexible:
        cur += b"\x00"
    pieces.append(bytes(cur))
    total = sum(piece_length(p) for p in pieces)
    pieces.insert(0, frame(total))
    return pieces
