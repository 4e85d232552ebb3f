"""A small batching Kafka producer for `odradek produce`, speaking the protocol over plain sockets.

kafka-python's KafkaProducer spends ~100 us per record in Python (futures, accumulator, record
builder) and ~150 ms importing itself, so `seq 200000 | odradek produce` took 20 s. This client
builds RecordBatch v2 bytes itself, a record at a time with precomputed varints, and sends them
as Kafka's producer does:

* records go to a partition's open batch: by `murmur2(key)` for keyed records (Kafka's
  BuiltInPartitioner), to a sticky partition for the others (switched when a batch is sealed),
  or to the pinned partition; a batch is sealed at `batch.size` bytes or `linger.ms` after its
  first record, a record larger than batch.size gets a batch of its own, one larger than
  `max.request.size` fails on its own;
* each Produce request carries at most one batch per partition, up to max.request.size, and a
  connection has up to `max.in.flight.requests.per.connection` requests outstanding; a partition
  has one batch in flight at a time, so a retried batch never overtakes a later one;
* with `enable.idempotence` (default, as Kafka 3+, when acks=all) the producer gets a producer id
  (InitProducerId) and numbers each partition's batches, so a retry after a lost response is
  written once (DUPLICATE_SEQUENCE_NUMBER counts as delivered);
* retriable errors (NOT_LEADER_OR_FOLLOWER, a dropped connection, ...) refresh the metadata and
  resend after `retry.backoff.ms`, until `delivery.timeout.ms` after the batch was created;
  MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE for a batch of several records (the topic's
  max.message.bytes) splits it in two and halves the topic's batch size, as Kafka's producer.

Only PLAINTEXT listeners: the CLI has no TLS or SASL options yet. kafka-python is imported only
to name an error.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import os
import random
import select
import socket
import struct
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# -- configuration ------------------------------------------------------------------------------

HEADER_SIZE = 61  # RecordBatch v2 header
_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# producer properties understood here (others that only tune kafka's Java client are accepted
# with a warning, as Kafka warns about an unused key)
_INT_KEYS = {
    "batch.size": "batch_size",
    "linger.ms": "linger_ms",
    "max.request.size": "max_request_size",
    "max.in.flight.requests.per.connection": "max_in_flight",
    "retries": "retries",
    "retry.backoff.ms": "retry_backoff_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
    "max.block.ms": "max_block_ms",
    "buffer.memory": "buffer_memory",
    "transaction.timeout.ms": "transaction_timeout_ms",
}
_IGNORED_KEYS = {
    # meaningful to Kafka's Java producer, no effect on this one
    "key.serializer",
    "value.serializer",
    "partitioner.class",
    "partitioner.ignore.keys",
    "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms",
    "metadata.max.age.ms",
    "metadata.max.idle.ms",
    "send.buffer.bytes",
    "receive.buffer.bytes",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.max.ms",
    "connections.max.idle.ms",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "metrics.sample.window.ms",
    "metrics.num.samples",
    "metrics.recording.level",
    "interceptor.classes",
    "security.protocol",
    "client.dns.lookup",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms",
}


class ProducerConfigError(ValueError):
    pass


@dataclass
class ProducerConfig:
    """Kafka producer properties, with Kafka's defaults."""

    acks: int = -1
    batch_size: int = 16384
    linger_ms: int = 5
    compression: int = 0
    max_request_size: int = 1048576
    idempotence: bool = True
    max_in_flight: int = 5
    retries: int = 2147483647
    retry_backoff_ms: int = 100
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    max_block_ms: int = 60000
    buffer_memory: int = 33554432
    transaction_timeout_ms: int = 60000
    client_id: str = "odradek-cli-producer"
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ProducerConfig:
        cfg = cls()
        idempotence_set = False
        for key, raw in props.items():
            value = raw.strip()
            if key in _INT_KEYS:
                try:
                    number = int(value)
                except ValueError:
                    raise ProducerConfigError(
                        f"invalid value {raw!r} for producer property {key}: not an integer"
                    ) from None
                if number < 0:
                    raise ProducerConfigError(f"producer property {key} must be >= 0")
                setattr(cfg, _INT_KEYS[key], number)
            elif key == "acks":
                if value.lower() == "all" or value == "-1":
                    cfg.acks = -1
                elif value in ("0", "1"):
                    cfg.acks = int(value)
                else:
                    raise ProducerConfigError(f"invalid value {raw!r} for acks: all, -1, 0 or 1")
            elif key == "compression.type":
                if value.lower() not in _CODECS:
                    raise ProducerConfigError(
                        f"invalid value {raw!r} for compression.type: " + ", ".join(_CODECS)
                    )
                cfg.compression = _CODECS[value.lower()]
            elif key == "enable.idempotence":
                if value.lower() not in ("true", "false"):
                    raise ProducerConfigError(f"invalid value {raw!r} for enable.idempotence")
                cfg.idempotence = value.lower() == "true"
                idempotence_set = True
            elif key == "client.id":
                cfg.client_id = value
            elif key == "bootstrap.servers":
                pass  # read by the command
            elif key in _IGNORED_KEYS:
                cfg.warnings.append(f"producer property {key} has no effect here")
            else:
                cfg.warnings.append(
                    f"the configuration '{key}' was supplied but isn't a known config"
                )
        if cfg.max_in_flight < 1:
            raise ProducerConfigError("max.in.flight.requests.per.connection must be >= 1")
        if cfg.max_request_size < HEADER_SIZE + 8:
            raise ProducerConfigError("max.request.size is too small to hold a record")
        if cfg.idempotence and cfg.acks != -1:
            if idempotence_set:
                raise ProducerConfigError(
                    "must set acks to all in order to use the idempotent producer"
                )
            cfg.idempotence = False  # as Kafka: an implicit default yields to acks
        return cfg


# -- varints and records ------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    """Zigzag varint of a (non-huge) int, as Kafka's ByteUtils.writeVarint/-long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_ZZ_SIZE = 1 << 13
# varints of 0 .. 8191: zigzag 2n is one byte below 64, two bytes below 8192
_ZZ: list[bytes] = [bytes((2 * n,)) for n in range(64)] + [
    bytes((((2 * n) & 0x7F) | 0x80, (2 * n) >> 7)) for n in range(64, _ZZ_SIZE)
]
_NULL = b"\x01"  # varint(-1)
_MID = [_NULL + z for z in _ZZ]  # a null key, then a value length


def _zz(n: int) -> bytes:
    return _ZZ[n] if n < _ZZ_SIZE else _varint(n)


def encode_record(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[bytes, bytes | None]],
    ts_delta: int,
    offset_delta: int,
) -> bytes:
    """One DefaultRecord (length-prefixed); header names already UTF-8."""
    parts = [
        b"\x00",
        _zz(ts_delta) if ts_delta >= 0 else _varint(ts_delta),
        _zz(offset_delta),
        _NULL if key is None else _zz(len(key)) + key,
        _NULL if value is None else _zz(len(value)) + value,
        _zz(len(headers)),
    ]
    for name, hvalue in headers:
        parts.append(_zz(len(name)) + name)
        parts.append(_NULL if hvalue is None else _zz(len(hvalue)) + hvalue)
    body = b"".join(parts)
    return _zz(len(body)) + body


_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
# odradek.wire._framing.encode_values(values, start, stop, offset_delta, ts_delta, room)
_ValueEncoder = Callable[[list[bytes], int, int, int, int, int], tuple[bytes, int]]


def _load_encoder() -> _ValueEncoder | None:
    """The C encoder of value-only records (odradek/wire/_framing.c), None when not built or
    ODRADEK_PURE_PYTHON=1 (as odradek.wire.records)."""
    if os.environ.get("ODRADEK_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from odradek.wire._framing import encode_values
    except ImportError:
        return None
    return encode_values


def _load_crc32c() -> Callable[[Any], int]:
    """crc32c's C function without its package __init__ (an importlib.metadata lookup that
    costs ~30 ms, as cli._skip_kafka_client_import notes)."""
    if "crc32c" not in sys.modules:
        import importlib.util

        spec = importlib.util.find_spec("crc32c")
        if spec is not None and spec.submodule_search_locations:
            stub = types.ModuleType("crc32c")
            stub.__path__ = list(spec.submodule_search_locations)
            stub.__file__ = spec.origin
            sys.modules["crc32c"] = stub
            from crc32c import _crc32c

            for name in ("crc32c", "crc32", "big_endian", "hardware_based"):
                if hasattr(_crc32c, name):
                    setattr(stub, name, getattr(_crc32c, name))
    from crc32c._crc32c import crc32c as fn

    return fn


# -- protocol -----------------------------------------------------------------------------------

API_PRODUCE = 0
API_METADATA = 3
API_INIT_PRODUCER_ID = 22
PRODUCE_VERSION = 8
METADATA_VERSION = 4
INIT_PRODUCER_ID_VERSION = 0

SEND_TIMEOUT_S = 30.0
DUPLICATE_SEQUENCE_NUMBER = 46
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    data = s.encode()
    return _I16.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i8(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.data, self.pos)
        self.pos += 8
        return int(v)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n : self.pos].decode("utf-8", "replace")


def error_text(code: int, message: str | None = None) -> str:
    """Kafka's error name for a code, with the broker's message."""
    import kafka.errors as errors

    cls = errors.for_code(code)
    name = getattr(cls, "message", None) or cls.__name__
    return f"{name}: {message}" if message else str(name)


def is_retriable(code: int) -> bool:
    import kafka.errors as errors

    return bool(getattr(errors.for_code(code), "retriable", False))


class ConnectionLost(OSError):
    pass


class _Conn:
    """One broker connection: requests out, responses dispatched to callbacks in order."""

    def __init__(self, node_id: int, host: str, port: int, client_id: str, timeout_s: float):
        self.node_id = node_id
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # reads happen only after select(); a send that cannot go out for this long (a broker
        # that stopped reading) fails and the batches are retried on a new connection
        self.sock.settimeout(SEND_TIMEOUT_S)
        self.client = _string(client_id)
        self.correlation = 0
        self.waiting: collections.deque[tuple[int, Callable[[_Reader | None], None]]] = (
            collections.deque()
        )
        self.requests = 0  # outstanding requests that count against max.in.flight
        self.buf = bytearray()
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(
        self,
        api_key: int,
        version: int,
        body: Sequence[bytes],
        on_response: Callable[[_Reader | None], None] | None,
    ) -> None:
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + self.client
        size = len(header) + sum(len(b) for b in body)
        try:
            self.sock.sendall(b"".join([_I32.pack(size), header, *body]))
        except OSError as exc:
            self.close()
            raise ConnectionLost(str(exc)) from exc
        if on_response is not None:
            self.waiting.append((self.correlation, on_response))

    def read(self) -> None:
        """Read what the socket has (it was reported readable) and dispatch full responses."""
        try:
            chunk = self.sock.recv(1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return
        self.buf += chunk
        while len(self.buf) >= 4:
            (size,) = _I32.unpack_from(self.buf, 0)
            if len(self.buf) < 4 + size:
                break
            payload = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            (correlation,) = _I32.unpack_from(payload, 0)
            if not self.waiting or self.waiting[0][0] != correlation:
                self.close()  # out of step: treat as a lost connection
                return
            _, callback = self.waiting.popleft()
            reader = _Reader(payload)
            reader.pos = 4
            callback(reader)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        waiting, self.waiting = self.waiting, collections.deque()
        for _, callback in waiting:
            callback(None)


# -- batches --------------------------------------------------------------------------------------


class _Batch:
    __slots__ = (
        "partition",
        "records",
        "raw",
        "size",
        "base_ts",
        "max_ts",
        "created",
        "attempts",
        "retry_at",
        "data",
        "sequence",
    )

    def __init__(self, partition: int, now: float, base_ts: int) -> None:
        self.partition = partition
        self.records: list[bytes] = []  # encoded records, one or many to an item
        # what the records were made of, to re-encode them when a batch is split: a value
        # (fast path) or (key, value, headers, timestamp)
        self.raw: list[Any] = []
        self.size = HEADER_SIZE
        self.base_ts = base_ts
        self.max_ts = base_ts
        self.created = now
        self.attempts = 0
        self.retry_at = 0.0
        self.data: bytes | None = None
        self.sequence = -1


class _Partition:
    __slots__ = ("open", "queue", "in_flight", "next_sequence", "leader")

    def __init__(self) -> None:
        self.open: _Batch | None = None
        self.queue: collections.deque[_Batch] = collections.deque()
        self.in_flight = False
        self.next_sequence = 0
        self.leader = -1


class Outcome:
    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def fail(self, count: int, message: str) -> None:
        self.failed += count
        if self.first_error is None:
            self.first_error = message


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (the default partitioner's hash of a key)."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    if extra >= 3:
        h ^= data[(length & ~3) + 2] << 16
    if extra >= 2:
        h ^= data[(length & ~3) + 1] << 8
    if extra >= 1:
        h ^= data[length & ~3]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h if h < 0x80000000 else h - 0x100000000


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# -- the producer ---------------------------------------------------------------------------------


class Producer:
    """Produce to one topic; call append/append_values, then poll() often, then flush()."""

    def __init__(
        self,
        bootstrap: Sequence[tuple[str, int]],
        topic: str,
        cfg: ProducerConfig,
        connect_timeout_ms: int,
        partition: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.topic = topic
        self.bootstrap = list(bootstrap)
        self.connect_timeout_s = connect_timeout_ms / 1000
        self.pinned = partition
        self.outcome = Outcome()
        self.conns: dict[int, _Conn] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.partitions: dict[int, _Partition] = {}
        self.ids: list[int] = []
        self.sticky: int | None = None
        self.batch_limit = min(max(cfg.batch_size, 1), cfg.max_request_size)
        self.pending_bytes = 0
        self.pending_records = 0
        self.producer_id = -1
        self.producer_epoch = -1
        self.metadata_due = False
        self.crc = _load_crc32c()
        self._encode_values = _load_encoder()  # after _load_crc32c: it imports odradek.wire.batch
        self._bootstrap_conn: _Conn | None = None
        self._kicking = False

    # connections and metadata

    def _connect_bootstrap(self) -> _Conn:
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            return self._bootstrap_conn
        for conn in self.conns.values():
            if not conn.closed:
                return conn
        last: OSError | None = None
        for host, port in self.bootstrap:
            try:
                self._bootstrap_conn = _Conn(
                    -1, host, port, self.cfg.client_id, self.connect_timeout_s
                )
                return self._bootstrap_conn
            except OSError as exc:
                last = exc
        where = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        raise ConnectionLost(f"cannot connect to a broker at {where}: {last}")

    def _conn(self, node: int) -> _Conn | None:
        conn = self.conns.get(node)
        if conn is not None and not conn.closed:
            return conn
        address = self.brokers.get(node)
        if address is None:
            return None
        try:
            conn = _Conn(node, address[0], address[1], self.cfg.client_id, self.connect_timeout_s)
        except OSError:
            self.metadata_due = True
            return None
        self.conns[node] = conn
        return conn

    def _call(self, api_key: int, version: int, body: Sequence[bytes], timeout_s: float) -> _Reader:
        """A request on the bootstrap connection, waiting for its answer (polling the others)."""
        conn = self._connect_bootstrap()
        box: list[_Reader | None] = []
        conn.send(api_key, version, body, box.append)
        deadline = time.monotonic() + timeout_s
        while not box:
            left = deadline - time.monotonic()
            if left <= 0:
                conn.close()
                raise TimeoutError("the broker did not answer in time")
            self._wait_io(min(left, 0.1), None)
        if box[0] is None:
            raise ConnectionLost("the connection to the broker was closed")
        return box[0]

    def refresh_metadata(self) -> int:
        """Ask for the topic (auto-creating it as Kafka's producer may); returns the topic's
        error code and records leaders of its partitions."""
        body = [_I32.pack(1), _string(self.topic), b"\x01"]
        reader = self._call(
            API_METADATA, METADATA_VERSION, body, self.cfg.request_timeout_ms / 1000
        )
        reader.i32()  # throttle
        brokers = {}
        for _ in range(reader.i32()):
            node = reader.i32()
            host = reader.string() or ""
            port = reader.i32()
            reader.string()  # rack
            brokers[node] = (host, port)
        self.brokers = brokers
        reader.string()  # cluster id
        reader.i32()  # controller
        error = 3
        for _ in range(reader.i32()):
            terr = reader.i16()
            name = reader.string()
            reader.i8()  # internal
            leaders = {}
            for _ in range(reader.i32()):
                reader.i16()
                index = reader.i32()
                leader = reader.i32()
                for _ in range(reader.i32()):
                    reader.i32()
                for _ in range(reader.i32()):
                    reader.i32()
                leaders[index] = leader
            if name == self.topic:
                error = terr
                if terr == 0:
                    for index, leader in leaders.items():
                        self.partitions.setdefault(index, _Partition()).leader = leader
                    self.ids = sorted(leaders)
        self.metadata_due = False
        return error

    def start(self) -> None:
        """Fetch the topic's partitions (waiting up to max.block.ms for a new topic's leaders)
        and, when idempotent, a producer id."""
        deadline = time.monotonic() + self.cfg.max_block_ms / 1000
        while True:
            error = self.refresh_metadata()
            # as Kafka's producer, partitions without a leader just wait (a pinned one must
            # have one)
            leaders = [p for p in self.ids if self.partitions[p].leader >= 0]
            ready = (
                error == 0
                and bool(leaders)
                and (self.pinned is None or self.pinned in leaders or self.pinned not in self.ids)
            )
            if ready:
                break
            if error not in (0, 3, 5) and not is_retriable(error):
                raise ProducerConfigError(error_text(error, f"topic {self.topic}"))
            if time.monotonic() >= deadline:
                if error == 3:
                    raise ProducerConfigError(
                        f"topic {self.topic} not present in metadata after "
                        f"{self.cfg.max_block_ms} ms"
                    )
                raise ProducerConfigError(
                    f"topic {self.topic} has no leader after {self.cfg.max_block_ms} ms"
                    + (f" ({error_text(error)})" if error else "")
                )
            time.sleep(self.cfg.retry_backoff_ms / 1000)
        if self.pinned is not None and self.pinned not in self.partitions:
            raise ProducerConfigError(
                f"partition {self.pinned} of topic {self.topic} with partition count "
                f"{len(self.ids)} does not exist"
            )
        if self.cfg.idempotence:
            body = [_string(None), _I32.pack(self.cfg.transaction_timeout_ms)]
            while True:
                reader = self._call(
                    API_INIT_PRODUCER_ID,
                    INIT_PRODUCER_ID_VERSION,
                    body,
                    self.cfg.request_timeout_ms / 1000,
                )
                reader.i32()
                error = reader.i16()
                if error == 0:
                    self.producer_id = reader.i64()
                    self.producer_epoch = reader.i16()
                    break
                if not is_retriable(error) or time.monotonic() >= deadline:
                    raise ProducerConfigError(error_text(error, "cannot get a producer id"))
                time.sleep(self.cfg.retry_backoff_ms / 1000)

    # appending

    def full(self) -> bool:
        return self.pending_bytes >= self.cfg.buffer_memory

    def _choose(self, key: bytes | None) -> int:
        if self.pinned is not None:
            return self.pinned
        if key is not None:
            return partition_for_key(key, len(self.ids))
        if self.sticky is None:
            live = [p for p in self.ids if self.partitions[p].leader >= 0] or self.ids
            self.sticky = random.choice(live)
        return self.sticky

    def _open(self, partition: int, now: float, ts: int) -> _Batch:
        state = self.partitions[partition]
        batch = state.open
        if batch is None:
            batch = state.open = _Batch(partition, now, ts)
        return batch

    def _too_large(self, size: int) -> bool:
        if size + HEADER_SIZE <= self.cfg.max_request_size:
            return False
        self.outcome.fail(
            1,
            f"RecordTooLargeException: the message is {size + HEADER_SIZE} bytes when "
            f"serialized which is larger than {self.cfg.max_request_size}, which is the value of "
            "the max.request.size configuration",
        )
        return True

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[bytes, bytes | None]],
        ts: int,
        now: float,
    ) -> None:
        partition = self._choose(key)
        batch = self._open(partition, now, ts)
        record = encode_record(key, value, headers, ts - batch.base_ts, len(batch.raw))
        if self._too_large(len(record)):
            return
        if batch.records and batch.size + len(record) > self.batch_limit:
            self._seal(batch)
            partition = self._choose(key)
            batch = self._open(partition, now, ts)
            record = encode_record(key, value, headers, 0, 0)
        batch.records.append(record)
        batch.raw.append((key, value, headers, ts))
        batch.size += len(record)
        if ts > batch.max_ts:
            batch.max_ts = ts
        if batch.size >= self.batch_limit:
            self._seal(batch)

    def append_values(self, values: list[bytes], ts: int, now: float) -> None:
        """The fast path: records with a value only (no key, no headers), as `seq | produce`.
        With the C encoder (odradek/wire/_framing.c) a batch's worth of records is one call;
        else a slice is encoded with list comprehensions over precomputed varints, and cut
        where the batch is full."""
        if self._encode_values is not None:
            self._append_values_c(self._encode_values, values, ts, now)
            return
        i, total = 0, len(values)
        while i < total:
            batch = self._open(self._choose(None), now, ts)
            count = len(batch.raw)
            room = self.batch_limit - batch.size
            k = min(total - i, _ZZ_SIZE - count, max(1, room // 8))
            chunk = values[i : i + k]
            if k <= 0 or max(map(len, chunk)) >= _ZZ_SIZE - 16:
                # a long value (or a full offset table): the general encoder, one record
                self.append(None, values[i], (), ts, now)
                i += 1
                continue
            delta = ts - batch.base_ts
            prefix = b"\x00" + (_ZZ[delta] if 0 <= delta < _ZZ_SIZE else _varint(delta))
            mid, end = _MID, b"\x00"
            bodies = [
                b"".join((p, mid[len(v)], v, end))
                for p, v in zip([prefix + c for c in _ZZ[count : count + k]], chunk, strict=True)
            ]
            records = [_ZZ[len(b)] + b for b in bodies]
            sizes = list(itertools.accumulate(map(len, records)))
            fit = bisect.bisect_right(sizes, room)
            if fit == 0:
                if count:
                    self._seal(batch)  # the next record starts a new batch
                    continue
                fit = 1  # larger than batch.size: a batch of its own
                if self._too_large(sizes[0]):
                    i += 1
                    continue
            batch.records.extend(records[:fit] if fit < k else records)
            batch.raw.extend(chunk[:fit] if fit < k else chunk)
            batch.size += sizes[fit - 1]
            if ts > batch.max_ts:
                batch.max_ts = ts
            i += fit
            if fit < k or batch.size >= self.batch_limit:
                self._seal(batch)

    def _append_values_c(
        self, encode: _ValueEncoder, values: list[bytes], ts: int, now: float
    ) -> None:
        i, total = 0, len(values)
        while i < total:
            batch = self._open(self._choose(None), now, ts)
            count = len(batch.raw)
            room = self.batch_limit - batch.size
            delta = ts - batch.base_ts
            records, n = encode(values, i, total, count, delta, room)
            if n == 0:
                if count:
                    self._seal(batch)  # the next record starts a new batch
                else:  # larger than batch.size: the general path, a batch of its own
                    self.append(None, values[i], (), ts, now)
                    i += 1
                continue
            batch.records.append(records)
            batch.raw.extend(values[i : i + n])
            batch.size += len(records)
            if ts > batch.max_ts:
                batch.max_ts = ts
            i += n
            if i < total or batch.size >= self.batch_limit:
                self._seal(batch)

    def _seal(self, batch: _Batch) -> None:
        state = self.partitions[batch.partition]
        if state.open is batch:
            state.open = None
        if self.sticky == batch.partition:
            self.sticky = None
        if not batch.records:
            return
        state.queue.append(batch)
        self.pending_bytes += batch.size
        self.pending_records += len(batch.raw)
        self._kick()

    def _kick(self) -> None:
        """Between records: take the answers that have arrived and send what they made
        sendable, without waiting, so the broker works while more lines are encoded."""
        if self._kicking or not self.conns:
            return
        self._kicking = True
        try:
            self._wait_io(0, None)
            self.send_ready(time.monotonic())
        finally:
            self._kicking = False

    def seal_lingering(self, now: float, everything: bool = False) -> None:
        linger = self.cfg.linger_ms / 1000
        for state in self.partitions.values():
            batch = state.open
            if batch is not None and (everything or now - batch.created >= linger):
                self._seal(batch)

    def next_deadline(self, now: float) -> float:
        """Seconds until something is due (a lingering batch, a retry backoff)."""
        due = 1.0
        linger = self.cfg.linger_ms / 1000
        for state in self.partitions.values():
            if state.open is not None and state.open.records:
                due = min(due, state.open.created + linger - now)
            if state.queue and not state.in_flight:
                due = min(due, state.queue[0].retry_at - now)
        return max(due, 0.0)

    # sending

    def _build(self, batch: _Batch, sequence: int) -> bytes:
        section = b"".join(batch.records)
        attributes = self.cfg.compression
        if attributes:
            from odradek.wire.compression import compress

            section = compress(attributes, section)
        out = bytearray(HEADER_SIZE)
        _BATCH_HEADER.pack_into(
            out,
            0,
            0,
            HEADER_SIZE - 12 + len(section),
            -1,
            2,
            0,
            attributes,
            len(batch.raw) - 1,
            batch.base_ts,
            batch.max_ts,
            self.producer_id,
            self.producer_epoch,
            sequence,
            len(batch.raw),
        )
        out += section
        struct.pack_into(">I", out, 17, self.crc(memoryview(out)[21:]))
        return bytes(out)

    def send_ready(self, now: float) -> None:
        by_node: dict[int, list[_Partition]] = {}
        for state in self.partitions.values():
            if state.in_flight or not state.queue or state.queue[0].retry_at > now:
                continue
            by_node.setdefault(state.leader, []).append(state)
        if -1 in by_node:
            self.metadata_due = True
            del by_node[-1]
        for node, states in by_node.items():
            conn = self._conn(node)
            if conn is None:
                continue
            while states and (self.cfg.acks == 0 or conn.requests < self.cfg.max_in_flight):
                chosen: list[_Batch] = []
                size = 0
                rest = []
                for state in states:
                    batch = state.queue[0]
                    if batch.data is None:
                        sequence = -1
                        if self.producer_id >= 0:
                            sequence = state.next_sequence
                        batch.sequence = sequence
                        batch.data = self._build(batch, sequence)
                    if chosen and size + len(batch.data) + 64 > self.cfg.max_request_size:
                        rest.append(state)
                        continue
                    chosen.append(batch)
                    size += len(batch.data) + 64
                states = rest
                self._send(conn, chosen)

    def _send(self, conn: _Conn, batches: list[_Batch]) -> None:
        body = [
            _string(None),
            _I16.pack(self.cfg.acks),
            _I32.pack(self.cfg.request_timeout_ms),
            _I32.pack(1),
            _string(self.topic),
            _I32.pack(len(batches)),
        ]
        for batch in batches:
            data = batch.data
            assert data is not None
            body += [_I32.pack(batch.partition), _I32.pack(len(data)), data]
            self.partitions[batch.partition].in_flight = True
            if batch.sequence >= 0:
                self.partitions[batch.partition].next_sequence = batch.sequence + len(batch.raw)
        if self.cfg.acks == 0:
            try:
                conn.send(API_PRODUCE, PRODUCE_VERSION, body, None)
            except ConnectionLost:
                for batch in batches:
                    self._retry(batch, "NETWORK_EXCEPTION: the connection was closed")
                return
            for batch in batches:
                self._done(batch)
            return
        conn.requests += 1

        def on_response(reader: _Reader | None) -> None:
            conn.requests -= 1
            self._on_produce(batches, reader)

        try:
            conn.send(API_PRODUCE, PRODUCE_VERSION, body, on_response)
        except ConnectionLost:
            conn.requests -= 1
            for batch in batches:
                self._retry(batch, "NETWORK_EXCEPTION: the connection was closed")

    def _on_produce(self, batches: list[_Batch], reader: _Reader | None) -> None:
        if reader is None:
            for batch in batches:
                self._retry(batch, "NETWORK_EXCEPTION: the connection was closed")
            return
        by_partition: dict[int, _Batch] = {b.partition: b for b in batches}
        for _ in range(reader.i32()):
            reader.string()
            for _ in range(reader.i32()):
                index = reader.i32()
                error = reader.i16()
                reader.i64()  # base offset
                reader.i64()  # log append time
                reader.i64()  # log start offset
                for _ in range(reader.i32()):
                    reader.i32()
                    reader.string()
                message = reader.string()
                answered = by_partition.pop(index, None)
                if answered is None:
                    continue
                if error in (0, DUPLICATE_SEQUENCE_NUMBER):
                    self._done(answered)
                else:
                    self._failed(answered, error, message)
        for batch in by_partition.values():  # not answered: resend
            self._retry(batch, "NETWORK_EXCEPTION: no answer for the partition")

    def _release(self, batch: _Batch, delivered: bool = False) -> _Partition:
        state = self.partitions[batch.partition]
        state.in_flight = False
        if not delivered and batch.sequence >= 0:
            state.next_sequence = batch.sequence  # not written: the next batch takes its number
        if state.queue and state.queue[0] is batch:
            state.queue.popleft()
        self.pending_bytes -= batch.size
        self.pending_records -= len(batch.raw)
        return state

    def _done(self, batch: _Batch) -> None:
        self._release(batch, delivered=True)
        self.outcome.delivered += len(batch.raw)

    def _failed(self, batch: _Batch, error: int, message: str | None) -> None:
        if error in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE) and len(batch.raw) > 1:
            self._split(batch)
            return
        if is_retriable(error):
            self.metadata_due = True
            self._retry(batch, error_text(error, message))
            return
        self._release(batch)
        self.outcome.fail(len(batch.raw), error_text(error, message))

    def _retry(self, batch: _Batch, why: str) -> None:
        state = self.partitions[batch.partition]
        state.in_flight = False
        self.metadata_due = True
        batch.attempts += 1
        now = time.monotonic()
        expired = now - batch.created >= self.cfg.delivery_timeout_ms / 1000
        if batch.attempts > self.cfg.retries or expired:
            self._release(batch)
            if expired:
                why = (
                    f"expiring {len(batch.raw)} record(s) for {self.topic}-"
                    f"{batch.partition}: {int((now - batch.created) * 1000)} ms has passed "
                    f"since batch creation ({why})"
                )
            self.outcome.fail(len(batch.raw), why)
            return
        batch.retry_at = now + self.cfg.retry_backoff_ms / 1000
        if self.producer_id < 0:
            batch.data = None  # rebuilt when resent (same bytes)

    def _split(self, batch: _Batch) -> None:
        """The broker refused the batch as too large (the topic's max.message.bytes): resend
        its records in two batches, and make later batches no bigger than those."""
        state = self._release(batch)
        self.batch_limit = max(HEADER_SIZE + 1, min(self.batch_limit, batch.size // 2))
        half = len(batch.raw) // 2
        parts = []
        now = time.monotonic()
        for chunk in (batch.raw[:half], batch.raw[half:]):
            first = chunk[0]
            new = _Batch(
                batch.partition,
                batch.created,
                batch.base_ts if isinstance(first, bytes) else first[3],
            )
            new.created = batch.created
            for i, item in enumerate(chunk):
                key, value, headers, ts = (
                    (None, item, (), batch.base_ts) if isinstance(item, bytes) else item
                )
                record = encode_record(key, value, headers, ts - new.base_ts, i)
                new.records.append(record)
                new.raw.append((key, value, headers, ts))
                new.size += len(record)
                new.max_ts = max(new.max_ts, ts)
            new.retry_at = now
            parts.append(new)
        for new in reversed(parts):
            state.queue.appendleft(new)
            self.pending_bytes += new.size
            self.pending_records += len(new.raw)

    # the loop

    def _wait_io(self, timeout: float, extra: int | None) -> list[int]:
        """select() on the connections (and `extra`, e.g. stdin); dispatch responses; return
        the ready extra fds."""
        conns = [c for c in {*self.conns.values(), self._bootstrap_conn} if c and not c.closed]
        fds: list[Any] = [*conns]
        if extra is not None:
            fds.append(extra)
        if not fds:
            time.sleep(timeout)
            return []
        readable, _, _ = select.select(fds, [], [], timeout)
        out = []
        for item in readable:
            if isinstance(item, _Conn):
                item.read()
            else:
                out.append(item)
        return out

    def _expire(self, now: float) -> None:
        """Fail batches still waiting (no leader, no connection) after delivery.timeout.ms."""
        limit = self.cfg.delivery_timeout_ms / 1000
        for state in self.partitions.values():
            while state.queue and not state.in_flight and now - state.queue[0].created >= limit:
                batch = state.queue[0]
                self._release(batch)
                self.outcome.fail(
                    len(batch.raw),
                    f"expiring {len(batch.raw)} record(s) for {self.topic}-{batch.partition}: "
                    f"{int((now - batch.created) * 1000)} ms has passed since batch creation",
                )

    def poll(self, timeout: float, extra: int | None = None) -> bool:
        """Send what is due, wait up to `timeout` for responses or `extra` to be readable;
        True if `extra` is readable."""
        now = time.monotonic()
        self.seal_lingering(now)
        self._expire(now)
        if self.metadata_due:
            try:
                self.refresh_metadata()
            except (OSError, TimeoutError):
                self.metadata_due = True
        self.send_ready(time.monotonic())
        ready = self._wait_io(min(timeout, self.next_deadline(time.monotonic())), extra)
        return bool(ready)

    def pending(self) -> bool:
        return self.pending_records > 0 or any(
            s.open is not None and s.open.records for s in self.partitions.values()
        )

    def flush(self, timeout_s: float) -> None:
        """Seal every batch and wait until each is delivered or has failed."""
        self.seal_lingering(time.monotonic(), everything=True)
        deadline = time.monotonic() + timeout_s
        while self.pending():
            if time.monotonic() >= deadline:
                count = self.pending_records
                for state in self.partitions.values():
                    state.queue.clear()
                self.outcome.fail(count, f"{count} records not acknowledged in time")
                self.pending_records = 0
                return
            self.poll(0.05)

    def close(self) -> None:
        for conn in [*self.conns.values(), self._bootstrap_conn]:
            if conn is not None:
                conn.close()


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ProducerConfigError(f"bad bootstrap server {item!r}: expected HOST:PORT")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ProducerConfigError("no bootstrap server given")
    return out
