"""Compressed batches that inflate far: what they cost the broker and everyone else.
`python -m bench.bombs` prints a markdown table.

Each row sends `--bombs` copies of one batch (two connections, half each, at once) to a spawned
broker while a prober connection produces a small uncompressed batch (acks=1) in a loop and
times every round trip. Columns: the broker's answers; its peak RSS over the phase (VmHWM,
reset before) and how far that is above its RSS before; the prober's p50 / p99 / worst round
trip during the phase (a `quiet` row gives the same with nothing else going on); broker CPU
seconds per batch (utime + stime over the phase, less what the quiet prober costs over as long).

Rows:

| row | batch |
|---|---|
| zeros 1 GiB zstd | 33 KB of zstd inflating to 1 GiB of zero bytes, 1000 records declared |
| record 1 GiB zstd | one valid record whose value is 1 GiB of zeros (~33 KB of zstd) |
| record 1000 MiB gzip | the same in gzip at its 1032x ceiling (~1 MB) |
| JSON 200 MB zstd | JSON access-log lines (testing/log_lines.py), 3,777 records in 0.7 MB |
| record 20 MiB raw snappy | one record of 20 MiB of zeros in one raw snappy block (librdkafka's) |
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

from bench.broker_proc import OdradekProcess
from bench.procstat import cpu_seconds, memory_mb, reset_peak_rss
from bench.topics import Topics, topic_name
from odradek.testing.hostile_batches import bomb_batch
from odradek.testing.log_lines import json_log_batch, raw_snappy_bomb_batch, stream_bomb_batch
from odradek.testing.raw import RawClient
from odradek.wire.compression import GZIP, ZSTD
from odradek.wire.records import build_batch

ROWS: dict[str, Callable[[], bytes]] = {
    "zeros 1 GiB zstd": lambda: bomb_batch(ZSTD, 1024),
    "record 1 GiB zstd": lambda: stream_bomb_batch(ZSTD, 1024),
    "record 1000 MiB gzip": lambda: stream_bomb_batch(GZIP, 1000),
    "JSON 200 MB zstd": lambda: json_log_batch(ZSTD, 200_000_000)[0],
    "record 20 MiB raw snappy": lambda: raw_snappy_bomb_batch(20),
}
_NAMES = {0: "NONE", 2: "CORRUPT_MESSAGE", 10: "MESSAGE_TOO_LARGE", 87: "INVALID_RECORD"}


def produce(client: RawClient, topic: str, records: bytes, acks: int = 1) -> int:
    """One Produce v9 to partition 0; its error code."""
    from kafka.protocol.producer import ProduceRequest

    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=60_000,
        topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])
        ],
    )
    (topic_resp,) = client.request(req, 9).responses
    (part,) = topic_resp.partition_responses
    code: int = part.error_code
    return code


class Prober(threading.Thread):
    """Small produces in a loop on their own connection, each round trip timed."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="prober", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.stop = threading.Event()
        self.times: list[float] = []
        self.errors = 0

    def run(self) -> None:
        batch = build_batch([(None, b"p" * 100, (), int(time.time() * 1000))])
        with RawClient(self.bootstrap, timeout=120) as c:
            while not self.stop.is_set():
                start = time.perf_counter()
                if produce(c, self.topic, batch):
                    self.errors += 1
                self.times.append(time.perf_counter() - start)
                self.stop.wait(0.002)

    def summary(self) -> tuple[float, float, float]:
        t = sorted(self.times) or [0.0]
        return t[len(t) // 2] * 1e3, t[int(len(t) * 0.99)] * 1e3, t[-1] * 1e3


def phase(broker: OdradekProcess, topic: str, data: bytes | None, bombs: int, quiet_s: float):
    """(answers, peak RSS MB, growth MB, prober p50/p99/max ms, broker CPU s, wall s)."""
    pid = broker.pid
    rss_before, _ = memory_mb(pid)
    reset_peak_rss(pid)
    cpu0 = cpu_seconds(pid)
    prober = Prober(broker.bootstrap, topic + "-prober")
    prober.start()
    answers: list[int] = []
    wall0 = time.perf_counter()
    if data is None:
        time.sleep(quiet_s)
    else:

        def send(n: int) -> None:
            with RawClient(broker.bootstrap, timeout=600) as c:
                for _ in range(n):
                    answers.append(produce(c, topic, data))

        senders = [
            threading.Thread(target=send, args=(n,)) for n in (bombs - bombs // 2, bombs // 2)
        ]
        for s in senders:
            s.start()
        for s in senders:
            s.join()
    wall = time.perf_counter() - wall0
    prober.stop.set()
    prober.join()
    cpu = cpu_seconds(pid) - cpu0
    _rss, peak = memory_mb(pid)
    return answers, peak, peak - rss_before, prober.summary(), cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bombs", description=__doc__)
    parser.add_argument("--bombs", type=int, default=4, help="batches sent per row")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated row names")
    args = parser.parse_args(argv)
    with OdradekProcess() as broker:
        broker.start()
        topics = Topics(broker.bootstrap)
        topic = topic_name("bombs")
        topics.create(topic, 1, 1, {"max.message.bytes": str(4 << 20)})
        topics.create(topic + "-prober", 1, 1)
        _a, _p, _g, _l, quiet_cpu, quiet_wall = phase(broker, topic, None, 0, 5.0)
        quiet = phase(broker, topic, None, 0, 5.0)
        print(
            "| batch | bytes | answers | broker peak RSS MB (growth) | prober p50 / p99 / max ms"
            " | broker CPU s per batch |"
        )
        print("|---|---:|---|---:|---:|---:|")
        _a, peak, grown, (p50, p99, worst), cpu, wall = quiet
        print(
            f"| quiet (prober only, {wall:.0f} s) | - | - | {peak:.0f} ({grown:+.0f}) | "
            f"{p50:.1f} / {p99:.1f} / {worst:.1f} | - |"
        )
        idle_rate = quiet_cpu / quiet_wall
        for name in args.rows.split(","):
            data = ROWS[name]()
            answers, peak, grown, (p50, p99, worst), cpu, wall = phase(
                broker, topic, data, args.bombs, 0
            )
            names = sorted({_NAMES.get(a, str(a)) for a in answers})
            per = max(0.0, cpu - idle_rate * wall) / max(1, len(answers))
            print(
                f"| {name} | {len(data):,} | {args.bombs} x {'/'.join(names)} | "
                f"{peak:.0f} ({grown:+.0f}) | {p50:.1f} / {p99:.1f} / {worst:.1f} | {per:.2f} |"
            )
        if not broker.alive():
            print("broker died")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
