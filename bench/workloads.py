"""The two phases of a workload, driven through confluent-kafka (librdkafka).

Produce: N values of one size, spread round-robin over the topic's partitions (the partition is
given explicitly, no keys), with throughput settings (linger.ms, ~1 MB batches, a deep local
queue). Latency is the time from `produce()` to the message's delivery report: librdkafka
reports a partition's messages in the order they were produced, so each partition keeps a FIFO
of produce times that the one delivery callback pops.

Consume: a consumer with no group assigns every partition at the beginning and reads until it
has N records, with large fetches; time runs from `assign()` to the last record.

Both phases are bounded in time; neither sleeps.
"""

from __future__ import annotations

import random
import sys
import time
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

PAYLOAD_POOL = 256
_POLL_EVERY = 1024
_FLUSH_SLICE_S = 1.0
_CONSUME_BATCH = 10_000
_CONSUME_WAIT_S = 0.2
_MAX_CLIENT_ERRORS_SHOWN = 5


# Kafka's Java clients set TCP_NODELAY; librdkafka leaves Nagle on unless told, which makes the
# tail of each large request wait for the peer's delayed ACK and halves loopback throughput.
_NO_NAGLE = {"socket.nagle.disable": True}


class PhaseError(RuntimeError):
    """A phase could not finish within its time limit."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    bootstrap: str
    partitions: int
    acks: str = "all"
    compression: str = "none"
    linger_ms: int = 5
    batch_size: int = 1_000_000
    phase_timeout_s: float = 900.0
    idle_timeout_s: float = 30.0
    # extra librdkafka properties of both clients (security.protocol, ssl.ca.location, ...)
    security: tuple[tuple[str, str], ...] = ()

    def producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": "odradek-bench-producer",
            "acks": self.acks,
            "compression.type": self.compression,
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_size,
            "batch.num.messages": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_097_152,
            "message.max.bytes": 8 * 1_048_576,
            "enable.idempotence": False,
            **_NO_NAGLE,
            **dict(self.security),
        }

    def consumer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": "odradek-bench-consumer",
            # librdkafka wants a group.id, but assign() never joins the group and nothing is
            # committed, so no group coordinator is involved.
            "group.id": "odradek-bench-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * 1_048_576,
            "max.partition.fetch.bytes": 32 * 1_048_576,
            "receive.message.max.bytes": 128 * 1_048_576,
            # librdkafka stops prefetching a partition once this many records wait in its
            # queue (default 100,000), which starves a fast reader of small records
            "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 1_048_576,
            "fetch.wait.max.ms": 100,
            "enable.partition.eof": False,
            **_NO_NAGLE,
            **dict(self.security),
        }


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """What one phase did: records and bytes moved, wall seconds, failed records, client-level
    errors (error_cb: transport and the like, often transient) and latency percentiles."""

    records: int
    value_bytes: int
    elapsed_s: float
    errors: int
    client_errors: int
    p50_ms: float | None = None
    p99_ms: float | None = None
    # The throughput interval: produce measures all of it; consume measures from the arrival of
    # its first batch to the last record (records in that first batch excluded), because
    # librdkafka takes ~0.5 s after assign() before it fetches (its offset query), which would
    # swamp a fast read. first_record_s is that wait, from assign() to the first batch.
    measured_records: int = 0
    measured_bytes: int = 0
    first_record_s: float | None = None
    p999_ms: float | None = None  # the native driver's produce phases report it (bench.native)


def payloads(size: int, count: int = PAYLOAD_POOL, seed: int = 7) -> list[bytes]:
    """Distinct values of `size` bytes drawn from 64 symbols: compressible, but not trivially."""
    rng = random.Random(seed)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;"
    return [bytes(rng.choices(alphabet, k=size)) for _ in range(count)]


def percentile(sorted_values: array[float] | list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100.0 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


class _ErrorLog:
    """Counts client-level errors (error_cb) and shows the first few on stderr."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.count = 0

    def __call__(self, err: KafkaError) -> None:
        self.count += 1
        if self.count <= _MAX_CLIENT_ERRORS_SHOWN:
            print(f"bench: {self.who}: {err}", file=sys.stderr)


def produce(settings: ClientSettings, topic: str, size: int, records: int) -> PhaseResult:
    """Produce `records` values of `size` bytes and wait for every delivery report."""
    partitions = settings.partitions
    pending: list[deque[float]] = [deque() for _ in range(partitions)]
    latencies = array("d")
    failed = 0
    clock = time.perf_counter

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        nonlocal failed
        now = clock()
        sent = pending[msg.partition()].popleft()
        if err is None:
            latencies.append(now - sent)
        else:
            failed += 1

    client_errors = _ErrorLog("producer")
    producer = Producer(
        {**settings.producer_config(), "on_delivery": on_delivery, "error_cb": client_errors}
    )
    values = payloads(size)
    mask = len(values) - 1
    send = producer.produce
    poll = producer.poll
    started = clock()
    deadline = started + settings.phase_timeout_s
    for i in range(records):
        partition = i % partitions
        while True:
            sent = clock()
            try:
                send(topic, values[i & mask], partition=partition)
                break
            except BufferError:
                poll(0.05)
                if clock() > deadline:
                    raise PhaseError(
                        f"produce: local queue still full after {settings.phase_timeout_s:.0f} s"
                    ) from None
        pending[partition].append(sent)
        if i % _POLL_EVERY == 0:
            poll(0)
            if sent > deadline:
                raise PhaseError(
                    f"produce: only {i} records queued after {settings.phase_timeout_s:.0f} s"
                )
    while producer.flush(_FLUSH_SLICE_S) > 0:
        if clock() > deadline:
            raise PhaseError(
                f"produce: {len(producer)} records undelivered after "
                f"{settings.phase_timeout_s:.0f} s"
            )
    elapsed = clock() - started
    latencies_ms = sorted(x * 1000.0 for x in latencies)
    return PhaseResult(
        records=len(latencies),
        value_bytes=len(latencies) * size,
        elapsed_s=elapsed,
        measured_records=len(latencies),
        measured_bytes=len(latencies) * size,
        errors=failed,
        client_errors=client_errors.count,
        p50_ms=percentile(latencies_ms, 50),
        p99_ms=percentile(latencies_ms, 99),
    )


def consume(settings: ClientSettings, topic: str, records: int) -> PhaseResult:
    """Read the topic from the beginning until `records` records have arrived (or time is up)."""
    client_errors = _ErrorLog("consumer")
    consumer = Consumer({**settings.consumer_config(), "error_cb": client_errors})
    got = nbytes = failed = 0
    first_got = first_bytes = 0
    clock = time.perf_counter
    try:
        started = clock()
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(settings.partitions)]
        )
        deadline = started + settings.phase_timeout_s
        first_at: float | None = None
        last_progress = last_record = started
        while got < records:
            batch = consumer.consume(_CONSUME_BATCH, _CONSUME_WAIT_S)
            now = clock()
            if batch:
                last_progress = now
                for msg in batch:
                    if msg.error() is None:
                        got += 1
                        nbytes += len(msg)
                    else:
                        failed += 1
                last_record = clock()
                if first_at is None:
                    first_at, first_got, first_bytes = now, got, nbytes
            if now > deadline or now - last_progress > settings.idle_timeout_s:
                print(f"bench: consume gave up at {got}/{records} records", file=sys.stderr)
                break
    finally:
        consumer.close()
    if first_at is None or got == first_got:
        # nothing, or everything in one batch: fall back to timing from assign()
        measured = (got, nbytes, last_record - started)
    else:
        measured = (got - first_got, nbytes - first_bytes, last_record - first_at)
    return PhaseResult(
        records=got,
        value_bytes=nbytes,
        elapsed_s=measured[2],
        errors=failed,
        client_errors=client_errors.count,
        measured_records=measured[0],
        measured_bytes=measured[1],
        first_record_s=None if first_at is None else first_at - started,
    )
