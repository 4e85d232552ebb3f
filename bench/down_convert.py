"""The down-conversion rows (issue 16): reading 1 KiB records with Fetch v3 (magic 1 message sets
made from the log's v2 batches while the answer is written) and Fetch v1 (magic 0), next to
Fetch v12 (the v2 batches sent from the segment files with sendfile, zero-copy).

`python -m bench.down_convert` spawns `odradek serve`, produces N records of --size bytes with
confluent-kafka into a one-partition topic, then reads them all back once per row with a raw
fetch loop (one connection, one partition, --partition-max-bytes per request, the next offset
taken from the answer's last complete batch or message), so the client does almost nothing and
the broker's CPU seconds are the cost of serving. Columns: MB/s of values, broker CPU s and CPU s
per GB of values, broker peak RSS (VmHWM reset per phase). Below the table, the large-fetch rows:
one Fetch of --large-mb MB from offset 0, v12 and v3, with the broker's RSS growth over the
phase: a lazy down-conversion holds a chunk (256 KiB of batches) at a time, not the answer.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from dataclasses import asdict, dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest

from bench.broker_proc import OdradekProcess
from bench.procstat import ProcessMeter, SelfMeter, memory_mb
from odradek.testing.raw import RawClient

TOPIC = "down-convert"
_BATCH = struct.Struct(">qi")  # base offset, batch length
_DELTA = struct.Struct(">i")


@dataclass(slots=True)
class Row:
    name: str
    records: int
    value_mb: float
    wire_mb: float
    wall_s: float
    broker_cpu_s: float
    peak_rss_mb: float
    rss_before_mb: float
    client_cpu_s: float


def next_offset(records: bytes, version: int, current: int) -> int:
    """The offset after the last complete batch (v4+) or message (v0-3) of `records`."""
    pos, last = 0, current - 1
    end = len(records)
    while pos + 12 <= end:
        base, length = _BATCH.unpack_from(records, pos)
        if pos + 12 + length > end:
            break
        if version >= 4:
            (delta,) = _DELTA.unpack_from(records, pos + 23)
            last = base + delta
        else:
            last = base  # a message's offset; a compressed wrapper's is its last inner one
        pos += 12 + length
    return last + 1


def fetch_request(offset: int, partition_max: int) -> object:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=max(partition_max, 1 << 20),
        isolation_level=0,
        topics=[
            FetchRequest.FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max,
                        log_start_offset=-1,
                        current_leader_epoch=-1,
                    )
                ],
            )
        ],
    )


def _records(resp: object) -> bytes:
    part = resp.responses[0].partitions[0]  # type: ignore[attr-defined]
    if part.error_code:
        raise RuntimeError(f"fetch answered error {part.error_code}")
    return part.records or b""


def read_all(bootstrap: str, version: int, records: int, partition_max: int) -> tuple[int, int]:
    """Fetch from offset 0 until `records` records are read: (records, record bytes)."""
    offset = 0
    wire = 0
    with RawClient(bootstrap, timeout=60.0) as raw:
        while offset < records:
            data = _records(raw.request(fetch_request(offset, partition_max), version))
            wire += len(data)
            nxt = next_offset(data, version, offset)
            if nxt <= offset:
                raise RuntimeError(f"no progress at offset {offset} ({len(data)} bytes)")
            offset = nxt
    return offset, wire


def produce(bootstrap: str, records: int, size: int, compression: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "socket.nagle.disable": True,
        }
    )
    value = os.urandom(size // 2).hex().encode()[:size]
    for i in range(records):
        while True:
            try:
                p.produce(TOPIC, value=value, key=b"%d" % i)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        raise RuntimeError("records left undelivered")


def phase(name: str, broker_pid: int, fn: object, size: int, *args: object) -> Row:
    """Run `fn(*args)` -> (records, bytes), measuring the broker over it."""
    meter = ProcessMeter(broker_pid)
    me = SelfMeter()
    rss_before = meter_rss(broker_pid)
    meter.begin()
    me.begin()
    start = time.perf_counter()
    got, wire = fn(*args)  # type: ignore[operator]
    wall = time.perf_counter() - start
    usage = meter.end()
    client_cpu, _ = me.end()
    return Row(
        name,
        got,
        got * size / 1e6,
        wire / 1e6,
        wall,
        usage.cpu_s,
        usage.peak_rss_mb,
        rss_before,
        client_cpu,
    )


def meter_rss(pid: int) -> float:
    return memory_mb(pid)[0]


def one_fetch(bootstrap: str, version: int, nbytes: int) -> tuple[int, int]:
    with RawClient(bootstrap, timeout=120.0) as raw:
        data = _records(raw.request(fetch_request(0, nbytes), version))
    return next_offset(data, version, 0), len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.down_convert", description=__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024, help="value bytes (default 1024)")
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4"])
    ap.add_argument("--partition-max-bytes", type=int, default=1 << 20)
    ap.add_argument("--large-mb", type=int, default=50, help="the single large fetch, MB")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each row, interleaved")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    with OdradekProcess() as broker:
        broker.start()
        produce(broker.bootstrap, args.records, args.size, args.compression)
        rows: list[Row] = []
        names = {12: "Fetch v12 (zero-copy)", 3: "Fetch v3 (magic 1)", 1: "Fetch v1 (magic 0)"}
        for _ in range(args.rounds):
            for version in (12, 3, 1):
                rows.append(
                    phase(
                        names[version],
                        broker.pid,
                        read_all,
                        args.size,
                        broker.bootstrap,
                        version,
                        args.records,
                        args.partition_max_bytes,
                    )
                )
        large = []
        nbytes = args.large_mb * 1_000_000
        for version in (12, 3):
            large.append(
                phase(
                    f"one {args.large_mb} MB Fetch v{version}",
                    broker.pid,
                    one_fetch,
                    args.size,
                    broker.bootstrap,
                    version,
                    nbytes,
                )
            )
    print(
        f"\n{args.records} records of {args.size} B, compression {args.compression}, "
        f"{args.partition_max_bytes} B per fetch; load average before: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    print(
        "| row | MB/s (values) | wire MB | broker CPU s | broker CPU s/GB "
        "| broker peak RSS MB | client CPU s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.name} | {r.value_mb / r.wall_s:.1f} | {r.wire_mb:.1f} | {r.broker_cpu_s:.2f} "
            f"| {r.broker_cpu_s / (r.value_mb / 1000):.2f} | {r.peak_rss_mb:.0f} "
            f"| {r.client_cpu_s:.2f} |"
        )
    print("\n| large fetch | records | bytes MB | broker CPU s | RSS before MB | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in large:
        print(
            f"| {r.name} | {r.records} | {r.wire_mb:.1f} | {r.broker_cpu_s:.2f} "
            f"| {r.rss_before_mb:.0f} | {r.peak_rss_mb:.0f} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": [asdict(r) for r in rows], "large": [asdict(r) for r in large]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
