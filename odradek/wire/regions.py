"""Response pieces other than bytes: a slice of a segment file that the connection sends with
sendfile, and bytes produced while they are written (Fetch v0-3 down-conversion)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(slots=True, frozen=True)
class FileRegion:
    """`length` bytes of `file` from `position`; the file stays open while a region holds it."""

    file: BinaryIO
    position: int
    length: int


class ChunkedPiece:
    """`length` bytes made while the connection writes them: `chunks()` yields exactly that
    many, a bounded chunk at a time (the connection waits for the socket between chunks)."""

    __slots__ = ()
    length: int

    def chunks(self) -> Iterator[bytes]:
        raise NotImplementedError


Piece = bytes | FileRegion | ChunkedPiece


def piece_length(piece: Piece) -> int:
    return len(piece) if isinstance(piece, bytes) else piece.length
