"""Several log.dirs: placement, DescribeLogDirs, AlterReplicaLogDirs moving a replica between
dirs while it serves (kafka-python's admin client), and DescribeQuorum."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, NoError

from odradek.log import dir_move
from odradek.testing import Broker
from odradek.wire.api_keys import ApiKey

DEADLINE_S = 30.0
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _dirs(admin: KafkaAdminClient, topic: str) -> dict[str, dict[int, dict]]:
    """{log dir: {partition: partition entry}} of one topic on the only broker."""
    out: dict[str, dict[int, dict]] = {}
    for answer in admin.describe_log_dirs():
        for d in answer["log_dirs"]:
            parts = out.setdefault(d["log_dir"], {})
            for t in d["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        parts[p["partition_index"]] = p
    return out


@pytest.fixture
def two_dirs(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    broker = Broker(config={"log.dirs": f"{a},{b}"}, data_dir=str(tmp_path)).start()
    try:
        yield broker, a, b
    finally:
        broker.stop()


def _until(check, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _consume_all(broker: Broker, topic: str, partition: int, expected: int) -> list[bytes]:
    """The partition's records from the start, once `expected` of them have come (or the
    deadline passed: then what came, and the caller's count check fails)."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < expected and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            values.extend(m.value for m in batch)
    consumer.close()
    return values


def test_partitions_spread_and_move_keeps_serving(two_dirs, monkeypatch):
    broker, a, b = two_dirs
    monkeypatch.setattr(dir_move, "COPY_CHUNK_BYTES", 2048)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("moving", 4, 1)])
        dirs = _dirs(admin, "moving")
        assert sorted(dirs) == [a, b]
        assert len(dirs[a]) == 2 and len(dirs[b]) == 2  # fewest partitions first
        src = a if 0 in dirs[a] else b
        dest = b if src == a else a

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        for i in range(2000):
            producer.send("moving", value=b"v%d" % i + b"x" * 200, partition=0)
        producer.flush()
        assert _dirs(admin, "moving")[src][0]["partition_size"] > 400_000

        # throttled to a crawl: the move is still running while we look, produce and consume
        monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", 4096.0)
        result = admin.alter_replica_log_dirs({("moving", 0, broker.server.node_id): dest})
        assert list(result.values()) == [NoError]
        during = _until(lambda: _dirs(admin, "moving"), "describe")
        assert during[src][0]["is_future_key"] is False
        future = during[dest][0]
        assert future["is_future_key"] is True and future["offset_lag"] > 0
        for i in range(2000, 2100):
            producer.send("moving", value=b"v%d" % i, partition=0)
        producer.flush()
        assert len(_consume_all(broker, "moving", 0, 2100)) == 2100  # served from the current log

        monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", None)
        stop = threading.Event()
        sent = [2100]

        def produce_on() -> None:
            while not stop.is_set():
                producer.send("moving", value=b"v%d" % sent[0], partition=0).get(timeout=10)
                sent[0] += 1

        bg = threading.Thread(target=produce_on)
        bg.start()
        try:

            def moved():
                now = _dirs(admin, "moving")
                return 0 in now[dest] and 0 not in now[src] and now

            now = _until(moved, "the move to finish")
            assert now[dest][0]["is_future_key"] is False
        finally:
            stop.set()
            bg.join()
        producer.send("moving", value=b"after", partition=0).get(timeout=10)
        producer.close()
        total = sent[0] + 1

        values = _consume_all(broker, "moving", 0, total)
        assert len(values) == total
        assert [v.split(b"x")[0] for v in values[:-1]] == [b"v%d" % i for i in range(total - 1)]
        assert values[-1] == b"after"
        assert os.path.isdir(os.path.join(dest, "moving-0"))

        admin.close()
        broker.restart()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        after = _dirs(admin, "moving")
        assert 0 in after[dest] and 0 not in after[src]
        assert not os.path.exists(os.path.join(src, "moving-0"))
        assert _consume_all(broker, "moving", 0, total) == values
    finally:
        admin.close()


def test_alter_replica_log_dirs_errors(two_dirs, tmp_path):
    broker, a, b = two_dirs
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("t", 1, 1)])
        node = broker.server.node_id
        result = admin.alter_replica_log_dirs(
            {
                ("t", 0, node): str(tmp_path / "nowhere"),
            }
        )
        assert [e.__name__ for e in result.values()] == ["LogDirNotFoundError"]
        result = admin.alter_replica_log_dirs({("t", 7, node): a})
        assert [e.__name__ for e in result.values()] == ["ReplicaNotAvailableError"]
        where = [d for d, ps in _dirs(admin, "t").items() if 0 in ps][0]
        assert admin.alter_replica_log_dirs({("t", 0, node): where}) == {
            k: NoError for k in admin.alter_replica_log_dirs({("t", 0, node): where})
        }
        assert 0 in _dirs(admin, "t")[where]
    finally:
        admin.close()


def test_describe_quorum_single_voter():
    with Broker() as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            q = admin.describe_metadata_quorum()
        finally:
            admin.close()
        part = q["topics"][0]["partitions"][0]
        assert part["error"] is None
        assert part["leader_id"] == broker.server.node_id
        assert [v["replica_id"] for v in part["current_voters"]] == [broker.server.node_id]
        assert part["observers"] == []


def _cli(bootstrap: str, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == status, proc.stderr
    return proc


def test_cli_log_dirs_describe_and_move(two_dirs):
    broker, a, b = two_dirs
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("cli-t", 2, 1), NewTopic("other", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(50):
        producer.send("cli-t", value=b"r%d" % i, partition=0)
    producer.close()

    doc = json.loads(
        _cli(broker.bootstrap, "log-dirs", "--describe", "--topic-list", "cli-t", "--json").stdout
    )
    [entry] = doc["brokers"]
    where = {p["partition"]: d["logDir"] for d in entry["logDirs"] for p in d["partitions"]}
    assert sorted(where) == ["cli-t-0", "cli-t-1"]  # --topic-list leaves "other" out
    assert {d["logDir"] for d in entry["logDirs"]} == {a, b}
    sizes = {p["partition"]: p["size"] for d in entry["logDirs"] for p in d["partitions"]}
    assert sizes["cli-t-0"] > 0 and sizes["cli-t-1"] == 0

    dest = b if where["cli-t-0"] == a else a
    out = _cli(
        broker.bootstrap,
        "log-dirs",
        "move",
        "--topic",
        "cli-t",
        "--partition",
        "0",
        "--dir",
        dest,
        "--wait",
    ).stdout
    assert f"Moved cli-t-0 on broker {broker.server.node_id} to {dest}" in out
    table = _cli(broker.bootstrap, "log-dirs").stdout
    row = [line.split() for line in table.splitlines() if "cli-t-0" in line]
    assert row and row[0][1] == dest and row[0][-1] == "no", table

    bad = _cli(
        broker.bootstrap,
        "log-dirs",
        "move",
        "--topic",
        "cli-t",
        "--partition",
        "0",
        "--dir",
        "/nowhere",
        status=1,
    )
    assert "LogDirNotFoundError" in bad.stderr


def test_restart_during_a_move_keeps_the_replica_where_it_was(two_dirs, monkeypatch):
    broker, a, b = two_dirs
    monkeypatch.setattr(dir_move, "COPY_CHUNK_BYTES", 1024)
    monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", 1.0)  # never gets far
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("stay", 1, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(300):
            producer.send("stay", value=b"s%d" % i + b"y" * 100)
        producer.close()
        src = [d for d, ps in _dirs(admin, "stay").items() if 0 in ps][0]
        dest = b if src == a else a
        node = broker.server.node_id
        assert list(admin.alter_replica_log_dirs({("stay", 0, node): dest}).values()) == [NoError]
        assert [n for n in os.listdir(dest) if n.endswith("-future")]
    broker.restart(abrupt=True)  # the -future dir stays on disk; the start drops it
    assert not [n for n in os.listdir(dest) if n.endswith("-future")]
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        dirs = _dirs(admin, "stay")
        assert 0 in dirs[src] and 0 not in dirs[dest]
    assert len(_consume_all(broker, "stay", 0, 300)) == 300


def test_zookeeper_mode_does_not_serve_describe_quorum(tmp_path):
    from odradek.testing.zookeeper import ZooKeeperServer

    with ZooKeeperServer(str(tmp_path / "zk")) as zk:
        config = {"zookeeper.connect": zk.connect("/quorum-test"), "node.id": "0"}
        with Broker(config=config) as broker:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:
                # the raw table: kafka-python 3.0's api_versions() maps every key to its ApiKey
                # enum, which lacks key 93 (listed by Kafka 4.4 and odradek)
                apis = admin.get_broker_version_data(0).api_versions
                assert ApiKey.DESCRIBE_QUORUM not in apis
                assert ApiKey.ALTER_REPLICA_LOG_DIRS in apis
                with pytest.raises(KafkaError):
                    admin.describe_metadata_quorum()
            finally:
                admin.close()


def test_deleting_the_topic_drops_a_move_under_way(two_dirs, monkeypatch):
    broker, a, b = two_dirs
    monkeypatch.setattr(dir_move, "COPY_CHUNK_BYTES", 1024)
    monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", 1.0)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("gone", 1, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for _ in range(100):
            producer.send("gone", value=b"g" * 100)
        producer.close()
        src = [d for d, ps in _dirs(admin, "gone").items() if 0 in ps][0]
        dest = b if src == a else a
        node = broker.server.node_id
        assert list(admin.alter_replica_log_dirs({("gone", 0, node): dest}).values()) == [NoError]
        assert _dirs(admin, "gone")[dest][0]["is_future_key"] is True
        admin.delete_topics(["gone"])
        _until(lambda: not any(_dirs(admin, "gone").values()), "the topic to go")
        assert not [n for n in os.listdir(dest) if n.startswith("gone-0")]
        assert broker.call(lambda server: dict(server.logs.moves)) == {}


def test_without_acls_moves_and_quorum_are_refused(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    config = {"log.dirs": f"{a},{b}", "authorizer.class.name": AUTHORIZER}
    with Broker(config=config, data_dir=str(tmp_path)) as broker:  # no ACLs: all denied
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            result = admin.alter_replica_log_dirs({("t", 0, broker.server.node_id): b})
            assert [e.__name__ for e in result.values()] == ["ClusterAuthorizationFailedError"]
            with pytest.raises(KafkaError) as err:
                admin.describe_metadata_quorum()
            assert type(err.value).__name__ == "ClusterAuthorizationFailedError"
        finally:
            admin.close()


def test_a_replica_not_here_yet_is_created_in_the_dir_asked_for(two_dirs):
    broker, a, b = two_dirs
    node = broker.server.node_id
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        result = admin.alter_replica_log_dirs({("later", 0, node): b, ("later", 1, node): a})
        assert {e.__name__ for e in result.values()} == {"ReplicaNotAvailableError"}
        admin.create_topics([NewTopic("later", 3, 1)])
        dirs = _dirs(admin, "later")
        assert 0 in dirs[b] and 1 in dirs[a]  # the fewest-partitions rule would put 0 in a


def test_a_crash_right_after_a_move_keeps_the_log_start_offset(two_dirs):
    broker, a, b = two_dirs
    node = broker.server.node_id
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("trimmed", 1, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        for i in range(100):
            producer.send("trimmed", value=b"%d" % i).get(timeout=10)  # one batch each
        producer.close()
        admin.delete_records({TopicPartition("trimmed", 0): 50})
        src = [d for d, ps in _dirs(admin, "trimmed").items() if 0 in ps][0]
        dest = b if src == a else a
        assert list(admin.alter_replica_log_dirs({("trimmed", 0, node): dest}).values()) == [
            NoError
        ]

        def moved() -> bool:
            now = _dirs(admin, "trimmed")
            return 0 in now[dest] and not now[src]

        _until(moved, "the move")
    broker.restart(abrupt=True)
    values = _consume_all(broker, "trimmed", 0, 50)
    assert values == [b"%d" % i for i in range(50, 100)]


def test_a_moved_replica_keeps_aborted_transactions_hidden(two_dirs):
    broker, a, b = two_dirs
    node = broker.server.node_id
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("txn", 1, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="mover")
        producer.init_transactions()
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            for i in range(5):
                producer.send("txn", value=f"{outcome}-{i}".encode())
            producer.flush()
            if outcome == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        producer.close()
        src = [d for d, ps in _dirs(admin, "txn").items() if 0 in ps][0]
        dest = b if src == a else a
        assert list(admin.alter_replica_log_dirs({("txn", 0, node): dest}).values()) == [NoError]

        def moved() -> bool:
            now = _dirs(admin, "txn")
            return 0 in now[dest] and not now[src]

        _until(moved, "the move")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    tp = TopicPartition("txn", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < 10 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            values.extend(m.value for m in batch)
    consumer.close()
    assert values == [f"commit-{i}".encode() for i in range(5)] * 2


def _start_crawling_move(broker: Broker, admin: KafkaAdminClient, topic: str, a: str, b: str):
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for _ in range(100):
        producer.send(topic, value=b"d" * 100)
    producer.close()
    src = [d for d, ps in _dirs(admin, topic).items() if 0 in ps][0]
    dest = b if src == a else a
    node = broker.server.node_id
    assert list(admin.alter_replica_log_dirs({(topic, 0, node): dest}).values()) == [NoError]
    return src, dest


def _moves(broker: Broker) -> dict:
    return broker.call(lambda server: dict(server.logs.moves))


def test_a_failing_destination_leaves_the_replica_serving_where_it_was(two_dirs, monkeypatch):
    broker, a, b = two_dirs
    monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", 1.0)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        src, dest = _start_crawling_move(broker, admin, "faildest", a, b)
        broker.fail_disk("EIO", dest)
        monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", None)  # the copy writes now
        _until(lambda: not _moves(broker), "the move to be dropped")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        producer.send("faildest", value=b"still here").get(timeout=10)
        producer.close()
        assert 0 in _dirs(admin, "faildest").get(src, {})
    assert len(_consume_all(broker, "faildest", 0, 101)) == 101


def test_a_failing_source_drops_the_move(two_dirs, monkeypatch):
    broker, a, b = two_dirs
    monkeypatch.setattr(dir_move, "COPY_RATE_BYTES_PER_S", 1.0)
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        src, dest = _start_crawling_move(broker, admin, "failsrc", a, b)
        broker.fail_disk("EIO", src)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
        with pytest.raises(KafkaError):
            producer.send("failsrc", value=b"x").get(timeout=10)  # takes the dir offline
        producer.close()
        _until(lambda: not _moves(broker), "the move to be dropped")
        assert not [n for n in os.listdir(dest) if n.endswith("-future")]
