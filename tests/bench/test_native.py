"""The native bench driver (bench/native/odradek_perf.c, librdkafka's C API) against a real
in-process broker: records it produces are delivered and read back, at full speed, at an
offered rate, and through the group-committed fsync of flush.messages=1 (log/flusher.py; a failed
fsync there is compat_tests/test_disk_faults.py's); and the machine's ceilings helpers
(bench/ceilings.py) return numbers. No timing is asserted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import ceilings, native
from bench.workloads import ClientSettings
from odradek.log import flusher
from odradek.testing import Broker

try:
    native.ensure_built()
except native.NativeUnavailable as exc:  # scripts/setup.sh test installs librdkafka-dev and gcc
    pytest.fail(f"native driver unavailable (run scripts/setup.sh test): {exc}", pytrace=False)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    b = Broker().start()
    try:
        yield b
    finally:
        b.stop()


def create_topic(broker: Broker, name: str, partitions: int, **config: str) -> str:
    configs = {k.replace("_", "."): v for k, v in config.items()}
    broker.call(lambda s: s.topics.create_topic(name, partitions, -1, configs))
    return name


def settings(broker: Broker, partitions: int, acks: str = "all") -> ClientSettings:
    return ClientSettings(
        bootstrap=broker.bootstrap, partitions=partitions, acks=acks, phase_timeout_s=60.0
    )


def test_native_driver_produces_and_reads_back(broker: Broker) -> None:
    topic = create_topic(broker, "native-rt", 2)
    client = settings(broker, 2, acks="1")
    produced = native.produce(client, topic, 200, 5000)
    assert (produced.records, produced.errors, produced.value_bytes) == (5000, 0, 5000 * 200)
    assert produced.p50_ms is not None and produced.p99_ms is not None
    assert produced.p999_ms is not None and produced.p50_ms <= produced.p99_ms <= produced.p999_ms
    offered = native.produce(client, topic, 1000, 500, rate=2e6)  # 0.25 s of 2 MB/s
    assert (offered.records, offered.errors) == (500, 0)

    consumed = native.consume(client, topic, 5500)
    assert consumed.records == 5500 and consumed.errors == 0
    assert consumed.value_bytes == 5000 * 200 + 500 * 1000


def test_flush_messages_1_is_group_committed_and_read_back(broker: Broker) -> None:
    topic = create_topic(broker, "native-fsync", 3, flush_messages="1")
    before = broker.call(lambda s: _flusher_counts())
    client = settings(broker, 3)
    produced = native.produce(client, topic, 100, 3000)
    assert (produced.records, produced.errors) == (3000, 0)
    rounds, synced = broker.call(lambda s: _flusher_counts())
    assert rounds > before[0] and synced > before[1]  # the appends were fsync'ed in rounds
    ends = broker.call(
        lambda s: [
            (p.high_watermark, p.log.log_end_offset, p.log.synced_offset)
            for p in (s.topics.get(topic, i) for i in range(3))
            if p is not None
        ]
    )
    assert sum(end for _hw, end, _synced in ends) == 3000
    assert all(hw == end == synced for hw, end, synced in ends), ends
    consumed = native.consume(client, topic, 3000)
    assert consumed.records == 3000 and consumed.errors == 0


def _flusher_counts() -> tuple[int, int]:
    f = flusher.for_running_loop()
    assert f is not None
    return f.rounds, f.synced_logs


def test_ceilings_return_numbers(tmp_path: Path) -> None:
    tcp = ceilings.loopback_tcp(limit_bytes=32 << 20, limit_s=1.0)
    assert tcp.bytes >= 1 << 20 and tcp.seconds > 0 and tcp.mb_per_s > 0
    sent = ceilings.sendfile(str(tmp_path), file_bytes=4 << 20, limit_bytes=16 << 20, limit_s=1.0)
    assert sent.bytes >= 4 << 20 and sent.mb_per_s > 0
    cached, synced = ceilings.sequential_write(str(tmp_path), limit_bytes=8 << 20)
    assert cached.bytes == synced.bytes == 8 << 20 and synced.seconds >= cached.seconds
    assert ceilings.fsync_latency(str(tmp_path), rounds=3) > 0
    assert not list(tmp_path.iterdir())  # the helpers clean up after themselves
