"""Request-decode micro-benchmark: `python -m bench.decode` prints a markdown table.

Times `odradek.wire.protocol.decode_request` (what dispatch runs for every request) on typical
hot-path bodies: Produce with one or several partitions of record-batch bytes, and Fetch with a
few partitions, in old and flexible versions. Both columns include the header parse: kafka-python's
own decoder (no checks) and odradek's strict decoder (nullability, counts and lengths against the
bytes left, bounded varints, tagged fields in place; `odradek.wire.strict_decoder`), so the cost
of the checks is read off one run. Results are the best of `--repeat` runs of `--number` calls.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

from odradek.wire import protocol
from odradek.wire.header import finish_flexible, parse_fixed


def _produce(version: int, partitions: int, batch_size: int) -> Any:
    T = protocol.ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    parts = [P(index=i, records=b"\x00" * batch_size) for i in range(partitions)]
    return protocol.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[T(name="bench-topic", partition_data=parts)],
    )


def _fetch(version: int, partitions: int) -> Any:
    T = protocol.FetchRequest.FetchTopic
    P = T.FetchPartition
    parts = [
        P(
            partition=i,
            current_leader_epoch=-1,
            fetch_offset=1000 * i,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for i in range(partitions)
    ]
    return protocol.FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[T(topic="bench-topic", topic_id=None, partitions=parts)],
        forgotten_topics_data=[],
        rack_id="",
    )


def _metadata(version: int, topics: int) -> Any:
    T = protocol.MetadataRequest.MetadataRequestTopic
    return protocol.MetadataRequest(
        topics=[T(name=f"topic-{i}", topic_id=None) for i in range(topics)],
        allow_auto_topic_creation=False,
    )


def cases() -> list[tuple[str, int, int, bytes]]:
    """(label, api_key, version, frame payload) for each workload."""
    out: list[tuple[str, int, int, bytes]] = []

    def add(label: str, req: Any, version: int) -> None:
        req.with_header(correlation_id=1, client_id="bench")
        payload = bytes(req.encode(version=version, header=True))
        out.append((label, req.API_KEY, version, payload))

    add("Produce v3, 1 partition x 16 KiB", _produce(3, 1, 16384), 3)
    add("Produce v9, 1 partition x 16 KiB", _produce(9, 1, 16384), 9)
    add("Produce v9, 12 partitions x 1 KiB", _produce(9, 12, 1024), 9)
    add("Fetch v4, 4 partitions", _fetch(4, 4), 4)
    add("Fetch v12, 4 partitions", _fetch(12, 4), 12)
    add("Fetch v12, 64 partitions", _fetch(12, 64), 12)
    add("Metadata v12, 10 topics", _metadata(12, 10), 12)
    return out


def _decoder(payload: bytes) -> Callable[[], Any]:
    """What dispatch runs: header parse, then the strict decoder."""

    def run() -> Any:
        header = parse_fixed(payload)
        if protocol.is_flexible_request(header.api_key, header.api_version):
            finish_flexible(payload, header)
        return protocol.decode_request(
            header.api_key, header.api_version, payload, header.body_offset
        )

    return run


def _plain_decoder(payload: bytes) -> Callable[[], Any]:
    """The same with kafka-python's own (unchecked) decoder, for comparison."""

    def run() -> Any:
        header = parse_fixed(payload)
        if protocol.is_flexible_request(header.api_key, header.api_version):
            finish_flexible(payload, header)
        cls = protocol.request_class(header.api_key)
        return cls.decode(memoryview(payload)[header.body_offset :], version=header.api_version)

    return run


def _best_us(run: Callable[[], Any], number: int, repeat: int) -> float:
    run()  # compile the decoder outside the timing
    return min(timeit.repeat(run, number=number, repeat=repeat)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__)
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs; the best is kept")
    args = parser.parse_args(argv)
    print("| request | bytes | kafka-python decode µs | strict decode µs | change |")
    print("|---|---:|---:|---:|---:|")
    for label, _key, _version, payload in cases():
        plain = _best_us(_plain_decoder(payload), args.number, args.repeat)
        strict = _best_us(_decoder(payload), args.number, args.repeat)
        change = (strict - plain) / plain * 100
        print(f"| {label} | {len(payload)} | {plain:.2f} | {strict:.2f} | {change:+.0f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
