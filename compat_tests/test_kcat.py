"""kcat (Debian's 1.7.1 on librdkafka 2.0.2) against a real `odradek serve` process.

kcat is how people poke at a broker from a shell: `-L` metadata, `-P` produce from stdin with
keys (`-K`) and headers (`-H`) and a codec (`-z` / `-X compression.codec`), `-C` consume from the
beginning, an offset, a timestamp (`s@`) or the end, and `-Q` offsets for a timestamp. Topics are
auto-created by the producer's metadata request (kcat has no admin commands). Output is read as
kcat's JSON (`-J`), one message per line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from typing import Any

import pytest

from compat_tests.harness import BrokerProcess

pytestmark = pytest.mark.compat

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]
COUNT = 50
WAIT_S = 30.0
KCAT = shutil.which("kcat") or "kcat"


def kcat(
    broker: BrokerProcess, *args: str, input: str | None = None, timeout: float = WAIT_S
) -> str:
    """Run kcat against the broker; its stdout. Fails with kcat's stderr on a non-zero exit."""
    proc = subprocess.run(
        [KCAT, "-b", broker.bootstrap, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


def lines_for(tag: str, count: int = COUNT) -> list[tuple[str, str]]:
    """(key, value) pairs, one with an empty value; kcat sends them as `key:value` lines."""
    return [
        (f"key-{i}", "" if i == 3 else f"{tag}-value-{i}-" + "x" * (i % 9)) for i in range(count)
    ]


def produce(broker: BrokerProcess, topic: str, pairs: list[tuple[str, str]], *args: str) -> None:
    text = "".join(f"{k}:{v}\n" for k, v in pairs)
    kcat(broker, "-P", "-t", topic, "-K:", *args, input=text)


def consume(broker: BrokerProcess, topic: str, *args: str) -> list[dict[str, Any]]:
    out = kcat(broker, "-C", "-t", topic, "-e", "-J", "-q", *args)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def query(broker: BrokerProcess, topic: str, timestamp: int) -> int:
    """`kcat -Q`: the offset for a timestamp (-1 latest, -2 earliest) of partition 0."""
    out = kcat(broker, "-Q", "-t", f"{topic}:0:{timestamp}")
    prefix = f"{topic} [0] offset "
    (line,) = [ln for ln in out.splitlines() if ln.startswith(prefix)]
    return int(line[len(prefix) :])


def assert_messages(
    msgs: list[dict[str, Any]],
    pairs: list[tuple[str, str]],
    first: int = 0,
    headers: list[str] | None = None,
) -> None:
    assert [m["offset"] for m in msgs] == list(range(first, first + len(pairs)))
    assert [(m["key"], m["payload"]) for m in msgs] == pairs
    assert all(m["partition"] == 0 and m["tstype"] == "create" for m in msgs)
    if headers is not None:
        assert all(m.get("headers") == headers for m in msgs)


# -- metadata ------------------------------------------------------------------------------------


def test_metadata_lists_broker_and_auto_created_topic(
    broker: BrokerProcess, topic_name: str
) -> None:
    produce(broker, topic_name, lines_for("md", 3))
    text = kcat(broker, "-L")
    assert "1 brokers:" in text
    assert f"broker 0 at {broker.bootstrap} (controller)" in text
    assert f'topic "{topic_name}" with 1 partitions:' in text  # num.partitions default
    assert "partition 0, leader 0, replicas: 0, isrs: 0" in text
    md = json.loads(kcat(broker, "-L", "-J", "-t", topic_name))
    assert md["controllerid"] == 0
    assert [b["name"] for b in md["brokers"]] == [broker.bootstrap]
    (topic,) = md["topics"]
    assert topic["topic"] == topic_name and "error" not in topic
    assert [(p["partition"], p["leader"]) for p in topic["partitions"]] == [(0, 0)]


# -- produce and consume: every acks x every codec ----------------------------------------------


@pytest.mark.parametrize("acks", ACKS, ids=lambda a: f"acks={a}")
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume(broker: BrokerProcess, topic_name: str, codec: str, acks: str) -> None:
    pairs = lines_for(f"{codec}-{acks}")
    idempotence = "true" if acks == "all" else "false"
    before = int(time.time() * 1000)
    produce(
        broker,
        topic_name,
        pairs,
        "-H",
        "source=kcat",
        "-H",
        f"codec={codec}",
        "-X",
        f"compression.codec={codec}",
        "-X",
        f"acks={acks}",
        "-X",
        f"enable.idempotence={idempotence}",
        "-X",
        "linger.ms=20",
    )
    after = int(time.time() * 1000)
    msgs = consume(broker, topic_name, "-o", "beginning")
    assert_messages(msgs, pairs, headers=["source", "kcat", "codec", codec])
    assert all(before <= m["ts"] <= after for m in msgs)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_produce_with_z_flag(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    pairs = lines_for("z", 10)
    produce(broker, topic_name, pairs, "-z", codec)
    assert_messages(consume(broker, topic_name, "-o", "beginning"), pairs)


# -- consume from an offset, a timestamp, the end; offsets by timestamp -------------------------


@pytest.fixture(scope="module")
def two_runs(broker: BrokerProcess) -> dict[str, Any]:
    """A topic written by two kcat runs (lz4 then gzip); `split` is the first ts of run two."""
    topic = f"kcat-reads-{os.getpid()}-{time.monotonic_ns()}"
    first, second = lines_for("one", 20), lines_for("two", 15)
    produce(broker, topic, first, "-z", "lz4", "-X", "linger.ms=50")
    first_ts = max(m["ts"] for m in consume(broker, topic, "-o", "beginning"))
    produce(broker, topic, second, "-z", "gzip", "-X", "linger.ms=50")
    msgs = consume(broker, topic, "-o", "beginning")
    split = min(m["ts"] for m in msgs[20:])
    assert split > first_ts, "the second run's timestamps must follow the first's"
    return {"topic": topic, "pairs": first + second, "split": split, "msgs": msgs}


def test_consume_from_offset(broker: BrokerProcess, two_runs: dict[str, Any]) -> None:
    topic, pairs = two_runs["topic"], two_runs["pairs"]
    assert_messages(consume(broker, topic, "-o", "7"), pairs[7:], first=7)  # inside a batch
    assert_messages(consume(broker, topic, "-o", "-4"), pairs[-4:], first=len(pairs) - 4)
    assert_messages(consume(broker, topic, "-o", "beginning", "-c", "5"), pairs[:5])


def test_consume_from_timestamp(broker: BrokerProcess, two_runs: dict[str, Any]) -> None:
    topic, pairs, split = two_runs["topic"], two_runs["pairs"], two_runs["split"]
    assert_messages(consume(broker, topic, "-o", f"s@{split}"), pairs[20:], first=20)
    assert_messages(consume(broker, topic, "-o", "s@0"), pairs)


def test_query_offsets(broker: BrokerProcess, two_runs: dict[str, Any]) -> None:
    topic, split, msgs = two_runs["topic"], two_runs["split"], two_runs["msgs"]
    assert query(broker, topic, -2) == 0  # earliest: the log start offset
    assert query(broker, topic, -1) == len(msgs)  # latest: the log end offset
    assert query(broker, topic, split) == 20
    assert query(broker, topic, 0) == 0
    assert query(broker, topic, max(m["ts"] for m in msgs) + 1) == -1  # past the last record


def test_consume_from_end_sees_only_new_messages(broker: BrokerProcess, topic_name: str) -> None:
    old = lines_for("old", 5)
    produce(broker, topic_name, old)
    assert consume(broker, topic_name, "-o", "end") == []
    proc = subprocess.Popen(
        [KCAT, "-b", broker.bootstrap, "-C", "-t", topic_name, "-o", "end", "-c", "3", "-J"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # kcat reports "Reached end of topic" once it fetched at the end: only then produce
        at_end = threading.Event()
        stderr = bytearray()

        def pump() -> None:
            assert proc.stderr is not None
            while chunk := os.read(proc.stderr.fileno(), 4096):
                stderr.extend(chunk)
                if b"Reached end of topic" in stderr:
                    at_end.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        assert at_end.wait(WAIT_S), f"kcat never reached the end:\n{stderr.decode()}"
        new = lines_for("new", 3)
        produce(broker, topic_name, new, "-z", "snappy")
        proc.wait(timeout=WAIT_S)  # -c 3: exits after three messages
        assert proc.stdout is not None
        out = proc.stdout.read()
        reader.join(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr.decode()
    msgs = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    assert_messages(msgs, new, first=5)
