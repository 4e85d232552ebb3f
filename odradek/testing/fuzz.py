"""A seeded protocol fuzzer: valid requests for every advertised API, their mutations, and a
live driver that throws them at a broker and checks it survives.

Hostile input must get a Kafka error code or a closed connection, never a crash, a traceback,
unbounded memory or a frozen event loop (DESIGN.md, rules of the house; Kafka's own yardstick is
KAFKA-14063). The pieces:

- `sample_request(api_key, version)`: a well-formed request of any advertised key and version,
  built from Kafka's JSON message definitions (through `odradek.wire.protocol`) with one element
  in every array, short strings and a real record batch, so mutations reach nested fields.
- `null_field_bodies(api_key, version)`: the same request with a null (count -1) in each
  non-nullable array field, top-level and one level down.
- hostile values (`odradek.testing.hostile.random_request`): requests that decode, every field
  a value its schema allows and a handler may not expect (nulls, extreme integers, the zero id,
  32,767-byte names, duplicates), so the handlers and their response encoders are reached.
- `mutate(rng, payload)`: one of bit flips, truncations, changed length/count fields (-1, huge),
  random versions or keys, spliced bytes, garbage; `Mutation.frame_size` lies about the frame.
- `LiveFuzzer`: rounds of such requests over several connections (some sent in slow partial
  pieces), each round followed by checks: the broker answers a probe on every connection it kept
  open, a real client (confluent-kafka) still produces and consumes, nothing was logged with a
  traceback or at ERROR and no thread or finalizer failed (`TracebackCatcher`), and the
  process's anonymous memory stays under a bound. Round `r` of seed `s` always sends the
  same bytes (`round_plan`), so a failure replays from (seed, round).

Used by tests/wire/test_fuzz_decoders.py, tests/broker/test_live_fuzz.py and `python -m
bench.fuzz`.
"""

from __future__ import annotations

import logging
import random
import select
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from odradek.broker import handlers as _handlers  # noqa: F401 - registers every handler
from odradek.broker.network.registry import REGISTRY, advertised
from odradek.testing.hostile import random_request
from odradek.wire import protocol
from odradek.wire.records import build_batch

_SIZE = struct.Struct(">i")
FUZZ_TOPIC = "fuzz"
CHECK_TOPIC = "fuzz-check"
MAX_BODY = 64 * 1024  # generated requests stay small: the decoders, not the allocator, are tested

# -- well-formed requests ------------------------------------------------------------------------


def advertised_versions() -> list[tuple[int, int]]:
    """Every (api_key, version) the broker serves."""
    return [
        (key, v) for key, _lo, hi in advertised() for v in range(REGISTRY[key].min_version, hi + 1)
    ]


def _simple_value(f: Any) -> Any:
    kind = f.type_str
    if kind == "string":
        return FUZZ_TOPIC
    if kind == "records":
        return build_batch([(b"k", b"fuzz value", [], 1_700_000_000_000)])
    if kind == "bytes":
        return b"fuzz"
    if kind == "uuid":
        return uuid.UUID(int=0x0DDBA11)
    if kind in ("int8", "int16", "int32", "int64") and f._json.get("default") == "null":
        return 0  # an element of a nullable array whose default is null (Replicas of key 45)
    return f.default


def _value(f: Any, version: int) -> Any:
    if f.is_struct_array():
        return [_struct(f, version)]
    if f.is_struct():
        return _struct(f, version)
    if f.is_array():
        return [_simple_value(f.array_of)]
    return _simple_value(f)


def _struct(f: Any, version: int) -> Any:
    values = {g.name: _value(g, version) for g in f.untagged_fields(version)}
    return f.data_class(version=version, **values)


def _request_class(api_key: int) -> Any:
    """kafka-python's request class for the key (untyped); ValueError when it has none."""
    cls = protocol.request_class(api_key)
    if cls is None:
        raise ValueError(f"kafka-python has no request schema for API key {api_key}")
    return cls


def _first_of(name: str) -> Callable[[Any], Any]:
    """The first element of the message's array field `name`."""
    return lambda message: getattr(message, name)[0]


def sample_request(api_key: int, version: int) -> Any:
    """A well-formed request with every array holding one element."""
    cls = _request_class(api_key)
    values = {g.name: _value(g, version) for g in cls._struct.untagged_fields(version)}
    return cls(version=version, **values)


def encode(request: Any, version: int, correlation_id: int, client_id: str = "fuzz") -> bytes:
    """Header + body: a frame payload without its size prefix."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(version=version, header=True))


def request_header(
    api_key: int, version: int, correlation_id: int, client_id: str = "fuzz"
) -> bytes:
    """The request header (v1, or v2 for flexible versions) for a body of this key/version."""
    req = _request_class(api_key)(version=version)
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode_header(flexible=protocol.is_flexible_request(api_key, version)))


def framed(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _non_nullable_arrays(struct: Any, version: int) -> Iterator[Any]:
    for f in struct.untagged_fields(version):
        if f.is_array() and not f.nullable_for_version_q(version):
            yield f


def null_field_bodies(api_key: int, version: int) -> list[tuple[str, bytes]]:
    """(field path, request body) with a null in one non-nullable array field each.

    Bodies whose null kafka-python's encoder replaces (Metadata v0 sends [] for None) are left
    out: each body returned really carries a count of -1 (or compact 0) in that field.
    """
    cls = _request_class(api_key)
    out: list[tuple[str, bytes]] = []

    def add(path: str, req: Any, holder: Callable[[Any], Any], name: str) -> None:
        body = bytes(req.encode(version=version))
        if getattr(holder(cls.decode(body, version=version)), name) is None:
            out.append((path, body))

    for f in _non_nullable_arrays(cls._struct, version):
        req = sample_request(api_key, version)
        setattr(req, f.name, None)
        add(f.name, req, lambda r: r, f.name)
        if not f.is_struct_array():
            continue
        for g in _non_nullable_arrays(f, version):
            req = sample_request(api_key, version)
            setattr(getattr(req, f.name)[0], g.name, None)
            add(f"{f.name}[].{g.name}", req, _first_of(f.name), g.name)
    return out


# -- mutations -----------------------------------------------------------------------------------

_HUGE = (0x7FFFFFFF, 0x40000000, 0x00FFFFFF, 65_536, -1, -2, -0x80000000)


@dataclass(slots=True)
class Mutation:
    """A mutated frame payload; `frame_size` overrides the size prefix (a lying frame)."""

    kind: str
    payload: bytes
    frame_size: int | None = None

    def wire(self) -> bytes:
        size = len(self.payload) if self.frame_size is None else self.frame_size
        return _SIZE.pack(size) + self.payload


def _flip(rng: random.Random, b: bytearray) -> None:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)


def _put(rng: random.Random, b: bytearray, fmt: str, value: int, start: int = 0) -> None:
    size = struct.calcsize(fmt)
    if len(b) - start < size:
        return
    i = rng.randrange(start, len(b) - size + 1)
    struct.pack_into(fmt, b, i, value)


def mutate(rng: random.Random, payload: bytes) -> Mutation:
    """One random mutation of a request payload (header + body)."""
    b = bytearray(payload)
    kind = rng.choice(
        (
            "bitflip",
            "truncate",
            "int32",
            "int16",
            "varint",
            "version",
            "api_key",
            "splice",
            "garbage",
            "frame_size",
            "trailing",
        )
    )
    body = 10  # the fixed part of the header; mutating past it reaches the body
    if kind == "bitflip":
        _flip(rng, b)
    elif kind == "truncate":
        del b[rng.randrange(len(b)) :]
    elif kind == "int32":
        _put(rng, b, ">i", rng.choice(_HUGE), body)
    elif kind == "int16":
        _put(rng, b, ">h", rng.choice((-1, -2, 0x7FFF, -0x8000, 0)), body)
    elif kind == "varint":
        i = rng.randrange(body, max(body + 1, len(b)))
        b[i:i] = rng.choice((b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff" * rng.randint(6, 64)))
    elif kind == "version":
        struct.pack_into(">h", b, 2, rng.choice((-1, 99, 0x7FFF, rng.randint(0, 20))))
    elif kind == "api_key":
        struct.pack_into(">h", b, 0, rng.choice((-1, 999, rng.randint(0, 80))))
    elif kind == "splice":
        i = rng.randrange(len(b))
        if rng.random() < 0.5:
            del b[i : i + rng.randint(1, 16)]
        else:
            b[i:i] = rng.randbytes(rng.randint(1, 16))
    elif kind == "garbage":
        b = bytearray(rng.randbytes(rng.randint(0, 256)))
    elif kind == "trailing":
        b += rng.randbytes(rng.randint(1, 64))
    if kind == "frame_size":
        lie = rng.choice((len(b) - 1, len(b) + 1, len(b) + 100, 0, -1, 1 << 20))
        return Mutation(kind, bytes(b), max(lie, -1))
    return Mutation(kind, bytes(b))


# -- the live driver -----------------------------------------------------------------------------


@dataclass(slots=True)
class Send:
    """One thing to send on connection `conn`: frame bytes, maybe in slow pieces."""

    conn: int
    data: bytes
    label: str
    pieces: int = 1


def round_plan(seed: int, round_no: int, connections: int, requests: int) -> list[Send]:
    """The sends of one round; the same (seed, round) always gives the same bytes."""
    rng = random.Random(f"{seed}:{round_no}")
    keys = advertised_versions()
    plan: list[Send] = []
    for i in range(requests):
        key, version = rng.choice(keys)
        conn = rng.randrange(connections)
        payload = encode(sample_request(key, version), version, 1000 + i)
        roll = rng.random()
        name = f"{_request_class(key).__name__} v{version}"
        if roll < 0.15:
            plan.append(Send(conn, framed(payload), f"{name} valid"))
            continue
        if roll < 0.3:
            nulls = null_field_bodies(key, version)
            if nulls:
                path, body = rng.choice(nulls)
                head = request_header(key, version, 1000 + i)
                plan.append(Send(conn, framed(head + body), f"{name} null {path}"))
                continue
        if roll < 0.45:
            hostile = encode(random_request(rng, key, version), version, 1000 + i)
            if len(hostile) <= MAX_BODY:
                plan.append(Send(conn, framed(hostile), f"{name} hostile values"))
                continue
        m = mutate(rng, payload)
        pieces = rng.choice((1, 1, 1, 2, 5)) if rng.random() < 0.2 else 1
        plan.append(Send(conn, m.wire(), f"{name} {m.kind}", pieces))
    return plan


def rss_anon_bytes() -> int:
    """This process's anonymous resident memory (RssAnon in /proc/self/status)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


class TracebackCatcher(logging.Handler):
    """Collects what says the broker failed: log records carrying a traceback (exc_info, or one
    formatted into the text) or at ERROR and above, exceptions that ended a thread
    (`threading.excepthook`) and exceptions Python could only print (`sys.unraisablehook`: a
    finalizer, a callback of the garbage collector). While installed it lets WARNING and above
    through the root logger whatever level that had, so a quieter logging set-up cannot hide a
    failure from it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.bad: list[logging.LogRecord] = []
        self.warnings = 0
        self._saved: tuple[int, Any, Any] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if (
            record.exc_info
            or record.levelno >= logging.ERROR
            or "Traceback (most recent call last)" in record.getMessage()
        ):
            self.bad.append(record)
        elif record.levelno == logging.WARNING:
            self.warnings += 1

    def _hooked(self, source: str, exc: BaseException | None, what: str) -> None:
        info = (type(exc), exc, exc.__traceback__) if exc is not None else None
        record = logging.LogRecord(source, logging.ERROR, __file__, 0, what, None, info)
        self.bad.append(record)

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        self._hooked("threading.excepthook", args.exc_value, f"exception in thread {name}")
        assert self._saved is not None
        self._saved[1](args)

    def _unraisable_hook(self, args: Any) -> None:  # sys.UnraisableHookArgs
        what = f"{args.err_msg or 'Exception ignored in'}: {args.object!r}"
        self._hooked("sys.unraisablehook", args.exc_value, what)
        assert self._saved is not None
        self._saved[2](args)

    def __enter__(self) -> TracebackCatcher:
        root = logging.getLogger()
        self._saved = (root.level, threading.excepthook, sys.unraisablehook)
        if root.level > logging.WARNING:
            root.setLevel(logging.WARNING)
        root.addHandler(self)
        threading.excepthook = self._thread_hook
        sys.unraisablehook = self._unraisable_hook
        return self

    def __exit__(self, *exc: object) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        if self._saved is not None:
            level, threading.excepthook, sys.unraisablehook = self._saved
            root.setLevel(level)
            self._saved = None


@dataclass(slots=True)
class RoundResult:
    round_no: int
    sent: int
    closed: int  # connections the broker closed
    stalled: int  # connections that did not answer their probe in time (closed by us)
    rss_anon: int
    problems: list[str] = field(default_factory=list)
    tracebacks: int = 0  # what TracebackCatcher collected during the round


def _probe_frame(correlation_id: int) -> bytes:
    request = _request_class(protocol.API_VERSIONS_KEY)()
    return framed(encode(request, 0, correlation_id, "fuzz-probe"))


def _drain_until(sock: socket.socket, correlation_id: int, deadline: float) -> str:
    """Read frames until the one answering `correlation_id`: "ok", "closed" or "stalled"."""
    buf = bytearray()
    while True:
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                break
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            if len(frame) >= 4 and _SIZE.unpack_from(frame, 0)[0] == correlation_id:
                return "ok"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "stalled"
        ready, _, _ = select.select([sock], [], [], remaining)
        if not ready:
            continue
        try:
            chunk = sock.recv(1 << 16)
        except (ConnectionResetError, TimeoutError, BlockingIOError):
            return "closed"
        if not chunk:
            return "closed"
        buf += chunk


MAX_PAD = 2 << 20  # completing a lying frame costs at most this; a larger claim is left stalled


def frame_gap(stream: bytes | bytearray) -> int | None:
    """Zero bytes that complete the frame `stream` (all one connection sent) ends inside.

    A lying size prefix or a truncated one leaves the broker waiting for the rest of a frame
    (Kafka's NetworkReceive does the same), so a probe sent after it would be read as that
    frame's body and never answered. 0 when the stream ends on a frame boundary; None when it
    holds a negative size (the broker closes) or the gap is over MAX_PAD.
    """
    pos = 0
    while pos + 4 <= len(stream):
        (size,) = _SIZE.unpack_from(stream, pos)
        if size < 0:
            return None
        pos += 4 + size
    if pos < len(stream):  # a partial size prefix: zeros complete it
        head = bytes(stream[pos:]).ljust(4, b"\0")
        (size,) = _SIZE.unpack(head)
        if size < 0:
            return None
        gap = 4 - (len(stream) - pos) + size
    else:
        gap = pos - len(stream)
    return gap if gap <= MAX_PAD else None


def _discard_input(sock: socket.socket) -> bool:
    """Read whatever is waiting without blocking; False once the peer closed."""
    while True:
        ready, _, _ = select.select([sock], [], [], 0)
        if not ready:
            return True
        try:
            if not sock.recv(1 << 16):
                return False
        except OSError:
            return False


class LiveFuzzer:
    """Runs fuzz rounds against a broker at `bootstrap`; see the module docstring."""

    def __init__(
        self,
        bootstrap: str,
        seed: int,
        *,
        connections: int = 4,
        requests: int = 120,
        probe_timeout: float = 10.0,
        rss_growth_limit: int = 160 * 1024 * 1024,
        check_client: Callable[[str, int], None] | None = None,
        log: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.bootstrap = bootstrap
        self.seed = seed
        self.connections = connections
        self.requests = requests
        self.probe_timeout = probe_timeout
        # a bound on growth, not on the total: the process (a test session, say) may hold any
        # amount before the broker is fuzzed, and only what the fuzzing adds is the broker's
        self.rss_growth_limit = rss_growth_limit
        self.rss_start = rss_anon_bytes()
        self.check_client = check_client or real_client_round_trip
        self.log = log
        self.peak_rss = 0
        self.sent_log: list[tuple[float, int, str]] = []  # (monotonic time, round, label)

    def _connect(self) -> socket.socket:
        host, port = self.bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=self.probe_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def run_round(self, round_no: int, catcher: TracebackCatcher) -> RoundResult:
        plan = round_plan(self.seed, round_no, self.connections, self.requests)
        socks: dict[int, socket.socket | None] = {
            i: self._connect() for i in range(self.connections)
        }
        sent = {i: bytearray() for i in range(self.connections)}  # since the socket opened
        closed = stalled = 0
        try:
            for send in plan:
                sock = socks[send.conn]
                if sock is None:  # the broker closed it: the next request opens a new one
                    sock = socks[send.conn] = self._connect()
                    sent[send.conn].clear()
                self.sent_log.append((time.monotonic(), round_no, send.label))
                sent[send.conn] += send.data
                if not self._send(sock, send):
                    sock.close()
                    socks[send.conn] = None
                    closed += 1
            deadline = time.monotonic() + self.probe_timeout
            for conn, sock in socks.items():
                if sock is None:
                    continue
                # a frame left incomplete is completed first, so the probe is read as a
                # request: stalled then means the broker did not answer, not that it waits
                gap = frame_gap(sent[conn])
                try:
                    sock.sendall(bytes(gap or 0) + _probe_frame(7_777_777))
                except OSError:
                    closed += 1
                    continue
                outcome = _drain_until(sock, 7_777_777, deadline)
                closed += outcome == "closed"
                stalled += outcome == "stalled"
        finally:
            for sock in socks.values():
                if sock is not None:
                    sock.close()
        result = RoundResult(round_no, len(plan), closed, stalled, rss_anon_bytes())
        self.peak_rss = max(self.peak_rss, result.rss_anon)
        try:
            self.check_client(self.bootstrap, round_no)
        except Exception as exc:  # reported, not raised: the caller decides
            result.problems.append(f"real client failed after round {round_no}: {exc!r}")
        if catcher.bad:
            result.tracebacks = len(catcher.bad)
            for record in catcher.bad:
                result.problems.append(
                    f"round {round_no}: {record.levelname} {record.name}: {record.getMessage()}"
                    + (f" (with traceback: {record.exc_info[1]!r})" if record.exc_info else "")
                )
            catcher.bad.clear()
        if result.rss_anon - self.rss_start > self.rss_growth_limit:
            result.problems.append(
                f"round {round_no}: RssAnon {result.rss_anon >> 20} MB, grown by"
                f" {(result.rss_anon - self.rss_start) >> 20} MB since the fuzzing began"
                f" (over {self.rss_growth_limit >> 20} MB)"
            )
        return result

    def _send(self, sock: socket.socket, send: Send) -> bool:
        data = send.data
        step = max(1, -(-len(data) // send.pieces))
        try:
            for start in range(0, len(data), step):
                sock.sendall(data[start : start + step])
                if send.pieces > 1:
                    time.sleep(0.002)  # a slow client: partial frames, not synchronisation
            return _discard_input(sock)
        except OSError:
            return False


# -- checks --------------------------------------------------------------------------------------


def real_client_round_trip(bootstrap: str, round_no: int, timeout: float = 30.0) -> None:
    """Produce one record with confluent-kafka and read it back; raise when it does not work."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    value = f"fuzz round {round_no}".encode()
    delivered: list[Any] = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20_000}
    )
    producer.produce(
        CHECK_TOPIC, value, partition=0, on_delivery=lambda err, msg: delivered.append((err, msg))
    )
    producer.flush(timeout)
    if not delivered or delivered[0][0] is not None:
        raise RuntimeError(f"produce failed: {delivered}")
    offset = delivered[0][1].offset()
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "fuzz-check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(CHECK_TOPIC, 0, offset)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            if msg.value() == value:
                return
        raise RuntimeError(f"record at offset {offset} not read back within {timeout}s")
    finally:
        consumer.close()


class StallProbe:
    """Times an ApiVersions round trip every `interval` s on its own connection (a thread).

    The worst time is how long the broker's event loop kept another client waiting; reported by
    `bench.fuzz`, never asserted by tests.
    """

    def __init__(self, bootstrap: str, interval: float = 0.01) -> None:
        self.bootstrap = bootstrap
        self.interval = interval
        self.worst = 0.0
        self.worst_at = 0.0  # monotonic time the worst probe was sent
        self.samples = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-stall-probe", daemon=True)

    def __enter__(self) -> StallProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        host, port = self.bootstrap.rsplit(":", 1)
        sock: socket.socket | None = None
        corr = 0
        while not self._stop.is_set():
            try:
                if sock is None:
                    sock = socket.create_connection((host, int(port)), timeout=30)
                corr += 1
                started = time.monotonic()
                sock.sendall(_probe_frame(corr))
                if _drain_until(sock, corr, started + 30) != "ok":
                    raise ConnectionError("probe not answered")
                took = time.monotonic() - started
                if took > self.worst:
                    self.worst, self.worst_at = took, started
                self.samples += 1
            except OSError:
                self.failures += 1
                if sock is not None:
                    sock.close()
                sock = None
            self._stop.wait(self.interval)
        if sock is not None:
            sock.close()
