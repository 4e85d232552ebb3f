"""`python -m bench.rawproduce`: the broker's produce cost with the client's noise taken out.

A producer that costs nothing per record: one Produce v9 request of `--records` records of
`--value-size` bytes (one v2 batch, acks=1, one partition) is built once and sent `--requests`
times over one socket, one in flight, after a warm-up. Every request has the same size, so the
broker's CPU per GB does not move with the client's batching (librdkafka's batches shrink when
the machine is loaded, which makes the native produce row too noisy to show a few percent).
Prints broker CPU seconds per GB of values and MB/s; run it a few times, interleaved, when
comparing two trees (the minimum or the median is the number, the machine being shared).

Starts its own broker (`bench.broker_proc`, from this checkout), and always stops it.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import time

from bench.broker_proc import OdradekProcess
from bench.procstat import cpu_seconds
from odradek.clock import now_ms
from odradek.wire import protocol
from odradek.wire.records import build_batch

TOPIC = "bench-rawproduce"
WARMUP = 20


def _request(records: int, value_size: int) -> bytes:
    batch = build_batch([(None, os.urandom(value_size), [], now_ms()) for _ in range(records)])
    T = protocol.ProduceRequest.TopicProduceData
    req = protocol.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[T(name=TOPIC, partition_data=[T.PartitionProduceData(0, batch)])],
    )
    req.with_header(correlation_id=1, client_id="odradek-rawproduce")
    payload = bytes(req.encode(version=9, header=True))
    return struct.pack(">i", len(payload)) + payload


def _read_exact(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("broker closed the connection")
        got += n
    return buf


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)


def run(requests: int, records: int, value_size: int) -> tuple[float, float]:
    """(broker CPU s per GB of values, MB/s of values)."""
    frame = _request(records, value_size)
    with OdradekProcess() as broker:
        broker.start()
        _create_topic(broker.bootstrap)
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            cpu0, t0 = 0.0, 0.0
            for i in range(WARMUP + requests):
                if i == WARMUP:
                    cpu0, t0 = cpu_seconds(broker.pid), time.perf_counter()
                sock.sendall(frame)
                (size,) = struct.unpack(">i", _read_exact(sock, 4))
                _read_exact(sock, size)
            cpu, wall = cpu_seconds(broker.pid) - cpu0, time.perf_counter() - t0
    gb = requests * records * value_size / 1e9
    return cpu / gb, gb * 1000 / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rawproduce", description=__doc__)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--records", type=int, default=950, help="records per request")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for _ in range(args.runs):
        cpu_per_gb, mb_s = run(args.requests, args.records, args.value_size)
        load = os.getloadavg()[0]
        print(f"broker CPU {cpu_per_gb:.3f} s/GB, {mb_s:,.0f} MB/s (load {load:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
