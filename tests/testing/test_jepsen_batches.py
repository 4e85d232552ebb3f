"""The Jepsen runner's read of the log's batch headers (`jepsen.batches`) against a real
broker, and the monitor's high watermarks with the leader epoch that answered them: what the
checkers use to tell a client's epoch-bump duplicate and a deposed leader's watermark from a
broker's anomaly."""

from __future__ import annotations

import random

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.testing.jepsen.batches import batch_at, read_batches
from odradek.testing.jepsen.workload import _high_watermarks


def _produce(bootstrap: str, topic: str, settings: dict[str, object], n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **settings})
    rng = random.Random(n)
    txn = "transactional.id" in settings
    if txn:
        p.init_transactions(20)
        p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"v{i:04}".encode() * rng.randint(150, 250), partition=i % 2)
    if txn:
        p.commit_transaction(20)
    assert p.flush(20) == 0


def test_every_batch_header_is_read_with_its_producer_and_epochs(odradek_broker, odradek_topic):
    topic = odradek_topic(partitions=2)
    _produce(odradek_broker.bootstrap, topic, {"enable.idempotence": True}, 3000)
    _produce(odradek_broker.bootstrap, topic, {"transactional.id": f"{topic}-t"}, 10)
    got, why = read_batches(odradek_broker.bootstrap, topic, 2)
    assert why == ""
    for key in (0, 1):
        batches = got[key]
        # contiguous offsets, from 0 to the end (more than one Fetch answer of 1 MiB): the
        # 1,500 plain records, 5 transactional ones and the commit marker
        assert batches[0].base_offset == 0 and batches[-1].last_offset == 1505
        pairs = zip(batches, batches[1:], strict=False)
        assert all(a.last_offset + 1 == b.base_offset for a, b in pairs)
        plain = [b for b in batches if not b.transactional]
        assert len({b.producer_id for b in plain}) == 1 and plain[0].producer_id >= 0
        assert plain[0].base_sequence == 0 and {b.producer_epoch for b in plain} == {0}
        # sequences follow offsets within the plain producer's batches
        assert all(b.base_sequence == b.base_offset for b in plain)
        assert batches[-1].control and batches[-1].transactional
        assert batch_at(batches, 1500) is not None and batch_at(batches, 1500).transactional
        assert batch_at(batches, 1506) is None
        assert all(b.leader_epoch == 0 for b in batches)


def test_the_monitor_reads_each_high_watermark_with_its_leader_epoch(odradek_broker, odradek_topic):
    topic = odradek_topic(partitions=2)
    _produce(odradek_broker.bootstrap, topic, {"enable.idempotence": True}, 7)
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap})
    # The monitor keeps the keys that answered within its one-second ListOffsets timeout and
    # asks again 50 ms later; a fresh AdminClient spends part of that second connecting and
    # reading Metadata, which at CI's load can take all of it (both keys missing, CI on 85bc68b).
    # So the test connects first, then asks as the monitor does, a bounded number of times.
    admin.list_topics(topic, timeout=20)
    tps = [TopicPartition(topic, k) for k in (0, 1)]
    for _ in range(20):
        hw, epochs = _high_watermarks(admin, tps)
        if len(hw) == 2:
            break
    assert hw == {0: 4, 1: 3}
    assert epochs == {0: 0, 1: 0}
