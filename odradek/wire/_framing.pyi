"""Type stub for the optional C framing walk (odradek/wire/_framing.c, built by setup.py)."""

from odradek.wire.batch import Buffer

def check_framing(data: Buffer, pos: int, end: int, count: int, /) -> None:
    """Walk `count` records in data[pos:end] as Kafka's DefaultRecord.readFrom; see records.py."""
