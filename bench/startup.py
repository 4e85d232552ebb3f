"""`python -m bench.startup`: how fast a broker starts and stops, alone and a thousand in a row.

Start, ready and teardown (milliseconds, median and range over `--runs`):
- in-process `odradek.testing.Broker()` (its own event-loop thread, temp dir on the default
  temp filesystem) and `Broker(shared_loop=True, tmpfs=True)` (what the `odradek_fresh_broker`
  fixture uses: the event-loop thread all such brokers share, data in /dev/shm): `start()`
  returning, then until a raw ApiVersions request is answered, then `stop()` (temp dir removed;
  the fresh broker is stopped as the fixture stops it, `clean=False`);
- the process `python -m odradek serve`: spawned until the first ApiVersions answer, then
  SIGTERM until it exits.

The test replacement at scale (issue 17), each broker started, used for one produce and one
fetch of that record, and stopped:
- an in-process loop of `--brokers` fresh brokers (and of a few hundred default `Broker()`s,
  for comparison), no pytest;
- a pytest session (a subprocess `python -m pytest` on a generated project) of `--brokers`
  tests, each with its own `odradek_fresh_broker`: its wall time (interpreter start, imports and
  collection included) and the time of its test loop alone. The produce/fetch is made with a
  minimal client (raw Produce v3 / Fetch v4 frames: the broker's share of a test) and, in a
  second session, with confluent-kafka (Producer + group Consumer, as a user's test would).
- idle RSS per broker: the marginal RSS of `--rss-brokers` live brokers in one fresh process,
  each after one produce/fetch.

Nothing here is asserted; the issue's targets: 1,000 brokers in a pytest session in under 5 s,
idle RSS under 15 MB per broker.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from bench.broker_proc import REPO_ROOT, OdradekProcess
from bench.probe import api_versions

RUNS = 5
BROKERS = 1000
DEFAULT_BROKERS = 200  # default Broker()s in the comparison loop (each ~5-10 ms)
RSS_BROKERS = 200
TOPIC = "t"

# -- a minimal client: one Produce v3 and one Fetch v4, framed by hand ---------------------------

_REQ_HEADER = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id len
_CLIENT_ID = b"bench-startup"
_TOPIC = TOPIC.encode()


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    size = _REQ_HEADER.size - 4 + len(_CLIENT_ID) + len(body)
    return _REQ_HEADER.pack(size, api_key, version, 1, len(_CLIENT_ID)) + _CLIENT_ID + body


def _one_record_batch(value: bytes) -> bytes:
    from odradek.wire.records import build_batch

    return build_batch([(None, value, (), int(time.time() * 1000))])


def produce_request(value: bytes) -> bytes:
    """Produce v3: acks 1, one record to partition 0 of TOPIC."""
    batch = _one_record_batch(value)
    body = (
        struct.pack(">hhi", -1, 1, 10_000)  # null transactional id, acks, timeout
        + struct.pack(">ih", 1, len(_TOPIC))
        + _TOPIC
        + struct.pack(">iii", 1, 0, len(batch))
        + batch
    )
    return _frame(0, 3, body)


FETCH_REQUEST = _frame(
    1,
    4,
    struct.pack(">iiiib", -1, 0, 0, 1 << 20, 0)  # replica, max wait 0, min bytes 0, max, isolation
    + struct.pack(">ih", 1, len(_TOPIC))
    + _TOPIC
    + struct.pack(">iiqi", 1, 0, 0, 1 << 20),  # partition 0 from offset 0
)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def produce_and_fetch(bootstrap: str, value: bytes = b"hello") -> None:
    """Produce one record to TOPIC-0 and fetch it back; raise unless both went right."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(produce_request(value))
        resp = _read_frame(sock)
        # correlation id, topics count, name, partitions count, partition, error code
        (err,) = struct.unpack_from(">h", resp, 4 + 4 + 2 + len(_TOPIC) + 4 + 4)
        if err:
            raise RuntimeError(f"produce answered error {err}")
        sock.sendall(FETCH_REQUEST)
        resp = _read_frame(sock)
        # correlation id, throttle, topics count, name, partitions count, partition, error code
        (err,) = struct.unpack_from(">h", resp, 4 + 4 + 4 + 2 + len(_TOPIC) + 4 + 4)
        if err or value not in resp:
            raise RuntimeError(f"fetch answered error {err} or not the record")


# -- start, ready, teardown ------------------------------------------------------------------------


def _ms(seconds: float) -> float:
    return seconds * 1000


def in_process(runs: int, fresh: bool) -> tuple[list[float], list[float], list[float]]:
    from odradek.testing import Broker

    start, ready, teardown = [], [], []
    for _ in range(runs + 1):  # the first run warms up (imports, first allocations)
        broker = Broker(shared_loop=True, tmpfs=True) if fresh else Broker()
        t0 = time.perf_counter()
        broker.start()
        t1 = time.perf_counter()
        api_versions("127.0.0.1", broker.port)
        t2 = time.perf_counter()
        broker.stop(clean=not fresh)
        t3 = time.perf_counter()
        start.append(_ms(t1 - t0))
        ready.append(_ms(t2 - t0))
        teardown.append(_ms(t3 - t2))
    return start[1:], ready[1:], teardown[1:]


def as_process(runs: int) -> tuple[list[float], list[float], list[float]]:
    ready, teardown = [], []
    for _ in range(runs):
        proc = OdradekProcess()
        try:
            timing = proc.start()
            ready.append(timing.api_versions_ms)
            t1 = time.perf_counter()
            proc.stop()
            teardown.append(_ms(time.perf_counter() - t1))
        finally:
            if proc.alive():
                proc.stop()
    return [], ready, teardown


# -- many brokers ----------------------------------------------------------------------------------


def broker_loop(count: int, fresh: bool) -> tuple[float, float]:
    """(wall s, CPU s) for `count` brokers, each started, used for a produce/fetch, stopped."""
    from odradek.testing import Broker

    def one() -> None:
        broker = (Broker(shared_loop=True, tmpfs=True) if fresh else Broker()).start()
        try:
            broker.create_topic(TOPIC)
            produce_and_fetch(broker.bootstrap)
        finally:
            broker.stop(clean=not fresh)

    one()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(count):
        one()
    return time.perf_counter() - t0, time.process_time() - c0


RAW_TEST = """
import pytest

from bench.startup import TOPIC, produce_and_fetch


@pytest.mark.parametrize("n", range({count}))
def test_own_broker(odradek_fresh_broker, n):
    odradek_fresh_broker.create_topic(TOPIC)
    produce_and_fetch(odradek_fresh_broker.bootstrap, b"record %d" % n)
"""

CONFLUENT_TEST = """
import confluent_kafka
import pytest

CLIENT = {{"socket.nagle.disable": True, "enable.metrics.push": False, "fetch.wait.max.ms": 10}}
# no commit at close: librdkafka takes 10-50 ms over that, which would hide the broker's share
CONSUMER = {{**CLIENT, "group.id": "g", "enable.auto.commit": False}}


@pytest.mark.parametrize("n", range({count}))
def test_own_broker(odradek_fresh_broker, n):
    bootstrap = odradek_fresh_broker.bootstrap
    odradek_fresh_broker.create_topic("t")
    producer = confluent_kafka.Producer({{"bootstrap.servers": bootstrap, **CLIENT}})
    producer.produce("t", b"record %d" % n)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({{"bootstrap.servers": bootstrap, **CONSUMER}})
    consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
    try:
        message = consumer.poll(10)
        assert message is not None and message.value() == b"record %d" % n
    finally:
        consumer.close()
"""

# times the test loop (first test's setup to the last one's teardown) into $STARTUP_LOOP_FILE
CONFTEST = """
import os
import time

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    t0 = time.perf_counter()
    yield
    with open(os.environ["STARTUP_LOOP_FILE"], "w") as f:
        f.write(str(time.perf_counter() - t0))
"""


def pytest_session(count: int, test_source: str) -> tuple[float, float, float]:
    """(session wall s, test loop s, session CPU s) of `count` tests, each with its own fresh
    broker (the CPU time is the whole pytest process's: start-up and collection too)."""
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        project = Path(tmp)
        (project / "conftest.py").write_text(CONFTEST)
        (project / "test_brokers.py").write_text(textwrap.dedent(test_source).format(count=count))
        loop_file = project / "loop.txt"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
            "STARTUP_LOOP_FILE": str(loop_file),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
        cmd += ["-p", "no:randomly", "-W", "ignore::DeprecationWarning", "test_brokers.py"]
        t0, c0 = time.perf_counter(), _children_cpu()
        proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
        if proc.returncode != 0:
            raise RuntimeError(
                f"pytest session failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
            )
        return wall, float(loop_file.read_text()), cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _used_mb(path: str) -> float:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize / (1 << 20)


def rss_child(count: int, fresh: bool) -> dict[str, float]:
    """In this (fresh) process: RSS before and after `count` live brokers, each used once, and
    what their data dirs take (tmpfs pages are RAM, though no process's RSS)."""
    import gc

    from odradek.testing import Broker
    from odradek.testing.broker import tmpfs_dir

    data = (tmpfs_dir() if fresh else None) or tempfile.gettempdir()

    def make() -> Any:
        broker = (Broker(shared_loop=True, tmpfs=True) if fresh else Broker()).start()
        broker.create_topic(TOPIC)
        produce_and_fetch(broker.bootstrap)
        return broker

    make().stop(clean=not fresh)  # imports, the shared loop thread, first allocations
    gc.collect()
    before, data_before = _rss_mb(), _used_mb(data)
    brokers = [make() for _ in range(count)]
    gc.collect()
    after, data_after = _rss_mb(), _used_mb(data)
    for broker in brokers:
        broker.stop(clean=not fresh)
    return {
        "before_mb": before,
        "after_mb": after,
        "per_broker_mb": (after - before) / count,
        "data_per_broker_mb": (data_after - data_before) / count,
    }


def rss_per_broker(count: int, fresh: bool) -> dict[str, float]:
    code = (
        "import json; from bench.startup import rss_child; "
        f"print(json.dumps(rss_child({count}, {fresh})))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


# -- report ----------------------------------------------------------------------------------------


def _cell(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def render_startup(rows: list[tuple[str, list[float], list[float], list[float]]]) -> str:
    lines = [
        "| broker | start ms | ready ms | teardown ms |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {name} | {_cell(s)} | {_cell(r)} | {_cell(t)} |" for name, s, r, t in rows]
    return "\n".join(lines)


def render_scale(rows: list[tuple[str, int, float, float | None]]) -> str:
    lines = [
        "| brokers started, used for one produce + fetch, stopped | brokers | s "
        "| ms per broker | CPU s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, n, s, cpu in rows:
        cpu_cell = "" if cpu is None else f"{cpu:.2f}"
        lines.append(f"| {name} | {n} | {s:.2f} | {s / n * 1000:.2f} | {cpu_cell} |")
    return "\n".join(lines)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--brokers", type=int, default=BROKERS, help="brokers in the loops")
    parser.add_argument("--rss-brokers", type=int, default=RSS_BROKERS)
    parser.add_argument("--no-process", action="store_true", help="skip `odradek serve`")
    parser.add_argument(
        "--no-confluent", action="store_true", help="skip the confluent-kafka pytest session"
    )
    args = parser.parse_args(argv)
    print(f"load average before: {_load()}")
    rows = [
        ("in-process Broker()", *in_process(args.runs, fresh=False)),
        ("in-process Broker(shared_loop=True, tmpfs=True)", *in_process(args.runs, fresh=True)),
    ]
    if not args.no_process:
        rows.append(("process `odradek serve`", *as_process(args.runs)))
    print(render_startup(rows))
    print()
    n, n_default = args.brokers, min(args.brokers, DEFAULT_BROKERS)
    scale: list[tuple[str, int, float, float | None]] = [
        ("in-process loop, Broker()", n_default, *broker_loop(n_default, fresh=False)),
        ("in-process loop, Broker(shared_loop=True, tmpfs=True)", n, *broker_loop(n, fresh=True)),
    ]
    sessions = [("raw client", RAW_TEST)]
    if not args.no_confluent:
        sessions.append(("confluent-kafka", CONFLUENT_TEST))
    for client, source in sessions:
        wall, loop, cpu = pytest_session(n, source)
        scale += [
            (f"pytest session, odradek_fresh_broker, {client}: wall", n, wall, cpu),
            (f"pytest session, odradek_fresh_broker, {client}: test loop", n, loop, None),
        ]
    print(render_scale(scale))
    print()
    print(
        "| idle brokers alive in one process | brokers | RSS before MB | after MB "
        "| RSS MB per broker | data dir MB per broker |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name, fresh in (("Broker()", False), ("Broker(shared_loop=True, tmpfs=True)", True)):
        r = rss_per_broker(args.rss_brokers, fresh)
        print(
            f"| {name} | {args.rss_brokers} | {r['before_mb']:.0f} | {r['after_mb']:.0f} "
            f"| {r['per_broker_mb']:.2f} | {r['data_per_broker_mb']:.2f} |"
        )
    print(f"\nload average after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
