"""The records of a compressed batch walked as a stream, as Kafka's LogValidator iterates
DefaultRecordBatch.skipKeyValueIterator: every record's framing checked (records.walk_window,
the checks of DefaultRecord.readFrom), nothing kept but a bounded window.

Decompressed bytes arrive `READ_SIZE` at a time (streams.open_inflater) into a window. The C
walk passes the records that lie whole in it; the window then keeps only the record cut at its
end. A record longer than `LONG_RECORD` is not gathered: its key and value are read through and
dropped (Kafka's skipBytes), and only its headers, which must fit `LONG_RECORD`, are gathered
and walked. So a batch costs about READ_SIZE + LONG_RECORD bytes however far it inflates.

After the declared count, Kafka reads one more byte and refuses the batch if there is one
("Incorrect declared batch size, records still remaining"): the same here, so trailing data is
never inflated past that byte.

`step(budget)` advances by about `budget` decompressed bytes and says whether the walk is over,
so a caller can walk the head of a batch on the event loop and hand the rest to a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

from odradek.wire.batch import CorruptRecordError, InvalidRecordError
from odradek.wire.records import read_varint, read_varlong, walk_window, write_varint
from odradek.wire.streams import Inflater

READ_SIZE = 1 << 20
LONG_RECORD = 4 << 20

_MIN_RECORD_BODY = 6


class _Ended(Inflater):
    def read(self, n: int) -> bytes | memoryview:
        return b""


_ENDED = _Ended()


class StreamWalk:
    """Walk `count` records from `source`; `sink`, when given, sees every decompressed byte."""

    def __init__(
        self,
        source: Inflater,
        count: int,
        sink: Callable[[bytes | memoryview], None] | None = None,
    ) -> None:
        if count <= 0:
            raise InvalidRecordError(f"invalid record count {count}")
        self._src = source
        self._count = count
        self._sink = sink
        self._index = 0  # records walked
        self._buf: bytes | memoryview | bytearray = b""
        self._pos = 0
        self.inflated = 0  # decompressed bytes read so far
        self.done = False
        self._long: Generator[None, None, None] | None = None  # a long record being read through

    def step(self, budget: int | None = None) -> bool:
        """Walk on until the end or until about `budget` more bytes were inflated (None: to the
        end); True once every record is walked. Raises InvalidRecordError (bad framing, a count
        that does not match) or CorruptRecordError (a stream that cannot be read)."""
        start = self.inflated
        while not self.done:
            if budget is not None:
                left = budget - (self.inflated - start)
                if left <= 0 or self._src.upcoming() > left:
                    return False
            self._advance()
        return True

    def close(self) -> None:
        """Let go of the stream, its decompressor and window (a walk given up half way: the
        long-record generator refers back to this walk, so only this frees them at once)."""
        if self._long is not None:
            self._long.close()
            self._long = None
        self._buf = b""
        self._src = _ENDED

    def _read(self, n: int) -> bytes | memoryview:
        chunk = self._src.read(n)
        if chunk:
            self.inflated += len(chunk)
            if self._sink is not None:
                self._sink(chunk)
        return chunk

    def _advance(self) -> None:
        if self._long is not None:
            try:
                next(self._long)  # one more piece of it
            except StopIteration:
                self._long = None
            return
        buf = self._buf
        if self._pos < len(buf):
            self._pos, n = walk_window(
                buf, self._pos, len(buf), self._index, self._count - self._index
            )
            self._index += n
        if self._index == self._count:
            left = len(buf) - self._pos
            if left or self._read(1):
                raise InvalidRecordError(
                    f"{left or 'some'} bytes left after the {self._count} declared records"
                )
            self.done = True
            return
        length = self._cut_length()
        if length is not None and length > LONG_RECORD:
            self._long = self._long_record()
            return
        chunk = self._read(READ_SIZE)
        if not chunk:
            raise InvalidRecordError("record data ends before the declared records")
        if self._pos >= len(buf):
            self._buf, self._pos = chunk, 0
            return
        window = bytearray(memoryview(buf)[self._pos :])
        window += chunk
        self._buf, self._pos = window, 0

    def _cut_length(self) -> int | None:
        """The declared body length of the record cut at the window's end, if it is readable."""
        buf, pos = self._buf, self._pos
        if pos >= len(buf):
            return None
        try:
            length, _p = read_varint(buf, pos, len(buf))
        except CorruptRecordError:
            return None  # cut inside the length; the next read completes it
        return length

    # -- a record longer than the window ----------------------------------------------------

    def _need(self, n: int) -> None:
        """At least `n` bytes after the position in the window (fewer at the stream's end)."""
        while len(self._buf) - self._pos < n:
            chunk = self._read(max(READ_SIZE, n))
            if not chunk:
                return
            window = bytearray(memoryview(self._buf)[self._pos :])
            window += chunk
            self._buf, self._pos = window, 0

    def _varint(self, long: bool = False) -> int:
        self._need(10 if long else 5)
        buf = self._buf
        try:
            if long:
                value, self._pos = read_varlong(buf, self._pos, len(buf))
            else:
                value, self._pos = read_varint(buf, self._pos, len(buf))
        except CorruptRecordError as exc:
            raise InvalidRecordError(f"record {self._index}: {exc}") from None
        return value

    def _skip(self, n: int) -> Iterator[None]:
        """Drop `n` bytes of the stream (a key or value read through), pausing after each read."""
        while n > 0:
            here = min(n, len(self._buf) - self._pos)
            self._pos += here
            n -= here
            if n:
                chunk = self._read(min(n, READ_SIZE))
                if not chunk:
                    raise InvalidRecordError("record data ends before the declared records")
                self._buf, self._pos = chunk, 0
                yield

    def _offset(self) -> int:
        """Bytes of the stream read so far, as an absolute position."""
        return self.inflated - (len(self._buf) - self._pos)

    def _long_record(self) -> Generator[None, None, None]:
        """Walk a record longer than LONG_RECORD, pausing after each piece read (a generator,
        so that `step` keeps to its budget)."""
        index = self._index
        length = self._varint()
        start = self._offset()
        end = start + length
        self._need(1)
        yield from self._skip(1)  # attributes
        self._varint(long=True)  # timestamp delta
        delta = self._varint()
        if delta != index:
            raise InvalidRecordError(f"record {index} has offset delta {delta}")
        for field in ("key", "value"):
            n = self._varint()
            if n < -1:
                raise InvalidRecordError(f"record {index}: invalid {field} length {n}")
            if n > 0:
                if n >= end - self._offset():  # the header count must follow
                    raise InvalidRecordError(f"record {index}: key or value overruns the record")
                yield from self._skip(n)
        rest = end - self._offset()
        if rest <= 0:
            raise InvalidRecordError(f"record {index}: key or value overruns the record")
        if rest > LONG_RECORD:
            raise InvalidRecordError(
                f"record {index}: {rest} bytes of headers (more than {LONG_RECORD} are refused)"
            )
        # the headers, walked by the C walk as the only field of a record with null key and value
        self._need(rest)
        headers = memoryview(self._buf)[self._pos : self._pos + rest]
        if len(headers) < rest:
            raise InvalidRecordError("record data ends before the declared records")
        body = bytearray(b"\x00\x00")  # attributes, timestamp delta 0
        write_varint(body, index)
        body += b"\x01\x01"  # null key, null value
        record = bytearray()
        write_varint(record, len(body) + rest)
        record += body
        record += headers
        walk_window(record, 0, len(record), index, 1)
        self._pos += rest
        self._index = index + 1
