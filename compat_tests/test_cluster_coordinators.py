"""Coordinators and controlled shutdown in a replicating cluster, with real clients.

Each test starts an in-process three-broker `odradek.testing.Cluster` (the `odradek_cluster`
fixture) whose internal topics are replicated three ways, then fails a broker while clients
work:

- the group coordinator's broker is killed under a consumer group of a confluent-kafka and a
  kafka-python member: the offsets committed before the kill are there afterwards (nothing
  committed is read again, a new member resumes from them) and the group consumes everything
  produced after the kill; a commit is answered only once every in-sync replica has it, so
  killing the coordinator right after the answer loses nothing;
- the transaction coordinator's broker is killed in the middle of a transaction of a
  confluent-kafka (and a Java) transactional producer: that transaction commits through the new
  coordinator, and so does the next; a read_committed consumer reads exactly the committed
  records, none of a transaction aborted before the kill;
- a partition leader is stopped cleanly (controlled shutdown) under a confluent-kafka idempotent
  and a kafka-python producer (both acks=all, min.insync.replicas=2) and a group consumer: they
  carry on, every acknowledged record is read (the idempotent producer's exactly once, both in
  order), and the broker, started again, rejoins every ISR;
- the Java producer (kafka-clients, idempotent, acks=all; compat_tests/java/FailoverProducer.java)
  keeps writing to an RF=3 topic with min.insync.replicas=2 while its leader is killed, then reads
  the topic back: every record exactly once, in order.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

from compat_tests.group_harness import Group, assert_exactly_once, committed, produce
from compat_tests.harness import unique_name, wait_for
from compat_tests.java_harness import JavaPrograms
from compat_tests.test_transactions import end_marks
from compat_tests.txn_drivers import make_driver
from odradek.coordinator.group.records import partition_for as group_partition
from odradek.coordinator.txn.config import partition_for as txn_partition
from odradek.testing import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

BROKERS = 3
PARTITIONS = 6  # group_harness's topic layout
INTERNAL_PARTITIONS = 3
WAIT_S = 30.0
CONFIG = {
    "offsets.topic.replication.factor": BROKERS,
    "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
    "transaction.state.log.replication.factor": BROKERS,
    "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
    "transaction.state.log.min.isr": 2,
    "min.insync.replicas": 2,
}
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"


def group_coordinator(cluster: Cluster, group: str) -> int:
    """The coordinator's node id as a client finds it (DescribeGroups via FindCoordinator),
    checked against the leader of the group's `__consumer_offsets` partition."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(WAIT_S)
    leader = cluster.leader(OFFSETS_TOPIC, group_partition(group, INTERNAL_PARTITIONS))
    assert desc.coordinator.id == leader
    return leader


@pytest.fixture
def cluster(odradek_cluster) -> Cluster:
    return odradek_cluster(BROKERS, config=CONFIG)


def no_java() -> JavaPrograms:
    raise AssertionError("this test runs no Java group member")


# -- the group coordinator dies ----------------------------------------------------------------


def test_group_survives_the_kill_of_its_coordinator(cluster: Cluster, tmp_path: Path) -> None:
    topic, gid = unique_name("orders"), unique_name("group")
    cluster.create_topic(topic, PARTITIONS, BROKERS)
    group = Group(cluster, topic, gid, tmp_path, no_java)
    try:
        members = [group.start("confluent-kafka"), group.start("kafka-python")]
        group.settled(members)
        before = [f"before-{i}" for i in range(60)]
        produce(cluster, topic, before, acks="all")
        group.consumed(before)
        group.until(lambda: sum(committed(cluster, gid).values()) == 60, "commits of 60")
        at_kill = committed(cluster, gid)

        victim = group_coordinator(cluster, gid)
        cluster.kill(victim)
        cluster.wait_for_leader(
            OFFSETS_TOPIC, group_partition(gid, INTERNAL_PARTITIONS), not_on=victim
        )
        assert committed(cluster, gid) == at_kill  # the new coordinator has every commit

        after = [f"after-{i}" for i in range(60)]
        produce(cluster, topic, after, acks="all")
        group.consumed(after)
        assert_exactly_once(group, before)  # nothing committed was read again
        group.until(lambda: sum(committed(cluster, gid).values()) == 120, "commits of 120")
        assert group_coordinator(cluster, gid) != victim
        for m in members:
            m.terminate()

        late = [f"late-{i}" for i in range(12)]
        produce(cluster, topic, late, acks="all")
        newcomer = group.start("kafka-python")
        group.consumed(late, [newcomer])
        assert sorted(newcomer.values) == sorted(late)  # resumed from the committed offsets
    finally:
        group.cleanup()


def test_commit_is_answered_once_replicated(cluster: Cluster) -> None:
    topic, gid = unique_name("ledger"), unique_name("group")
    cluster.create_topic(topic, 1, BROKERS)
    tp = TopicPartition(topic, 0)

    def commit(offset: int) -> None:
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=gid)
        try:
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
        finally:
            consumer.close()

    commit(1)  # creates __consumer_offsets and the group
    index = group_partition(gid, INTERNAL_PARTITIONS)
    cluster.wait_for_replication(OFFSETS_TOPIC, index)
    victim = cluster.leader(OFFSETS_TOPIC, index)
    end = cluster.log_end_offset(victim, OFFSETS_TOPIC, index)
    cluster.cut_off_peers(victim)  # the followers cannot fetch the next commit yet
    with ThreadPoolExecutor(1) as pool:
        answered = pool.submit(commit, 42)
        wait_for(
            lambda: cluster.log_end_offset(victim, OFFSETS_TOPIC, index) > end,
            WAIT_S,
            message="timed out waiting for the commit in the coordinator's log",
        )
        cluster.heal()
        answered.result(WAIT_S)
    cluster.kill(victim)  # right after the answer: the followers must have the commit
    cluster.wait_for_leader(OFFSETS_TOPIC, index, not_on=victim)
    wait_for(
        lambda: committed(cluster, gid).get(0) == 42,
        WAIT_S,
        message="timed out waiting for the commit on the new coordinator",
    )


# -- the transaction coordinator dies ----------------------------------------------------------


@pytest.mark.parametrize(
    "client", ["confluent-kafka", pytest.param("java", marks=pytest.mark.slow)]
)
def test_transactions_survive_the_kill_of_their_coordinator(
    cluster: Cluster, client: str, request: pytest.FixtureRequest
) -> None:
    topic, tid = unique_name("payments"), unique_name("txn")
    cluster.create_topic(topic, 3, BROKERS)
    java = request.getfixturevalue("java") if client == "java" else None
    drv = make_driver(client, cluster.bootstrap, java)
    try:

        def transaction(tag: str, count: int, end: str | None) -> list[str]:
            keys = [f"{tag}-{i}" for i in range(count)]
            for i, key in enumerate(keys):
                drv(f"p send {topic} {i % 3} {key} v")
            if end:
                drv(f"p {end}")
            return keys

        drv(f"producer p {tid}")
        drv("p init")
        drv("p begin")
        committed_keys = transaction("first", 9, "commit")
        drv("p begin")
        aborted = transaction("aborted", 9, "flush")  # in the log, then aborted
        drv("p abort")
        drv("p begin")
        committed_keys += transaction("across", 6, "flush")  # sent and acknowledged

        victim = cluster.leader(TXN_TOPIC, txn_partition(tid, INTERNAL_PARTITIONS))
        cluster.kill(victim)
        committed_keys += transaction("across-late", 6, "commit")  # same transaction
        drv("p begin")
        committed_keys += transaction("after", 9, "commit")
        assert cluster.leader(TXN_TOPIC, txn_partition(tid, INTERNAL_PARTITIONS)) != victim

        end_marks(cluster.bootstrap, topic)
        records, _ = drv.consume("read_committed", topic)
        keys = [key for _p, _o, key, _v in records]
        assert sorted(keys) == sorted(committed_keys)  # each once; none of the aborted
        assert not set(keys) & set(aborted)
    finally:
        drv.close()


# -- controlled shutdown of a leader -----------------------------------------------------------


class Writer:
    """A thread writing numbered records (`tag-i` to partition i % partitions) in chunks until
    stopped; `acked` is every value acknowledged, in acknowledgement order."""

    CHUNK = 20

    def __init__(self, tag: str, send: Callable[[list[tuple[int, bytes]]], list[bytes]]) -> None:
        self.tag = tag
        self.send = send
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"writer-{tag}")
        self._thread.start()

    def _run(self, partitions: int = 3) -> None:
        i = 0
        while not self._stop.is_set():
            chunk = [
                (n % partitions, b"%s-%06d" % (self.tag.encode(), n))
                for n in range(i, i + self.CHUNK)
            ]
            i += self.CHUNK
            try:
                self.acked += self.send(chunk)
            except Exception as exc:  # a failure the test reports
                self.failed.append(repr(exc))
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), f"{self.tag} writer stuck"


def confluent_writer(bootstrap: str, topic: str) -> tuple[Writer, Callable[[], None]]:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )

    def send(chunk: list[tuple[int, bytes]]) -> list[bytes]:
        acked: list[bytes] = []
        errors: list[str] = []

        def report(err, msg) -> None:
            (errors.append(str(err)) if err else acked.append(msg.value()))

        for partition, value in chunk:
            producer.produce(topic, value, partition=partition, on_delivery=report)
        assert producer.flush(WAIT_S) == 0 and not errors, errors
        return acked

    return Writer("ck", send), lambda: producer.flush(5)


def kafka_python_writer(bootstrap: str, topic: str) -> tuple[Writer, Callable[[], None]]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        retries=100,
        retry_backoff_ms=50,
        max_in_flight_requests_per_connection=1,  # retries keep the order
    )

    def send(chunk: list[tuple[int, bytes]]) -> list[bytes]:
        futures = [(v, producer.send(topic, v, partition=p)) for p, v in chunk]
        producer.flush(WAIT_S)
        return [v for v, f in futures if f.get(0) is not None]

    return Writer("kp", send), lambda: producer.close(5)


class Reader:
    """A confluent-kafka group consumer in a thread; `seen` is (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
            }
        )
        self.consumer.subscribe([topic])
        self.seen: list[tuple[int, int, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="reader")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self.consumer.consume(200, 0.1):
                if not m.error():
                    self.seen.append((m.partition(), m.offset(), m.value()))

    def values(self) -> set[bytes]:
        return {v for _p, _o, v in list(self.seen)}

    def log(self) -> dict[int, list[bytes]]:
        """Each partition's records by offset, re-deliveries folded."""
        by_offset = {(p, o): v for p, o, v in list(self.seen)}
        out: dict[int, list[bytes]] = {}
        for (p, _o), v in sorted(by_offset.items()):
            out.setdefault(p, []).append(v)
        return out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self.consumer.close()


def per_partition(values: list[bytes], partitions: int = 3) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for v in values:
        out[int(v.rsplit(b"-", 1)[1]) % partitions].append(v)
    return out


def test_clients_ride_through_a_controlled_shutdown(cluster: Cluster) -> None:
    topic = unique_name("stream")
    cluster.create_topic(topic, 3, BROKERS)
    reader = Reader(cluster.bootstrap, topic, unique_name("group"))
    ck_writer, ck_close = confluent_writer(cluster.bootstrap, topic)
    kp_writer, kp_close = kafka_python_writer(cluster.bootstrap, topic)
    writers = [ck_writer, kp_writer]
    try:

        def carry_on(what: str, more: int = 200) -> None:
            marks = [len(w.acked) + more for w in writers]
            wait_for(
                lambda: all(
                    len(w.acked) >= m or w.failed for w, m in zip(writers, marks, strict=True)
                ),
                WAIT_S,
                message=f"timed out waiting for both producers to carry on ({what})",
            )
            assert not any(w.failed for w in writers), [w.failed for w in writers]

        carry_on("before")
        victim = cluster.leader(topic, 0)
        cluster.stop_broker(victim)
        carry_on("with the leader stopped")
        cluster.start_broker(victim)
        for p in range(3):
            cluster.wait_for_isr(topic, p, size=BROKERS)
        carry_on("after the restart")
    finally:
        for w in writers:
            w.stop()
        ck_close()
        kp_close()
    try:
        acked = {v for w in writers for v in w.acked}
        wait_for(
            lambda: acked <= reader.values(),
            WAIT_S,
            message="timed out waiting for every acknowledged record to be read",
        )
    finally:
        reader.stop()
    assert not any(w.failed for w in writers), [w.failed for w in writers]
    for p, records in reader.log().items():
        mine = [v for v in records if v.startswith(b"ck-")]
        assert mine == per_partition(ck_writer.acked)[p]  # exactly once, in order
        theirs = [v for v in records if v.startswith(b"kp-")]
        assert list(dict.fromkeys(theirs)) == per_partition(kp_writer.acked)[p]  # in order
    for p in range(INTERNAL_PARTITIONS):
        cluster.wait_for_isr(OFFSETS_TOPIC, p, size=BROKERS)


# -- Java: an idempotent producer through a leader kill ----------------------------------------


class JavaProcess:
    """A Java program whose stdout lines are collected by a thread, fed lines on stdin."""

    def __init__(self, java: JavaPrograms, name: str, args: list[str], log: Path) -> None:
        classes = java.compile(name)
        cmd = [java._tool("java"), *java.jvm_args, "-cp", java._cp(classes), name, *args]
        self._stderr = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        self.lines: list[str] = []
        self.log = log
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def last(self, word: str) -> list[str]:
        """The words of the last line starting with `word` ([] if none)."""
        for line in reversed(list(self.lines)):
            if line.startswith(word + " "):
                return line.split(" ")
        return []

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            self.close()
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()

    def describe(self) -> str:
        return "\n".join(self.lines[-20:]) + "\n" + self.log.read_text(errors="replace")[-3000:]


def test_java_idempotent_producer_rides_through_a_leader_kill(
    cluster: Cluster, java: JavaPrograms, tmp_path: Path
) -> None:
    topic = unique_name("java")
    cluster.create_topic(topic, 3, BROKERS)
    program = JavaProcess(
        java, "FailoverProducer", [cluster.bootstrap, topic, "3"], tmp_path / "java.stderr"
    )
    try:

        def acked() -> int:
            assert program.proc.poll() is None, program.describe()
            words = program.last("ACKED")
            return int(words[1]) if words else 0

        wait_for(
            lambda: acked() >= 500, 60, message="timed out waiting for the Java producer to start"
        )
        victim = cluster.leader(topic, 0)
        cluster.kill(victim)
        at_kill = acked()
        wait_for(
            lambda: acked() >= at_kill + 500,
            WAIT_S,
            message="timed out waiting for the Java producer to carry on",
        )
        program.tell("stop")
        assert program.finish(90) == 0, program.describe()
    finally:
        program.close()
    assert program.lines[-1] == "DONE", program.describe()
    produced = int(program.last("PRODUCED")[1])
    got: dict[int, list[str]] = {p: [] for p in range(3)}
    for line in program.lines:
        if line.startswith("REC "):
            _rec, partition, _offset, value = line.split(" ")
            got[int(partition)].append(value)
    want = {p: [f"j-{n:06d}" for n in range(p, produced, 3)] for p in range(3)}
    assert got == want  # every acknowledged record, exactly once, in order
