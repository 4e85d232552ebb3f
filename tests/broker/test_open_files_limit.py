"""A broker under a low open-files limit (issue 17): `odradek serve` with RLIMIT_NOFILE 300 (set
in the child before it starts) serves 120 partitions (more than it may keep open: its LRU holds
at most limit_for(300) = 22 segment files), produces to and consumes from every one with
confluent-kafka, keeps its descriptors under the limit, stops cleanly, and starts again on the
same data, saying at start that the limit is too low for its partitions, with every record still
there."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.log import open_files

NOFILE = 300
PARTITIONS = 120
TOPIC = "many"
DEADLINE_S = 60.0
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAMPOLINE = (
    "import os, resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({NOFILE}, {NOFILE})); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """`odradek serve` under RLIMIT_NOFILE NOFILE, output to a file; always stopped."""

    def __init__(self, data: str, port: int, out: str) -> None:
        self.port = port
        self.out = out
        self.start = os.path.getsize(out) if os.path.exists(out) else 0  # this run's output
        cmd = [sys.executable, "-c", TRAMPOLINE, "-m", "odradek", "serve"]
        for key, value in {
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": data,
            "offsets.topic.num.partitions": "1",
        }.items():
            cmd += ["--override", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        env["PYTHONPATH"] = REPO
        with open(out, "ab") as f:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + DEADLINE_S
        while "odradek ready" not in self.output():
            assert self.proc.poll() is None, f"broker exited:\n{self.output()}"
            assert time.monotonic() < deadline, f"broker not ready:\n{self.output()}"
            time.sleep(0.05)

    def output(self) -> str:
        with open(self.out, encoding="utf-8", errors="replace") as f:
            f.seek(self.start)
            return f.read()

    def fds(self) -> tuple[int, int]:
        """(every descriptor, those on segment files) of the broker."""
        total = logs = 0
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            total += 1
            try:
                if os.readlink(f"/proc/{self.proc.pid}/fd/{fd}").endswith(".log"):
                    logs += 1
            except OSError:
                pass
        return total, logs

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def consume_all(bootstrap: str) -> dict[int, bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    got: dict[int, bytes] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got[msg.partition()] = msg.value()
    finally:
        consumer.close()
    return got


def test_many_partitions_under_a_low_open_files_limit_and_a_restart(tmp_path):
    data, out = str(tmp_path / "data"), str(tmp_path / "broker.out")
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = Served(data, port, out)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(DEADLINE_S)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        for p in range(PARTITIONS):
            producer.produce(TOPIC, b"value-%d" % p, partition=p)
        assert producer.flush(DEADLINE_S) == 0
        del producer, admin  # (librdkafka would keep reconnecting while the broker is down)
        expected = {p: b"value-%d" % p for p in range(PARTITIONS)}
        assert consume_all(bootstrap) == expected
        # segment files beyond the LRU's limit are held only by fetches in flight: once the
        # consumer's last ones are answered (a loaded machine may be slower) they are let go
        deadline = time.monotonic() + DEADLINE_S
        while (fds := broker.fds())[1] > open_files.limit_for(NOFILE):
            assert time.monotonic() < deadline, f"{fds[1]} segment files held open"
            time.sleep(0.1)
        assert fds[0] < NOFILE
        assert broker.stop() == 0
        assert "Traceback" not in broker.output()

        broker = Served(data, port, out)  # again, on the same data
        assert f"is too low for {PARTITIONS + 1} partitions" in broker.output()
        assert consume_all(bootstrap) == expected
        assert broker.fds()[0] < NOFILE
    finally:
        broker.stop()
    assert "Traceback" not in broker.output()
