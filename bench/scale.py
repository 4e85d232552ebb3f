"""`python -m bench.scale`: one broker with many partitions, connections and groups (issue 17).

Rows (each a spawned `odradek serve` on a free port with a temporary data dir, always stopped):

- **partitions**: `--topics` x `--partitions` (default 1,000 x 10) created with CreateTopics
  (confluent-kafka's AdminClient, `--batch` topics a request), one record produced to every
  partition, then the broker is stopped (SIGTERM) and started again on the same data. Reported:
  creation time, start time of the restarted broker (spawn to first ApiVersions answer and to
  its ready line), a full Metadata v12 request (every topic, raw socket, median and max of
  `--metadata-runs`), RSS, and the broker's open descriptors (`/proc/PID/fd`) after creation
  and after the restart. The child runs under `--nofile` (default 20,000, the issue's limit) as
  its RLIMIT_NOFILE, soft and hard.
- **connections**: `--connections` idle-ish client connections (each sends ApiVersions then a
  Metadata request every `--refresh-s`) and `--groups` classic consumer groups of one member
  (JoinGroup v3, SyncGroup, Heartbeat every 3 s, one OffsetCommit), all from one asyncio loop;
  meanwhile a probe connection times ApiVersions round trips every 20 ms for `--probe-s`.
  Reported: probe latency p50/p99/max, broker CPU and RSS.

Nothing is asserted; the numbers go in the table. Targets (issue 17): start < 10 s, Metadata
< 100 ms, RSS < 500 MB, descriptors bounded; probe <= 50 ms with 2,000 connections and 1,000
groups.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.broker_proc import OdradekProcess, with_nofile
from bench.procstat import cpu_seconds, memory_mb

HOST = "127.0.0.1"
_SIZE = struct.Struct(">i")
PROBE_EVERY_S = 0.02
SLOW_PROBE_MS = 50.0
RETRIES = 100
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


# -- a broker under a chosen RLIMIT_NOFILE ----------------------------------------------------


class LimitedProcess(OdradekProcess):
    """`odradek serve` whose RLIMIT_NOFILE (soft and hard) is `nofile`: a tiny Python
    trampoline sets it and execs the broker (same pid)."""

    def __init__(self, nofile: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nofile = nofile

    def command(self) -> list[str]:
        cmd = super().command()
        return with_nofile(cmd, self.nofile, cmd[0])

    def restart(self) -> Any:
        """Stop (SIGTERM, clean) and start again on the same data dir and port."""
        keep, self.keep_data = self.keep_data, True
        self.stop()
        self.keep_data = keep
        self._ready.clear()
        self._ready_at = None
        self._lines.clear()
        return self.start(timeout=120.0)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# -- raw requests -------------------------------------------------------------------------------


def _request(api_key: int, version: int, corr: int, body: bytes, flexible: bool) -> bytes:
    client = b"odradek-scale"
    head = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    if flexible:
        head += b"\x00"  # request header v2: no tagged fields
    payload = head + body
    return _SIZE.pack(len(payload)) + payload


def metadata_all_request(corr: int) -> bytes:
    """Metadata v12 for every topic: topics null, no auto-creation, no authorized operations."""
    return _request(3, 12, corr, b"\x00\x00\x00\x00", True)


def api_versions_request(corr: int) -> bytes:
    return _request(18, 0, corr, b"", False)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


async def _round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bytes:
    writer.write(data)
    return await _read_frame(reader)


def metadata_times(port: int, runs: int) -> tuple[list[float], int]:
    """Milliseconds of `runs` full Metadata round trips on one connection, and the response
    size in bytes."""

    async def go() -> tuple[list[float], int]:
        reader, writer = await asyncio.open_connection(HOST, port)
        times, size = [], 0
        try:
            for i in range(runs):
                t0 = time.perf_counter()
                payload = await _round_trip(reader, writer, metadata_all_request(i + 1))
                times.append((time.perf_counter() - t0) * 1000)
                size = len(payload)
        finally:
            writer.close()
        return times, size

    return asyncio.run(go())


# -- partitions row -----------------------------------------------------------------------------


@dataclass
class PartitionsRow:
    topics: int
    partitions: int
    nofile: int | None
    create_s: float = 0.0
    produce_s: float = 0.0
    fds_created: int = 0
    rss_created_mb: float = 0.0
    restart_api_versions_ms: float = 0.0
    restart_ready_ms: float = 0.0
    fds_restarted: int = 0
    rss_restarted_mb: float = 0.0
    metadata_ms: list[float] = field(default_factory=list)
    metadata_bytes: int = 0
    records_found: int = 0
    notes: list[str] = field(default_factory=list)


def create_topics(bootstrap: str, names: list[str], partitions: int, batch: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "odradek-scale"})
    for i in range(0, len(names), batch):
        chunk = names[i : i + batch]
        futures = admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in chunk],
            operation_timeout=60,
            request_timeout=120,
        )
        for f in futures.values():
            f.result(timeout=120)


FILL_DEADLINE_S = 600.0


def produce_everywhere(
    bootstrap: str, names: list[str], partitions: int, deadline_s: float = FILL_DEADLINE_S
) -> int:
    """One record to every partition; returns the rounds it took. Kafka answers CreateTopics
    once its controller has committed the topics, and its broker creates the logs afterwards
    (~200 a second on this machine): until then a partition answers UNKNOWN_TOPIC_OR_PARTITION,
    which librdkafka reports as a failed delivery (after `topic.metadata.propagation.max.ms`,
    30 s). Failed partitions are produced again, by a new producer, until `deadline_s`."""
    from confluent_kafka import Producer

    todo = [(name, p) for name in names for p in range(partitions)]
    give_up = time.monotonic() + deadline_s
    rounds = 0
    while todo:
        rounds += 1
        producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 50, "socket.nagle.disable": True}
        )
        failed: list[tuple[str, int, Any]] = []

        def report(err: Any, msg: Any, failed: list[tuple[str, int, Any]] = failed) -> None:
            if err is not None:
                failed.append((msg.topic(), msg.partition(), err))

        for name, p in todo:
            while True:
                try:
                    producer.produce(name, b"v", partition=p, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        if producer.flush(120):
            raise RuntimeError(f"round {rounds}: records still queued after 120 s")
        if failed and time.monotonic() > give_up:
            errors = [str(err) for _, _, err in failed[:3]]
            raise RuntimeError(f"{len(failed)} records undelivered after {rounds} rounds: {errors}")
        if failed:
            print(
                f"bench: {len(failed)} of {len(todo)} partitions not writable yet "
                f"({failed[0][2]}), producing to them again",
                file=sys.stderr,
            )
            time.sleep(1.0)  # a bench's pause while the broker creates logs, not a test's
        todo = [(name, p) for name, p, _ in failed]
    return rounds


def count_records(bootstrap: str, names: list[str], partitions: int) -> int:
    """High watermarks summed over a sample of partitions (every 50th topic, all partitions)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-scale-check"})
    total = 0
    try:
        for name in names[::50]:
            for p in range(partitions):
                _low, high = consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)
                total += high
    finally:
        consumer.close()
    return total


def partitions_row(
    topics: int, partitions: int, nofile: int | None, batch: int, metadata_runs: int
) -> PartitionsRow:
    row = PartitionsRow(topics, partitions, nofile)
    names = [f"scale-{i:05d}" for i in range(topics)]
    proc = LimitedProcess(nofile, overrides={"num.partitions": "1"})
    try:
        proc.start(timeout=60.0)
        t0 = time.perf_counter()
        create_topics(proc.bootstrap, names, partitions, batch)
        row.create_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        produce_everywhere(proc.bootstrap, names, partitions)
        row.produce_s = time.perf_counter() - t0
        row.fds_created = open_fds(proc.pid)
        row.rss_created_mb = memory_mb(proc.pid)[0]
        timing = proc.restart()
        row.restart_api_versions_ms = timing.api_versions_ms
        row.restart_ready_ms = timing.ready_line_ms
        row.metadata_ms, row.metadata_bytes = metadata_times(proc.port, metadata_runs)
        row.records_found = count_records(proc.bootstrap, names, partitions)
        row.fds_restarted = open_fds(proc.pid)
        row.rss_restarted_mb = memory_mb(proc.pid)[0]
        row.notes += [line for line in proc.output().splitlines() if "open-files" in line]
    finally:
        proc.stop()
    return row


# -- connections and groups row -----------------------------------------------------------------


@dataclass
class ConnectionsRow:
    connections: int
    groups: int
    probe_ms: list[float] = field(default_factory=list)
    joined: int = 0
    committed: int = 0
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    slow: list[tuple[float, float]] = field(default_factory=list)  # (wall time, ms) > 50 ms
    broker_cpu_s: float = 0.0
    rss_mb: float = 0.0
    fds: int = 0
    seconds: float = 0.0


def _encode(req: Any, version: int, corr: int) -> bytes:
    req.with_header(correlation_id=corr, client_id="odradek-scale")
    return bytes(req.encode(version=version, header=True, framed=True))


def _decode(req: Any, payload: bytes, version: int) -> Any:
    module = sys.modules[type(req).__module__]
    cls = getattr(module, type(req).__name__.removesuffix("Request") + "Response")
    return cls.decode(payload, version=version, header=True)


async def _group_member(
    group: str, topic: str, row: ConnectionsRow, stop: asyncio.Event, ready: asyncio.Event
) -> None:
    """One classic consumer of its own group: join (v3: the member id comes in the answer),
    sync as leader, commit once, heartbeat every 3 s until `stop`."""
    from kafka.protocol.consumer import (
        HeartbeatRequest,
        JoinGroupRequest,
        OffsetCommitRequest,
        SyncGroupRequest,
    )

    from odradek.wire import protocol

    reader, writer = await asyncio.open_connection(HOST, row_port(row))
    corr = 0

    async def call(req: Any, version: int) -> Any:
        nonlocal corr
        corr += 1
        payload = await _round_trip(reader, writer, _encode(req, version, corr))
        return _decode(req, payload, version)

    try:
        # FindCoordinator creates __consumer_offsets; retried (as clients do) while loading
        for _ in range(RETRIES):
            found = await call(protocol.FindCoordinatorRequest(key=group, key_type=0), 1)
            if found.error_code == 0:
                break
            await asyncio.sleep(0.2)
        for _ in range(RETRIES):
            join = await call(
                JoinGroupRequest(
                    group_id=group,
                    session_timeout_ms=30000,
                    rebalance_timeout_ms=30000,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[("range", b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00")],
                ),
                3,
            )
            if join.error_code not in RETRIABLE:
                break
            await asyncio.sleep(0.2)
        if join.error_code:
            raise RuntimeError(f"JoinGroup {group}: error {join.error_code}")
        member, generation = join.member_id, join.generation_id
        sync = await call(
            SyncGroupRequest(
                group_id=group,
                generation_id=generation,
                member_id=member,
                assignments=[(member, b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")],
            ),
            2,
        )
        if sync.error_code:
            raise RuntimeError(f"SyncGroup {group}: error {sync.error_code}")
        row.joined += 1
        commit = await call(
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=generation,
                member_id=member,
                retention_time_ms=-1,
                topics=[(topic, [(0, 0, "")])],
            ),
            2,
        )
        if all(p.error_code == 0 for t in commit.topics for p in t.partitions):
            row.committed += 1
        ready.set()
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 3.0)
            except TimeoutError:
                hb = await call(
                    HeartbeatRequest(group_id=group, generation_id=generation, member_id=member),
                    2,
                )
                if hb.error_code:
                    row.failures += 1
    except (OSError, asyncio.IncompleteReadError, RuntimeError, ValueError, TypeError) as exc:
        row.failures += 1
        if not row.errors:
            row.errors.append(f"{group}: {exc!r}")
    finally:
        writer.close()


async def _client(row: ConnectionsRow, refresh_s: float, stop: asyncio.Event, n: int) -> None:
    """An idle-ish client: ApiVersions, then a Metadata for one topic every `refresh_s`."""
    try:
        reader, writer = await asyncio.open_connection(HOST, row_port(row))
    except OSError:
        row.failures += 1
        return
    try:
        await _round_trip(reader, writer, api_versions_request(1))
        corr = 1
        await asyncio.sleep(refresh_s * (n % 100) / 100)  # spread the refreshes
        while not stop.is_set():
            corr += 1
            # Metadata v1 for one topic (the row's topic): a client's periodic refresh
            await _round_trip(reader, writer, _metadata_one(corr, row_topic(row)))
            try:
                await asyncio.wait_for(stop.wait(), refresh_s)
            except TimeoutError:
                pass
    except (OSError, asyncio.IncompleteReadError):
        row.failures += 1
    finally:
        writer.close()


def _metadata_one(corr: int, topic: str) -> bytes:
    name = topic.encode()
    body = struct.pack(">ih", 1, len(name)) + name
    return _request(3, 1, corr, body, False)


_PORTS: dict[int, tuple[int, str]] = {}


def row_port(row: ConnectionsRow) -> int:
    return _PORTS[id(row)][0]


def row_topic(row: ConnectionsRow) -> str:
    return _PORTS[id(row)][1]


async def _probe(
    port: int,
    seconds: float,
    out: list[float],
    slow: list[tuple[float, float]] | None = None,
    threshold: float = SLOW_PROBE_MS,
) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        end = time.perf_counter() + seconds
        corr = 0
        while time.perf_counter() < end:
            corr += 1
            t0 = time.perf_counter()
            await _round_trip(reader, writer, api_versions_request(corr))
            ms = (time.perf_counter() - t0) * 1000
            out.append(ms)
            if slow is not None and ms > threshold:
                slow.append((time.time(), ms))
            await asyncio.sleep(PROBE_EVERY_S)
    finally:
        writer.close()


def connections_row(
    connections: int, groups: int, refresh_s: float, probe_s: float, nofile: int | None
) -> ConnectionsRow:
    row = ConnectionsRow(connections, groups)
    topic = "scale-groups"
    proc = LimitedProcess(nofile)
    try:
        proc.start(timeout=60.0)
        create_topics(proc.bootstrap, [topic], 1, 1)
        _PORTS[id(row)] = (proc.port, topic)

        async def go() -> None:
            stop = asyncio.Event()
            tasks = []
            readies = []
            for g in range(groups):
                ready = asyncio.Event()
                readies.append(ready)
                tasks.append(
                    asyncio.create_task(_group_member(f"scale-g{g:05d}", topic, row, stop, ready))
                )
            for n in range(max(0, connections - groups)):
                tasks.append(asyncio.create_task(_client(row, refresh_s, stop, n)))
            # the groups' first joins wait group.initial.rebalance.delay.ms (3 s)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and row.joined + row.failures < groups:
                await asyncio.sleep(0.2)
            cpu0 = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            # in a process of its own: this loop, busy with 2,000 clients, would delay it
            probe = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.scale",
                "--probe-only",
                str(proc.port),
                "--probe-s",
                str(probe_s),
                stdout=asyncio.subprocess.PIPE,
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            )
            out, _ = await probe.communicate()
            for line in out.decode().split("\n"):
                if line.strip():
                    at, ms = (float(x) for x in line.split())
                    row.probe_ms.append(ms)
                    if ms > SLOW_PROBE_MS:
                        row.slow.append((at, ms))
            row.seconds = time.perf_counter() - t0
            row.broker_cpu_s = cpu_seconds(proc.pid) - cpu0
            row.rss_mb = memory_mb(proc.pid)[0]
            row.fds = open_fds(proc.pid)
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run(go())
    finally:
        _PORTS.pop(id(row), None)
        proc.stop()
    return row


# -- fetch sessions row ------------------------------------------------------------------------


@dataclass
class SessionsRow:
    client: str
    partitions: int
    idle_s: float = 0.0
    read: int = 0
    broker_cpu_s: float = 0.0


def _idle_consumer(client: str, bootstrap: str, topic: str, partitions: int) -> Any:
    """(consumer, poll(timeout) -> records) of a consumer assigned every partition from 0."""
    if client == "confluent-kafka":
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "scale-fs", "enable.auto.commit": False}
        )
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

        def cpoll(t: float) -> int:
            m = c.poll(t)
            return int(m is not None and m.error() is None)

        return c, cpoll
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    k = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    k.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
    k.seek_to_beginning()

    def kpoll(t: float) -> int:
        return sum(len(v) for v in k.poll(timeout_ms=int(t * 1000)).values())

    return k, kpoll


def sessions_row(client: str, partitions: int, idle_s: float, nofile: int | None) -> SessionsRow:
    """A consumer of `partitions` partitions, all idle after one record each: the broker's CPU
    over `idle_s` s of polling (KIP-227 sessions make each idle fetch name no partition)."""
    row = SessionsRow(client, partitions, idle_s)
    topic = "scale-idle"
    proc = LimitedProcess(nofile)
    try:
        proc.start(timeout=60.0)
        create_topics(proc.bootstrap, [topic], partitions, 1)
        produce_everywhere(proc.bootstrap, [topic], partitions)
        consumer, poll = _idle_consumer(client, proc.bootstrap, topic, partitions)
        try:
            deadline = time.monotonic() + 60
            while row.read < partitions and time.monotonic() < deadline:
                row.read += poll(0.5)
            cpu0 = cpu_seconds(proc.pid)
            end = time.monotonic() + idle_s
            while time.monotonic() < end:
                row.read += poll(0.2)
            row.broker_cpu_s = cpu_seconds(proc.pid) - cpu0
        finally:
            consumer.close()
    finally:
        proc.stop()
    return row


# -- report -------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_partitions(row: PartitionsRow) -> None:
    total = row.topics * row.partitions
    print(
        f"### {total:,} partitions ({row.topics:,} topics x {row.partitions}), "
        f"RLIMIT_NOFILE {row.nofile or 'inherited'}\n"
    )
    print("| measure | value | target |")
    print("|---|---|---|")
    print(f"| CreateTopics, all | {row.create_s:.1f} s | |")
    print(f"| produce 1 record to each partition | {row.produce_s:.1f} s | |")
    print(f"| open fds after creation | {row.fds_created:,} | bounded |")
    print(f"| RSS after creation | {row.rss_created_mb:.0f} MB | < 500 MB |")
    print(
        f"| restart: first ApiVersions answer | {row.restart_api_versions_ms / 1000:.2f} s "
        "| < 10 s |"
    )
    print(f"| restart: ready line | {row.restart_ready_ms / 1000:.2f} s | < 10 s |")
    md = row.metadata_ms
    print(
        f"| full Metadata v12 ({row.metadata_bytes / 1e3:.0f} kB), median / max | "
        f"{statistics.median(md):.0f} / {max(md):.0f} ms | < 100 ms |"
    )
    print(f"| open fds after restart | {row.fds_restarted:,} | bounded |")
    print(f"| RSS after restart | {row.rss_restarted_mb:.0f} MB | < 500 MB |")
    sample = (row.topics + 49) // 50 * row.partitions
    print(
        f"| records found after restart (sample of {sample:,} partitions) | "
        f"{row.records_found:,} | {sample:,} |"
    )
    for note in row.notes:
        print(f"\nbroker: `{note.strip()}`")
    print()


def print_connections(row: ConnectionsRow) -> None:
    p = row.probe_ms
    print(f"### {row.connections:,} connections, {row.groups:,} consumer groups\n")
    print("| measure | value | target |")
    print("|---|---|---|")
    print(f"| groups joined / committed | {row.joined:,} / {row.committed:,} | {row.groups:,} |")
    print(f"| client failures | {row.failures} | 0 |")
    print(
        f"| probe ApiVersions p50 / p99 / max ({len(p)} probes) | "
        f"{_pct(p, 0.5):.1f} / {_pct(p, 0.99):.1f} / {max(p) if p else float('nan'):.1f} ms "
        "| <= 50 ms |"
    )
    print(
        f"| broker CPU over {row.seconds:.0f} s | {row.broker_cpu_s:.1f} s "
        f"({100 * row.broker_cpu_s / max(row.seconds, 1e-9):.0f} %) | |"
    )
    print(f"| broker RSS / open fds | {row.rss_mb:.0f} MB / {row.fds:,} | |")
    if row.slow:
        when = ", ".join(
            f"{time.strftime('%H:%M:%S', time.gmtime(at))} {ms:.0f} ms" for at, ms in row.slow
        )
        print(f"\nprobes over {SLOW_PROBE_MS:.0f} ms (UTC): {when}")
    print()


SESSIONS = {"confluent-kafka": "none (librdkafka sends full fetches)", "kafka-python": "yes"}


def print_sessions(rows: list[SessionsRow]) -> None:
    print(f"### one consumer of {rows[0].partitions:,} idle partitions\n")
    print("| client | records read | broker CPU while idle | fetch sessions (KIP-227) |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.client} | {r.read:,} | {r.broker_cpu_s:.2f} s over {r.idle_s:.0f} s "
            f"({100 * r.broker_cpu_s / r.idle_s:.0f} %) | {SESSIONS.get(r.client, '')} |"
        )
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--batch", type=int, default=100, help="topics per CreateTopics request")
    ap.add_argument("--metadata-runs", type=int, default=10)
    ap.add_argument(
        "--nofile", type=int, default=20000, help="the broker's RLIMIT_NOFILE; 0: inherit"
    )
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--refresh-s", type=float, default=5.0)
    ap.add_argument("--probe-s", type=float, default=20.0)
    ap.add_argument("--idle-partitions", type=int, default=1000)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--rows", default="partitions,connections,sessions")
    ap.add_argument("--probe-only", type=int, metavar="PORT", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.probe_only:  # the connections row's probe process: one "wall-time ms" line a probe
        found: list[float] = []
        slow: list[tuple[float, float]] = []
        asyncio.run(_probe(a.probe_only, a.probe_s, found, slow, threshold=0.0))
        print("\n".join(f"{at:.3f} {ms:.3f}" for at, ms in slow))
        return 0
    rows = set(a.rows.split(","))
    nofile = a.nofile or None
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores\n", flush=True)
    if "partitions" in rows:
        print_partitions(partitions_row(a.topics, a.partitions, nofile, a.batch, a.metadata_runs))
    if "connections" in rows:
        print_connections(connections_row(a.connections, a.groups, a.refresh_s, a.probe_s, nofile))
    if "sessions" in rows:
        clients = ("confluent-kafka", "kafka-python")
        print_sessions([sessions_row(c, a.idle_partitions, a.idle_s, nofile) for c in clients])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
