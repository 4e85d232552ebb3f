"""Real clients against a replicating cluster.

- `odradek cluster --brokers 3` as a user runs it (a child process; three brokers in it that
  replicate over TCP): it prints every broker's address, each broker describes the same three-
  broker cluster, kafka-python, confluent-kafka and aiokafka each write acks=all to a topic with
  replication factor 3 and read everything back through a consumer group (whose offsets live in
  a replicated `__consumer_offsets`), and SIGTERM stops it cleanly.
- In-process `odradek.testing.Cluster`: an aiokafka idempotent producer keeps writing with
  acks=all while the leader is killed and later comes back; every acknowledged record is read
  back once, in order.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import confluent_kafka as ck
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from compat_tests.harness import BrokerProcess, unique_name
from odradek.testing import Cluster
from odradek.testing.polling import poll_until

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

BROKERS = 3
PARTITIONS = 3
RECORDS = 60
WAIT_S = 30.0
_LISTENER = re.compile(r"PLAINTEXT://([^,\s]+)")


class ClusterProcess(BrokerProcess):
    """`python -m odradek cluster --brokers N` in a child process (free ports)."""

    def __init__(self, work_dir: Any, brokers: int, **kwargs: Any) -> None:
        super().__init__(work_dir, **kwargs)
        self.brokers = brokers

    def command(self) -> list[str]:
        args = [
            self.python,
            "-m",
            "odradek",
            "cluster",
            "--brokers",
            str(self.brokers),
            "--port",
            "0",
            "--base-dir",
            str(self.data_dir),
        ]
        settings = {"replica.fetch.wait.max.ms": "100", **self.overrides}
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    @property
    def addresses(self) -> list[str]:
        assert self.ready_line is not None
        return _LISTENER.findall(self.ready_line)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses) if self.ready_line else super().bootstrap


@pytest.fixture(scope="module")
def cluster_process(tmp_path_factory: pytest.TempPathFactory):
    proc = ClusterProcess(tmp_path_factory.mktemp("cluster"), BROKERS)
    proc.start()
    yield proc
    status = proc.stop()
    assert status == 0, proc.log_tail()


def create_replicated(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [NewTopic(name, PARTITIONS, BROKERS, topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        admin.close()
    deadline = time.monotonic() + WAIT_S
    while True:  # every broker knows the topic and every ISR is full
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            (desc,) = admin.describe_topics([name])
        finally:
            admin.close()
        parts = desc["partitions"]
        if len(parts) == PARTITIONS and all(len(p["isr_nodes"]) == BROKERS for p in parts):
            return
        assert time.monotonic() < deadline, desc
        time.sleep(0.05)


def expected() -> dict[int, list[bytes]]:
    return {p: [b"r%d" % i for i in range(p, RECORDS, PARTITIONS)] for p in range(PARTITIONS)}


def test_cli_prints_every_broker_and_each_describes_the_cluster(cluster_process) -> None:
    addresses = cluster_process.addresses
    assert len(addresses) == BROKERS
    log = cluster_process.log_text()
    for node, address in enumerate(addresses):
        assert f"broker {node} listening on {address}" in log
    for address in addresses:
        admin = KafkaAdminClient(bootstrap_servers=address)
        try:
            cluster = admin.describe_cluster()
        finally:
            admin.close()
        found = sorted(f"{b['host']}:{b['port']}" for b in cluster["brokers"])
        assert found == sorted(addresses)
        assert cluster["controller_id"] == 0


def test_kafka_python_replicated_round_trip(cluster_process) -> None:
    topic = unique_name("kafka-python")
    create_replicated(cluster_process.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=cluster_process.bootstrap, acks="all")
    futures = [producer.send(topic, b"r%d" % i, partition=i % PARTITIONS) for i in range(RECORDS)]
    producer.flush()
    assert all(f.get(WAIT_S).offset >= 0 for f in futures)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster_process.bootstrap,
        group_id=topic,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        for m in poll_until(consumer, lambda got: len(got) >= RECORDS, WAIT_S):
            got[m.partition].append(m.value)
        consumer.commit()
    finally:
        consumer.close()
    assert got == expected()


def test_confluent_kafka_replicated_round_trip(cluster_process) -> None:
    topic = unique_name("confluent")
    create_replicated(cluster_process.bootstrap, topic)
    producer = ck.Producer(
        {"bootstrap.servers": cluster_process.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    errors: list[Any] = []
    for i in range(RECORDS):
        producer.produce(
            topic,
            value=b"r%d" % i,
            partition=i % PARTITIONS,
            on_delivery=lambda err, msg: err and errors.append(err),
        )
    assert producer.flush(WAIT_S) == 0 and errors == []
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster_process.bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while sum(map(len, got.values())) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                got[msg.partition()].append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == expected()


def test_aiokafka_replicated_round_trip(cluster_process) -> None:
    topic = unique_name("aiokafka")
    create_replicated(cluster_process.bootstrap, topic)

    async def body() -> dict[int, list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster_process.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait(topic, b"r%d" % i, partition=i % PARTITIONS)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster_process.bootstrap,
            group_id=topic,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        try:
            deadline = time.monotonic() + WAIT_S
            while sum(map(len, got.values())) < RECORDS and time.monotonic() < deadline:
                for tp, msgs in (await consumer.getmany(timeout_ms=300)).items():
                    got[tp.partition] += [m.value for m in msgs]
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(body(), 3 * WAIT_S)) == expected()


def test_aiokafka_idempotent_producer_rides_through_a_leader_kill(tmp_path) -> None:
    config = {
        "replica.lag.time.max.ms": "1000",
        "replica.fetch.wait.max.ms": "100",
        "min.insync.replicas": "2",
    }
    with Cluster(3, topics={"orders": (1, 3)}, config=config, data_dir=str(tmp_path)) as cluster:

        async def body() -> tuple[list[bytes], list[bytes]]:
            producer = AIOKafkaProducer(
                bootstrap_servers=cluster.bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                request_timeout_ms=10000,
                retry_backoff_ms=50,
                metadata_max_age_ms=1000,
            )
            await producer.start()
            acked: list[bytes] = []
            killed = restarted = False
            try:
                i = 0
                deadline = time.monotonic() + 3 * WAIT_S
                while len(acked) < 3000:
                    assert time.monotonic() < deadline, f"{len(acked)} acknowledged"
                    batch = [await producer.send("orders", b"m%06d" % (i + k)) for k in range(50)]
                    i += 50
                    for fut in batch:
                        await fut
                    acked += [b"m%06d" % n for n in range(i - 50, i)]
                    if len(acked) >= 1000 and not killed:
                        victim = cluster.leader("orders")
                        await asyncio.to_thread(cluster.kill, victim)
                        killed = True
                    if len(acked) >= 2000 and not restarted:
                        await asyncio.to_thread(cluster.restart, victim)
                        restarted = True
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(
                bootstrap_servers=cluster.bootstrap,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await consumer.start()
            got: list[bytes] = []
            try:
                consumer.assign([AioTopicPartition("orders", 0)])
                await consumer.seek_to_beginning()
                deadline = time.monotonic() + WAIT_S
                while len(got) < len(acked) and time.monotonic() < deadline:
                    for msgs in (await consumer.getmany(timeout_ms=300)).values():
                        got += [m.value for m in msgs]
            finally:
                await consumer.stop()
            return acked, got

        acked, got = asyncio.run(body())
        assert got == acked  # every acknowledged record, once, in order
        cluster.wait_for_isr("orders", size=3)
