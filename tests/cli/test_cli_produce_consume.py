"""`odradek produce` and `odradek consume` against a real broker, as kafka-console-producer /
kafka-console-consumer users drive them (issue 13): batching, producer and reader properties,
record size limits, offsets, partitions, groups, the formatter and the isolation level.

Each command runs as a subprocess (`python -m odradek`, the bootstrap in ODRADEK_BOOTSTRAP);
what reached the log is checked by reading the partition's segment files (batches, producer ids,
compression) or with kafka-python.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import json
import os
import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.partitioner.default import murmur2

from odradek.testing import Broker, Cluster
from odradek.wire.batch import iter_batches
from tests.cli.cli_run import start_odradek

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 90
_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = {"group.initial.rebalance.delay.ms": "0"}
    with Broker(config=config) as b:
        yield b


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:50].replace('[', '-').replace(']', '')}-{next(_names)}"


def cli(
    broker: Broker,
    *args: str,
    stdin: str | bytes | None = None,
    status: int | None = 0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ODRADEK_BOOTSTRAP": broker.bootstrap,
        **(env or {}),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        env=env,
        cwd=REPO,
    )
    if status is not None:
        assert proc.returncode == status, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def out(proc: subprocess.CompletedProcess[bytes]) -> list[str]:
    return proc.stdout.decode().splitlines()


def err_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode != 0 and lines, proc.stderr
    return lines[-1]


def create(broker: Broker, topic: str, partitions: int = 1, *config: str) -> None:
    extra = [x for c in config for x in ("--config", c)]
    cli(broker, "topics", "create", topic, "--partitions", str(partitions), *extra)


def batches(broker: Broker, topic: str, partition: int = 0) -> list:
    """The record batch headers in the partition's segment files, in order."""
    found = []
    for path in sorted(glob.glob(os.path.join(broker.data_dir, f"{topic}-{partition}", "*.log"))):
        data = Path(path).read_bytes()
        found += [header for _pos, header in iter_batches(data)]
    return found


def consume_json(broker: Broker, topic: str, count: int, *extra: str) -> list[dict]:
    proc = cli(
        broker,
        "consume",
        topic,
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "20000",
        "--json",
        *extra,
    )
    return [json.loads(line) for line in out(proc)]


# -- produce --------------------------------------------------------------------------------------


def test_produce_batches_many_lines_into_few_idempotent_batches(broker: Broker, name: str) -> None:
    create(broker, name)
    lines = "".join(f"{i}\n" for i in range(1, 50001))
    broker.fail("produce", "NOT_LEADER_OR_FOLLOWER", count=3)  # retried, in order, once each
    proc = cli(broker, "produce", name, stdin=lines)
    assert out(proc) == [f"Produced 50000 records to {name}."]
    found = batches(broker, name)
    assert sum(h.records_count for h in found) == 50000
    # batch.size 16384 holds over a thousand of these records: a real producer's batching
    assert len(found) <= 60
    assert all(h.producer_id >= 0 and h.compression == 0 for h in found)  # idempotent, plain
    # every line arrived, in order, with its value
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        values: list[bytes] = []
        while len(values) < 50000:
            polled = consumer.poll(timeout_ms=10000, max_records=50000)
            assert polled, f"only {len(values)} records came back"
            values += [r.value for r in polled.get(tp, [])]
    finally:
        consumer.close()
    assert values == [str(i).encode() for i in range(1, 50001)]


@pytest.mark.parametrize("encoder", ["c", "python"])
def test_produce_a_file_in_large_batches(broker: Broker, name: str, encoder: str) -> None:
    """Lines from a file go in batches of up to batch.size 1,000,000 bytes (kcat's default), so
    that the broker's per-request work does not set the pace: 100,000 lines of 100 B in eleven
    to thirteen batches (with the Java producer's 16384 it was ~650). The C encoder and the
    pure-Python one (ODRADEK_PURE_PYTHON=1) make the same records."""
    create(broker, name)
    lines = "".join(f"{i:08d}{'x' * 91}\n" for i in range(100_000))
    env = {"ODRADEK_PURE_PYTHON": "1"} if encoder == "python" else {}
    # a long linger: batches are cut by size (and at the end), never by a slow read
    proc = cli(broker, "produce", name, "--linger-ms", "60000", stdin=lines, env=env)
    assert out(proc) == [f"Produced 100000 records to {name}."]
    found = batches(broker, name)
    assert sum(h.records_count for h in found) == 100_000
    assert len(found) <= 13  # 11 with the C encoder; the Python one cuts at 8192 records
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        values: list[bytes] = []
        while len(values) < 100_000:
            polled = consumer.poll(timeout_ms=10000, max_records=100_000)
            assert polled, f"only {len(values)} records came back"
            values += [r.value for r in polled.get(tp, [])]
    finally:
        consumer.close()
    assert values == [f"{i:08d}{'x' * 91}".encode() for i in range(100_000)]


def test_lines_typed_one_by_one_are_sent_without_waiting_for_eof(broker: Broker, name: str) -> None:
    """As at a terminal: each line goes out after linger.ms, while stdin stays open."""
    create(broker, name)
    env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": broker.bootstrap}
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "produce", "--topic", name, "--acks", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        assert proc.stdin is not None
        seen: list[bytes] = []
        for line in (b"first", b"second"):
            proc.stdin.write(line + b"\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 30
            while line not in seen:
                assert time.monotonic() < deadline, f"{line!r} not sent while stdin is open"
                polled = consumer.poll(timeout_ms=200)
                seen += [r.value for r in polled.get(tp, [])]
        assert seen == [b"first", b"second"]
        stdout, stderr = proc.communicate(b"third\n", timeout=RUN_TIMEOUT_S)
        assert proc.returncode == 0, stderr
        assert stdout.decode().splitlines() == [f"Produced 3 records to {name}."]
    finally:
        consumer.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_producer_property_and_config_file(broker: Broker, name: str, tmp_path: Path) -> None:
    create(broker, name)
    config = tmp_path / "producer.properties"
    config.write_text("# as kafka-console-producer reads it\ncompression.type=gzip\nacks=all\n")
    cli(
        broker,
        "produce",
        name,
        "--producer.config",
        str(config),
        "--producer-property",
        "batch.size=200",
        "--producer-property",
        "linger.ms=0",
        stdin="".join(f"record number {i}\n" for i in range(40)),
    )
    found = batches(broker, name)
    assert sum(h.records_count for h in found) == 40
    assert len(found) >= 4  # at most ~200 bytes of records each
    assert all(h.compression == 1 for h in found)  # gzip from the file
    # --producer-property wins over the file, the shorthand options over both
    cli(
        broker,
        "produce",
        name,
        "--producer.config",
        str(config),
        "--producer-property",
        "compression.type=zstd",
        "--producer-property",
        "acks=1",
        stdin="a\nb\n",
    )
    cli(broker, "produce", name, "--producer-property", "compression.type=zstd",
        "--compression", "lz4", stdin="c\n")  # fmt: skip
    tail = batches(broker, name)[len(found) :]
    assert [(h.compression, h.records_count, h.producer_id) for h in tail] == [
        (4, 2, -1),  # zstd; acks=1 turns the implicit idempotence off, as Kafka
        (3, 1, tail[1].producer_id),
    ]
    assert tail[1].producer_id >= 0
    values = [r["value"] for r in consume_json(broker, name, 43)]
    assert values == [f"record number {i}" for i in range(40)] + ["a", "b", "c"]

    # a key that is not Kafka's is reported, as Kafka warns; bad values are errors
    proc = cli(broker, "produce", name, "--producer-property", "batch.sise=10", stdin="d\n")
    assert "the configuration 'batch.sise' was supplied but isn't a known config" in (
        proc.stderr.decode()
    )
    proc = cli(broker, "produce", name, "--producer-property", "acks=2", stdin="x\n", status=1)
    assert "invalid value '2' for acks" in err_line(proc)
    proc = cli(
        broker,
        "produce",
        name,
        "--producer-property",
        "acks=1",
        "--producer-property",
        "enable.idempotence=true",
        stdin="x\n",
        status=1,
    )
    assert "must set acks to all in order to use the idempotent producer" in err_line(proc)
    proc = cli(broker, "produce", name, "--producer.config", str(tmp_path / "nope"), status=1)
    assert "cannot read" in err_line(proc)


def test_reader_properties_parse_keys_headers_and_null_marker(broker: Broker, name: str) -> None:
    create(broker, name)
    lines = (
        "h1:v1,h2:v2\tk1\tone\n"  # Kafka's defaults: TAB between headers, key and value
        "NO\tk2\ttwo\n"  # headers equal to the null marker: none
        "h3:NO\tNO\tNO\n"  # null header value, null key, null value
        "h4:x\tk4\tvalue\twith\ttabs\n"
    )
    cli(
        broker,
        "produce",
        name,
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        "--property",
        "null.marker=NO",
        stdin=lines,
    )
    got = consume_json(broker, name, 4)
    assert [(r["headers"], r["key"], r["value"]) for r in got] == [
        ([["h1", "v1"], ["h2", "v2"]], "k1", "one"),
        ([], "k2", "two"),
        ([["h3", None]], None, None),
        ([["h4", "x"]], "k4", "value\twith\ttabs"),
    ]

    # other separators, and ignore.error: a line without them is a value with a null key
    cli(
        broker,
        "produce",
        name,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=::",
        "--property",
        "parse.headers=true",
        "--property",
        "headers.delimiter=|",
        "--property",
        "headers.separator=;",
        "--property",
        "headers.key.separator==",
        "--property",
        "ignore.error=true",
        "--header",
        "src=cli",
        stdin="a=1;b=2|key::val::ue\nno separators at all\n",
    )
    got = consume_json(broker, name, 6)[4:]
    assert [(r["headers"], r["key"], r["value"]) for r in got] == [
        ([["src", "cli"], ["a", "1"], ["b", "2"]], "key", "val::ue"),
        ([["src", "cli"]], None, "no separators at all"),
    ]

    # without ignore.error, Kafka's errors; the lines before the bad one were sent
    proc = cli(
        broker,
        "produce",
        name,
        "--property",
        "parse.key=true",
        stdin="k\tfine\nno tab here\nk\tnever\n",
        status=1,
    )
    assert err_line(proc) == "odradek: No key separator found on line number 2: 'no tab here'"
    assert [r["value"] for r in consume_json(broker, name, 7)][6] == "fine"
    proc = cli(
        broker,
        "produce",
        name,
        "--property",
        "parse.headers=true",
        stdin="h1\tvalue\n",
        status=1,
    )
    assert "No header key separator found in pair 'h1' on line number 1" in err_line(proc)
    proc = cli(
        broker,
        "produce",
        name,
        "--property",
        "parse.headers=true",
        "--property",
        "headers.separator=:",
        stdin="x\n",
        status=1,
    )
    assert "headers.separator and headers.key.separator may not be equal" in err_line(proc)


def test_keyed_records_go_to_kafkas_partition_for_the_key(broker: Broker, name: str) -> None:
    create(broker, name, 4)
    keys = [f"user-{i}" for i in range(40)]
    cli(broker, "produce", name, "--key-separator", "=",
        stdin="".join(f"{k}=v{i}\n" for i, k in enumerate(keys)))  # fmt: skip
    got = consume_json(broker, name, 40)
    assert sorted(r["key"] for r in got) == sorted(keys)
    for r in got:  # the Java client's murmur2 partitioner, as kafka-python's
        assert r["partition"] == (murmur2(r["key"].encode()) & 0x7FFFFFFF) % 4, r
    # per key, records keep their order
    by_key = {r["key"]: r["value"] for r in got}
    assert by_key == {k: f"v{i}" for i, k in enumerate(keys)}


def test_record_size_follows_max_request_size_and_the_topics_limit(
    broker: Broker, name: str
) -> None:
    big = "x" * 1_500_000
    create(broker, name, 1, "max.message.bytes=3000000")
    # bigger than max.request.size (1 MB by default): that record fails, the others go
    proc = cli(broker, "produce", name, stdin=f"small\n{big}\nsmall again\n", status=1)
    message = err_line(proc)
    assert "1 of 3 records were not delivered" in message
    assert "larger than 1048576, which is the value of the max.request.size" in message
    # a larger max.request.size lets it through (the topic takes 3 MB)
    cli(broker, "produce", name, "--producer-property", "max.request.size=2000000",
        stdin=big + "\n")  # fmt: skip
    got = consume_json(broker, name, 3)
    assert [len(r["value"]) for r in got] == [5, 11, 1_500_000]

    # a topic with a small max.message.bytes: batches the broker refuses are split and resent
    small = f"{name}-small"
    create(broker, small, 1, "max.message.bytes=600")
    lines = "".join(f"line {i:03d} " + "y" * 40 + "\n" for i in range(100))
    proc = cli(broker, "produce", small, stdin=lines)
    assert out(proc) == [f"Produced 100 records to {small}."]
    found = batches(broker, small)
    assert sum(h.records_count for h in found) == 100 and len(found) > 10
    assert all(h.size <= 600 for h in found)
    got = consume_json(broker, small, 100)
    assert [r["value"][:8] for r in got] == [f"line {i:03d}" for i in range(100)]
    # one record too large for the topic is an error naming the broker's reason
    proc = cli(broker, "produce", small, stdin="z" * 1000 + "\n", status=1)
    assert "TOO_LARGE" in err_line(proc) and "max.message.bytes 600" in err_line(proc)


def test_produce_to_a_missing_partition_or_broker_is_one_line(broker: Broker, name: str) -> None:
    create(broker, name, 2)
    proc = cli(broker, "produce", name, "--partition", "5", stdin="x\n", status=1)
    assert "partition 5 of topic" in err_line(proc)
    proc = cli(
        broker,
        "produce",
        name,
        "--bootstrap-server",
        "127.0.0.1:1",
        "--connect-timeout-ms",
        "500",
        stdin="x\n",
        status=1,
    )
    assert err_line(proc).startswith("odradek: cannot connect to a broker")
    assert len(proc.stderr.decode().strip().splitlines()) == 1


# -- consume --------------------------------------------------------------------------------------


def _seed(broker: Broker, topic: str, partitions: int = 2) -> None:
    """Five records in each partition: keys k<p>-<i>, values v<p>-<i>, a header each."""
    create(broker, topic, partitions)
    for p in range(partitions):
        cli(
            broker,
            "produce",
            topic,
            "--partition",
            str(p),
            "--key-separator",
            "=",
            "--header",
            f"part={p}",
            stdin="".join(f"k{p}-{i}=v{p}-{i}\n" for i in range(5)),
        )


def test_consume_offset_partition_max_messages_and_timeout(broker: Broker, name: str) -> None:
    _seed(broker, name)
    proc = cli(broker, "consume", name, "--partition", "1", "--offset", "2", "--max-messages", "2")
    assert out(proc) == ["v1-2", "v1-3"]
    assert "Processed a total of 2 messages" in proc.stderr.decode()
    proc = cli(broker, "consume", "--topic", name, "--partition", "0", "--offset", "earliest",
               "--timeout-ms", "1000")  # fmt: skip
    assert out(proc) == [f"v0-{i}" for i in range(5)]
    proc = cli(broker, "consume", name, "--partition", "0", "--offset", "latest",
               "--timeout-ms", "500")  # fmt: skip
    assert out(proc) == []
    proc = cli(broker, "consume", name, "--partition", "1", "--from-beginning", "--max", "1")
    assert out(proc) == ["v1-0"]

    for args, message in [
        (["--offset", "3"], "the partition is required when offset is specified"),
        (["--partition", "0", "--offset", "3", "--from-beginning"], "cannot be specified together"),
        (["--partition", "0", "--offset", "-4"], "is incorrect"),
        (["--partition", "7", "--offset", "1"], "has no partition 7"),
    ]:
        assert message in err_line(cli(broker, "consume", name, *args, status=1)), args


def test_consume_formatter_properties(broker: Broker, name: str) -> None:
    _seed(broker, name, 1)
    base = ["consume", name, "--from-beginning", "--max-messages", "2"]
    props = [
        "print.timestamp=true",
        "print.partition=true",
        "print.offset=true",
        "print.headers=true",
        "print.key=true",
    ]
    proc = cli(broker, *base, *[x for p in props for x in ("--property", p)])
    lines = out(proc)
    assert len(lines) == 2
    for i, line in enumerate(lines):
        ts, partition, offset, headers, key, value = line.split("\t")
        assert ts.startswith("CreateTime:") and int(ts.split(":")[1]) > 1_600_000_000_000
        assert (partition, offset, headers, key, value) == (
            "Partition:0",
            f"Offset:{i}",
            "part:0",
            f"k0-{i}",
            f"v0-{i}",
        )
    proc = cli(broker, *base, "--property", "print.key=true", "--property", "key.separator= | ",
               "--property", "print.value=false", "--property", "print.offset=true")  # fmt: skip
    assert out(proc) == ["Offset:0 | k0-0", "Offset:1 | k0-1"]
    proc = cli(broker, *base, "--print-key", "--property", "line.separator=;")
    assert proc.stdout.decode() == "k0-0\tv0-0;k0-1\tv0-1;"
    got = [json.loads(x) for x in out(cli(broker, *base, "--formatter", "json"))]
    assert [(r["offset"], r["key"], r["headers"]) for r in got] == [
        (0, "k0-0", [["part", "0"]]),
        (1, "k0-1", [["part", "0"]]),
    ]
    proc = cli(broker, *base, "--formatter", "org.apache.kafka.tools.consumer.NoOpMessageFormatter")
    assert proc.stdout == b"" and "Processed a total of 2 messages" in proc.stderr.decode()
    proc = cli(broker, *base, "--formatter", "kafka.tools.DefaultMessageFormatter")
    assert out(proc) == ["v0-0", "v0-1"]
    assert "unknown --formatter" in err_line(cli(broker, *base, "--formatter", "xml", status=1))


def test_consume_with_group_commits_and_consumer_properties(
    broker: Broker, name: str, tmp_path: Path
) -> None:
    _seed(broker, name, 1)
    config = tmp_path / "consumer.properties"
    config.write_text("max.poll.records=1\nclient.id=from-file\n")
    group = f"{name}-g"
    proc = cli(broker, "consume", name, "--group", group, "--from-beginning", "--max-messages",
               "3", "--consumer.config", str(config), "--timeout-ms", "20000")  # fmt: skip
    assert out(proc) == ["v0-0", "v0-1", "v0-2"]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    assert offsets[TopicPartition(name, 0)].offset == 3
    # the group resumes where it committed; group.id may come from the properties too
    proc = cli(broker, "consume", name, "--consumer-property", f"group.id={group}",
               "--max-messages", "2", "--timeout-ms", "20000")  # fmt: skip
    assert out(proc) == ["v0-3", "v0-4"]
    proc = cli(broker, "consume", name, "--consumer-property", "fetch.max.wait.ms=abc", status=1)
    assert "invalid value 'abc' for consumer property fetch.max.wait.ms" in err_line(proc)
    proc = cli(broker, "consume", name, "--from-beginning", "--consumer-property",
               "auto.offset.reset=latest", status=1)  # fmt: skip
    assert "--from-beginning" in err_line(proc)


def test_consume_with_group_reads_partitions_added_while_syncgroup_answers_late(
    broker: Broker, name: str
) -> None:
    """Partitions added to the topic of a `consume --group` make its leader rejoin; every
    SyncGroup is answered 300 ms late, longer than a 200 ms poll, as on a busy machine. The
    consumer reads the new partition. Polling every 200 ms it never did: kafka-python 3.0.12 does
    not await a leader's metadata rejoin past the poll it started in, so the assignment with the
    new partition was never applied and the command timed out with nothing more printed."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    proc = None
    broker.delay("sync_group", 300, count=1000)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(3):
            producer.send(name, b"a%d" % i, partition=0)
        producer.close()
        proc, lines = start_odradek(
            "consume", name, "--group", f"{name}-g", "--from-beginning", "--max-messages", "6",
            "--timeout-ms", "20000", "--consumer-property", "metadata.max.age.ms=200",
            "--bootstrap-server", broker.bootstrap,
        )  # fmt: skip
        assert [lines.get(timeout=RUN_TIMEOUT_S) for _ in range(3)] == ["a0", "a1", "a2"]
        admin.create_partitions({name: NewPartitions(2)})
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(3):
            producer.send(name, b"b%d" % i, partition=1)
        producer.close()
        assert proc.wait(timeout=RUN_TIMEOUT_S) == 0  # after 6 records, or 20 s without one
        rest: list[str] = []
        with contextlib.suppress(queue.Empty):
            while len(rest) < 3:
                rest.append(lines.get(timeout=5))
        assert rest == ["b0", "b1", "b2"]
    finally:
        broker.clear_faults()
        admin.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_isolation_level_hides_aborted_transactions(broker: Broker, name: str) -> None:
    create(broker, name)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{name}-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(name, b"aborted-1")
        producer.send(name, b"aborted-2")
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(name, b"committed")
        producer.commit_transaction()
    finally:
        producer.close()
    # the aborted records come first: a consumer that shows them prints them before "committed"
    base = ["consume", name, "--from-beginning", "--timeout-ms", "20000"]
    uncommitted = out(cli(broker, *base, "--max-messages", "3"))
    assert uncommitted == ["aborted-1", "aborted-2", "committed"]
    assert out(
        cli(broker, *base, "--max-messages", "3", "--isolation-level", "read_uncommitted")
    ) == (uncommitted)
    committed = ["--max-messages", "1", "--isolation-level", "read_committed"]
    assert out(cli(broker, *base, *committed)) == ["committed"]
    by_property = ["--max-messages", "1", "--consumer-property", "isolation.level=read_committed"]
    assert out(cli(broker, *base, *by_property)) == ["committed"]


@pytest.mark.cluster
def test_produce_to_partitions_led_by_different_brokers() -> None:
    """A connection per leader: partitions of a 3-broker cluster, each broker leading some."""
    with Cluster(3) as cluster:
        cluster.create_topic("spread", partitions=6, replication_factor=2)
        leaders = {cluster.partition("spread", p).leader for p in range(6)}
        assert len(leaders) > 1
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        lines = "".join(f"key{i % 50}:value-{i}\n" for i in range(3000))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek",
                "produce",
                "spread",
                "-b",
                cluster.bootstrap,
                "--key-separator",
                ":",
            ],  # fmt: skip
            input=lines.encode(),
            capture_output=True,
            timeout=RUN_TIMEOUT_S,
            env=env,
            cwd=REPO,
        )
        assert proc.returncode == 0, proc.stderr
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        try:
            tps = [TopicPartition("spread", p) for p in range(6)]
            consumer.assign(tps)
            got: dict[bytes, list[int]] = {}
            count = 0
            while count < 3000:
                polled = consumer.poll(timeout_ms=10000)
                assert polled, f"only {count} records came back"
                for tp, records in polled.items():
                    for r in records:
                        assert tp.partition == (murmur2(r.key) & 0x7FFFFFFF) % 6
                        got.setdefault(r.key, []).append(int(r.value.split(b"-")[1]))
                        count += 1
        finally:
            consumer.close()
        # every record once, and each key's records in the order they were read
        assert got == {f"key{k}".encode(): list(range(k, 3000, 50)) for k in range(50)}


def test_a_dropped_connection_is_retried_without_duplicates(broker: Broker, name: str) -> None:
    """The first Produce request is held by the broker while the connection drops: the
    producer resends the batch on a new connection, and the idempotent producer id keeps the
    held one (appended later) from writing the records twice."""
    create(broker, name)
    injected = broker.call(lambda s: s.faults.injected)
    broker.delay("produce", 1500, count=1)
    env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": broker.bootstrap}
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "produce", name],  # acks=all: idempotent
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"%d\n" % i for i in range(3000)))
        proc.stdin.close()
        deadline = time.monotonic() + 30
        while broker.call(lambda s: s.faults.injected) == injected:  # the request is held
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert broker.drop_connections() >= 1
        assert proc.wait(timeout=RUN_TIMEOUT_S) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # read until nothing came for 3 s: longer than the broker holds the first request, so a
    # second copy of it would be there
    got = [r["value"] for r in consume_json(broker, name, 10000, "--timeout-ms", "3000")]
    assert got == [str(i) for i in range(3000)]
