"""Type stub for the optional C framing walk (odradek/wire/_framing.c, built by setup.py)."""

from odradek.wire.batch import Buffer

def check_framing(data: Buffer, pos: int, end: int, count: int, /) -> None:
    """Walk `count` records in data[pos:end] as Kafka's DefaultRecord.readFrom; see records.py."""

def walk_window(data: Buffer, pos: int, end: int, first: int, count: int, /) -> tuple[int, int]:
    """The whole records of data[pos:end] from record `first`: (end of the last, how many)."""
