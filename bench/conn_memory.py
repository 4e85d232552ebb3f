"""Where an idle connection's memory goes: `python -m bench.conn_memory [--connections N]`.

Starts a broker in this process (its own event-loop thread, port 0, a temporary data dir),
takes a tracemalloc snapshot, opens `--connections` connections from a child process (each
answered one ApiVersions, then left idle), takes another and prints the RSS growth and the
largest differences per connection by source line. The clients live in the child so that
only the broker's allocations are traced.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc

from bench.broker_proc import REPO_ROOT
from bench.procstat import memory_mb
from odradek.broker.config import BrokerConfig
from odradek.broker.server import Broker

_CLIENTS = """
import asyncio, sys
from bench import scale
async def go(port, n):
    writers = []
    for i in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
        await scale._round_trip(reader, writer, scale.api_versions_request(i + 1))
    print("open", flush=True)
    sys.stdin.readline()
asyncio.run(go(int(sys.argv[1]), int(sys.argv[2])))
"""


def measure(connections: int, top: int) -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory() as data:
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data}
        broker = Broker(BrokerConfig(props))
        asyncio.run_coroutine_threadsafe(broker.start(), loop).result(60)
        try:
            tracemalloc.start(4)
            gc.collect()
            rss0, snap0 = memory_mb(os.getpid())[0], tracemalloc.take_snapshot()
            cmd = [sys.executable, "-c", _CLIENTS, str(broker.bound[0].port), str(connections)]
            child = subprocess.Popen(
                cmd, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            try:
                assert child.stdout is not None and child.stdin is not None
                if child.stdout.readline().strip() != "open":
                    raise RuntimeError("the client process did not open its connections")
                time.sleep(1.0)  # let the last connections' handling settle
                gc.collect()
                rss1, snap1 = memory_mb(os.getpid())[0], tracemalloc.take_snapshot()
                child.stdin.write("\n")
                child.stdin.flush()
            finally:
                child.wait(30)
            diff = snap1.compare_to(snap0, "lineno")
            traced = sum(d.size_diff for d in diff)
            n = connections
            print(
                f"{n} idle connections: RSS {rss0:.1f} -> {rss1:.1f} MB "
                f"({(rss1 - rss0) * 1e3 / n:.1f} KB each, tracemalloc on); traced "
                f"{traced / 1e6:.1f} MB ({traced / n / 1024:.2f} KiB each)"
            )
            for d in diff[:top]:
                print(f"{d.size_diff / n:9.0f} B/connection {d.count_diff:8d}  {d.traceback[0]}")
        finally:
            tracemalloc.stop()
            asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(60)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.conn_memory", description=__doc__)
    p.add_argument("--connections", type=int, default=2000)
    p.add_argument("--top", type=int, default=12)
    opts = p.parse_args(argv)
    measure(opts.connections, opts.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
