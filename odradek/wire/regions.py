"""File regions: a slice of a segment file that the connection sends with sendfile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO


@dataclass(slots=True, frozen=True)
class FileRegion:
    """`length` bytes of `file` from `position`; the file stays open while a region holds it."""

    file: BinaryIO
    position: int
    length: int


Piece = bytes | FileRegion
